/**
 * One concept over 400 lines: the shipped dashboard against one running stack.
 * The Grafana dashboard shipped in the chart (charts/webcodex/dashboards/webcodex.json) against
 * a running distributed stack (six processes, real Postgres and Redis, a local-process
 * provisioner): after real traffic (reads, a Job, a failed call, a created Project, calls over
 * the rate limit) every service's /metrics is scraped once, and
 * - the dashboard JSON is a valid Grafana dashboard, every metric it queries is exported (by
 *   its type: rate() over counters and histogram buckets, gauges as they are), and every label
 *   it groups by is on that metric's series;
 * - every exported metric name follows the OpenTelemetry naming rules as they map to Prometheus;
 * - the dashboard is rendered from the scraped values in headless chromium (no Grafana here:
 *   each panel's query is evaluated over the one scrape, rates as totals since start) and saved
 *   as a screenshot (docs/images/dashboard.png when WEBCODEX_WRITE_DOC_IMAGES=1).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { projectIdFor, SERVICES } from "@webcodex/cli";
import type { DistributedStack, ServiceName } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, startTestStack, tempDir, until } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const DASHBOARD = join(repo, "charts/webcodex/dashboards/webcodex.json");
const CHROMIUM = "/usr/bin/chromium";
const imagesDir = process.env["WEBCODEX_WRITE_DOC_IMAGES"] === "1" ? join(repo, "docs/images") : tempDir("wcx-dashboard-shot-");
const token = `t-${randomBytes(16).toString("hex")}`;

type Labels = Record<string, string>;
interface Sample {
  name: string;
  labels: Labels;
  value: number;
}
interface Scrape {
  /** Metric family name → its Prometheus type, over all services. */
  types: Map<string, string>;
  samples: Sample[];
}

/** Parses the Prometheus text format; each sample gets `job` = the service that served it (as a per-service scrape job would). */
function parseScrape(texts: Array<[ServiceName, string]>): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const [service, text] of texts) {
    for (const line of text.split("\n")) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) {
        const [, name, kind] = type as unknown as [string, string, string];
        const known = types.get(name);
        assert.ok(known === undefined || known === kind, `${name} is a ${kind} in ${service} but a ${known} elsewhere`);
        types.set(name, kind);
        continue;
      }
      if (line === "" || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      assert.ok(m, `a sample line: ${line}`);
      const labels: Labels = { job: service };
      for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
      samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
    }
  }
  return { types, samples };
}

interface Target {
  expr: string;
  legendFormat: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: Target[];
  fieldConfig?: { defaults?: { unit?: string } };
}

/** One query of the dashboard, in the forms it uses. */
interface Query {
  kind: "quantile" | "sum";
  metric: string;
  rate: boolean;
  by: string[];
  quantile?: number;
  matchers: Array<{ label: string; op: "=" | "!="; value: string }>;
}

const RATE = "\\[\\$__rate_interval\\]";
const SELECTOR = "([a-z_][a-z0-9_]*)(?:\\{([^}]*)\\})?";
function parseQuery(expr: string): Query | undefined {
  const matchers = (text: string | undefined) =>
    [...(text ?? "").matchAll(/([a-z_]+)(!?=)"([^"]*)"/g)].map((m) => ({ label: m[1] as string, op: m[2] as "=" | "!=", value: m[3] as string }));
  const by = (text: string | undefined) =>
    (text ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  let m = new RegExp(`^histogram_quantile\\(([0-9.]+), sum by \\(([a-z_, ]+)\\) \\(rate\\(${SELECTOR}${RATE}\\)\\)\\)$`).exec(expr);
  if (m)
    return { kind: "quantile", quantile: Number(m[1]), by: by(m[2]).filter((l) => l !== "le"), metric: m[3] as string, matchers: matchers(m[4]), rate: true };
  m = new RegExp(`^sum(?: by \\(([a-z_, ]+)\\))? \\(rate\\(${SELECTOR}${RATE}\\)\\)$`).exec(expr);
  if (m) return { kind: "sum", by: by(m[1]), metric: m[2] as string, matchers: matchers(m[3]), rate: true };
  m = new RegExp(`^sum(?: by \\(([a-z_, ]+)\\))? ?\\(${SELECTOR}\\)$`).exec(expr);
  if (m) return { kind: "sum", by: by(m[1]), metric: m[2] as string, matchers: matchers(m[3]), rate: false };
  return undefined;
}

/** The base family of a series name (`x_bucket`, `x_sum`, `x_count` of histogram `x`). */
function family(scrape: Scrape, name: string): string {
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return base !== name && scrape.types.get(base) === "histogram" ? base : name;
}

const legend = (format: string, labels: Labels) => format.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (_, l: string) => labels[l] ?? "");

/**
 * A query over one scrape: sums as Prometheus would, a rate as the total since the process
 * started (one scrape has no rate), a quantile by linear interpolation in the buckets as
 * histogram_quantile does, over every observation since start.
 */
function evaluate(scrape: Scrape, q: Query, legendFormat: string): Array<{ legend: string; value: number }> {
  const selected = scrape.samples.filter(
    (s) => s.name === q.metric && q.matchers.every((m) => (m.op === "=" ? s.labels[m.label] === m.value : s.labels[m.label] !== m.value)),
  );
  const groups = new Map<string, { labels: Labels; samples: Sample[] }>();
  for (const s of selected) {
    const labels = Object.fromEntries(q.by.map((l) => [l, s.labels[l] ?? ""]));
    const key = JSON.stringify(labels);
    const g = groups.get(key) ?? { labels, samples: [] };
    g.samples.push(s);
    groups.set(key, g);
  }
  const out: Array<{ legend: string; value: number }> = [];
  for (const { labels, samples } of groups.values()) {
    if (q.kind === "sum") {
      out.push({ legend: legend(legendFormat, labels), value: samples.reduce((a, s) => a + s.value, 0) });
      continue;
    }
    const byLe = new Map<number, number>();
    for (const s of samples) {
      const le = s.labels["le"] === "+Inf" ? Infinity : Number(s.labels["le"]);
      byLe.set(le, (byLe.get(le) ?? 0) + s.value);
    }
    const buckets = [...byLe.entries()].sort((a, b) => a[0] - b[0]);
    const total = buckets.at(-1)?.[1] ?? 0;
    if (total === 0) continue;
    const rank = (q.quantile as number) * total;
    let value = NaN;
    for (let i = 0, prevLe = 0, prevCum = 0; i < buckets.length; i++) {
      const [le, cum] = buckets[i] as [number, number];
      if (cum >= rank) {
        value = le === Infinity ? prevLe : prevLe + (le - prevLe) * (cum === prevCum ? 0 : (rank - prevCum) / (cum - prevCum));
        break;
      }
      prevLe = le;
      prevCum = cum;
    }
    out.push({ legend: legend(legendFormat, labels), value });
  }
  return out.sort((a, b) => a.legend.localeCompare(b.legend));
}

// ── OpenTelemetry metric naming, as it maps to Prometheus ───────────────────────────────
/** Problems with one exported name (empty: it follows the rules). */
function namingProblems(name: string, type: string): string[] {
  const problems: string[] = [];
  // OTel instrument name syntax (ASCII letter first, at most 255 characters)...
  if (!/^[A-Za-z][A-Za-z0-9_.\-/]{0,254}$/.test(name)) problems.push("is not a valid OpenTelemetry instrument name");
  // ...and the Prometheus form OTel exports to: lowercase snake case, no doubled or trailing underscore.
  if (!/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/.test(name)) problems.push("is not lowercase snake case");
  // Namespaced: WebCodex's own under webcodex_, the standard process and Node.js runtime ones under theirs.
  if (!/^(webcodex|process|nodejs)_/.test(name)) problems.push("is not in the webcodex_, process_ or nodejs_ namespace");
  // Counters end in _total, nothing else does.
  if (type === "counter" && !name.endsWith("_total")) problems.push("is a counter without the _total suffix");
  if (type !== "counter" && name.endsWith("_total")) problems.push(`is a ${type} with the _total suffix`);
  // Units in base units, spelled out as the suffix: seconds, bytes; never milliseconds or abbreviations.
  if (/_(ms|millis|milliseconds|msec|us|ns|secs?|kb|mb|kib|mib)(_|$)/.test(name)) problems.push("uses a non-base or abbreviated unit");
  if (type === "histogram" && !name.endsWith("_seconds")) problems.push("is a histogram (recorded in seconds) without the _seconds unit suffix");
  if (/(memory|heap|bytes?)(_|$)/.test(name) && !/_bytes$/.test(name)) problems.push("is a size without the _bytes unit suffix");
  // The unit is the last word (before _total); a plural of it elsewhere is a naming slip.
  if (/_seconds_(?!total$)|_bytes_(?!total$)/.test(name)) problems.push("has its unit in the middle of the name");
  return problems;
}

/** Every instrument registered in the sources (services, libs, the CLI): [name, Prometheus type]. */
function registeredMetrics(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules" && entry.name !== "dist") walk(path);
      } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") && !entry.name.endsWith(".d.ts")) {
        const text = readFileSync(path, "utf8");
        for (const m of text.matchAll(/\.(counter|histogram|gauge|sampledGauge)\(\s*"([a-z][a-z0-9_]*)"/g))
          out.push([m[2] as string, m[1] === "sampledGauge" ? "gauge" : (m[1] as string)]);
      }
    }
  };
  for (const dir of ["libs", "services", "tools/cli/src"]) walk(join(repo, dir));
  return out;
}

describe("the Grafana dashboard against a running stack", { timeout: 300_000 }, () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let mcp: Client;
  let scrape: Scrape;
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
    title: string;
    uid: string;
    schemaVersion: number;
    panels: Panel[];
    templating: { list: Array<{ name: string; type: string; query: string }> };
  };
  const panels = dashboard.panels.filter((p) => p.type !== "row");
  const metricsText = async (s: ServiceName) => (await fetch(`http://127.0.0.1:${stack.ports[s]}/metrics`)).text();

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const projectDir = createProjectDir({ "README.md": "# dashboard\n", "src/a.ts": "export const a = 1;\n" }, { name: "dashdemo" });
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir,
      workspacesDir: tempDir("wcx-dash-workspaces-"),
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token, WEBCODEX_RATE_LIMIT_PER_MINUTE: "30" },
    });
    mcp = await connectMcp(stack.mcpUrl, token);
    const project = `agent:local:${projectIdFor(projectDir)}`;
    // Real traffic: reads, a search, a Job, a refused call, a created Project.
    assert.equal((await callTool(mcp, "list_projects", {})).isError, false);
    assert.equal((await callTool(mcp, "read_files", { project, files: [{ path: "README.md" }] })).isError, false);
    assert.equal((await callTool(mcp, "search_project_texts", { project, queries: [{ pattern: "export" }] })).isError, false);
    const job = await callTool(mcp, "run_shell", { project, command: "echo dashboard", wait_ms: 30_000 });
    assert.equal(job.isError, false, JSON.stringify(job.result));
    assert.equal((await callTool(mcp, "read_files", { project: "agent:local:no-such-project", files: [{ path: "README.md" }] })).isError, true);
    const created = await callTool(mcp, "create_project", { name: "dash-created", source: { empty: {} }, wait_ms: 60_000 });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    await until(
      "the created Project's Runner registered (provisioning observed)",
      async () => /^webcodex_runner_provisioning_seconds_count 1$/m.test(await metricsText("runner-broker")),
      60_000,
      200,
    );
    // Over the per-principal limit: calls until one is refused.
    let limited = false;
    for (let i = 0; i < 60 && !limited; i++) limited = (await callTool(mcp, "list_projects", {})).result["reason_code"] === "rate_limited";
    assert.ok(limited, "a call over the rate limit was refused");
    // The fleet gauge is sampled from the registry (every 15 s): wait for both Runners.
    await until(
      "the fleet gauge counts both Runners",
      async () => {
        // A Runner whose heartbeat is late on a loaded machine counts as lost for that sample.
        const text = await metricsText("runner-broker");
        const connected = Number(/^webcodex_runners\{state="connected"\} (\d+)$/m.exec(text)?.[1] ?? 0);
        const lost = Number(/^webcodex_runners\{state="lost"\} (\d+)$/m.exec(text)?.[1] ?? 0);
        return connected >= 1 && connected + lost === 2;
      },
      45_000,
      500,
    );
    scrape = parseScrape(await Promise.all(SERVICES.map(async (s) => [s, await metricsText(s)] as [ServiceName, string])));
  });

  after(async () => {
    await mcp?.close();
    await stack?.stop();
    await db?.drop();
  });

  it("is a valid Grafana dashboard whose every query reads an exported metric by its type and groups by labels its series have", () => {
    assert.equal(typeof dashboard.title, "string");
    assert.match(dashboard.uid, /^[a-zA-Z0-9_-]{1,40}$/);
    assert.ok(dashboard.schemaVersion >= 36);
    assert.deepEqual(
      dashboard.templating.list.map((v) => [v.name, v.type, v.query]),
      [["datasource", "datasource", "prometheus"]],
    );
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
    for (const p of dashboard.panels) assert.ok(p.gridPos.x >= 0 && p.gridPos.x + p.gridPos.w <= 24 && p.gridPos.h > 0, `${p.title} fits the 24-column grid`);
    const queried = new Set<string>();
    for (const p of panels) {
      assert.deepEqual(p.datasource, { type: "prometheus", uid: "${datasource}" }, p.title);
      assert.ok((p.targets ?? []).length > 0, `${p.title} has queries`);
      for (const t of p.targets ?? []) {
        const q = parseQuery(t.expr);
        assert.ok(q, `${p.title}: a query of a known form: ${t.expr}`);
        const base = family(scrape, q.metric);
        const type = scrape.types.get(base);
        assert.ok(type, `${p.title}: ${q.metric} is exported by a service (${t.expr})`);
        queried.add(base);
        if (q.kind === "quantile")
          assert.ok(type === "histogram" && q.metric === `${base}_bucket`, `${p.title}: histogram_quantile over a histogram's buckets`);
        else if (q.rate) assert.equal(type, "counter", `${p.title}: rate() over a counter: ${q.metric}`);
        else assert.equal(type, "gauge", `${p.title}: ${q.metric} read as a gauge`);
        const series = scrape.samples.filter((s) => s.name === q.metric);
        assert.ok(series.length > 0, `${p.title}: ${q.metric} has series after the traffic`);
        for (const l of [...q.by, ...q.matchers.map((m) => m.label)])
          assert.ok(
            series.some((s) => l in s.labels),
            `${p.title}: ${q.metric} has the label ${l}`,
          );
      }
    }
    // What the dashboard is for: calls by tool and outcome, latency, Runner fleet, Jobs, quotas, provisioning time, audit lag.
    for (const m of [
      "webcodex_tool_calls_total",
      "webcodex_tool_call_seconds",
      "webcodex_runners",
      "webcodex_jobs",
      "webcodex_rate_limited_total",
      "webcodex_runner_provisioning_seconds",
      "webcodex_audit_backlog_records",
    ])
      assert.ok(queried.has(m), `the dashboard shows ${m}`);
  });

  it("every exported metric name follows the OpenTelemetry naming rules (as exported to Prometheus)", () => {
    assert.ok(scrape.types.size >= 15, `metrics from every service: ${[...scrape.types.keys()].join(", ")}`);
    const problems = [...scrape.types].flatMap(([name, type]) => namingProblems(name, type).map((p) => `${name} ${p}`));
    assert.deepEqual(problems, []);
    // And every instrument the code registers, including those only some modes serve (embedded).
    const registered = registeredMetrics();
    assert.ok(registered.length >= 10, JSON.stringify(registered));
    for (const name of scrape.types.keys())
      if (name.startsWith("webcodex_"))
        assert.ok(
          registered.some(([n]) => n === name),
          `${name} is found in the registration code`,
        );
    assert.deepEqual(
      registered.flatMap(([name, type]) => namingProblems(name, type).map((p) => `${name} ${p}`)),
      [],
    );
    // The rules do catch what they are for.
    assert.deepEqual(namingProblems("webcodex_calls", "counter"), ["is a counter without the _total suffix"]);
    assert.ok(namingProblems("webcodex_call_latency_ms", "histogram").length >= 2);
    assert.ok(namingProblems("WebCodex-Calls_total", "counter").length >= 1);
    assert.ok(namingProblems("calls_total", "counter").includes("is not in the webcodex_, process_ or nodejs_ namespace"));
  });

  it("renders every panel from the scraped values in headless chromium and saves a screenshot", async () => {
    const fmt = (unit: string | undefined, v: number) =>
      !Number.isFinite(v)
        ? "–"
        : unit === "s"
          ? v < 1
            ? `${(v * 1000).toFixed(v < 0.01 ? 1 : 0)} ms`
            : `${v.toFixed(2)} s`
          : unit === "bytes"
            ? `${(v / 2 ** 20).toFixed(0)} MiB`
            : String(Math.round(v * 100) / 100);
    const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
    const rendered: Record<string, Array<{ legend: string; value: number }>> = {};
    const cells = dashboard.panels.map((p) => {
      const style = `grid-column:${p.gridPos.x + 1}/span ${p.gridPos.w};grid-row:${p.gridPos.y + 1}/span ${p.gridPos.h}`;
      if (p.type === "row") return `<div class="row" style="${style}">${esc(p.title)}</div>`;
      const unit = p.fieldConfig?.defaults?.unit;
      const series = (p.targets ?? []).flatMap((t) => {
        const q = parseQuery(t.expr) as Query;
        return evaluate(scrape, q, t.legendFormat).map((s) => ({ ...s, note: q.rate ? (unit === "s" ? "" : " total") : "" }));
      });
      rendered[p.title] = series;
      const max = Math.max(...series.map((s) => (Number.isFinite(s.value) ? s.value : 0)), 1e-9);
      const bars = series.length
        ? series
            .map(
              (s) =>
                `<div class="bar"><span class="lbl">${esc(s.legend)}</span><span class="track"><span class="fill" style="width:${Math.max(1, (100 * (Number.isFinite(s.value) ? s.value : 0)) / max)}%"></span></span><span class="val">${esc(fmt(unit, s.value))}${s.note}</span></div>`,
            )
            .join("")
        : `<div class="empty">no data</div>`;
      return `<div class="panel" style="${style}"><div class="title">${esc(p.title)}</div>${bars}</div>`;
    });
    const html = `<!doctype html><html><head><meta charset="utf-8"><style>
      body{margin:0;background:#111217;color:#ccccdc;font:12px/1.35 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
      header{padding:10px 14px;border-bottom:1px solid #22252b}header h1{font-size:16px;margin:0;color:#fff}header p{margin:2px 0 0;color:#8e8e9a}
      .grid{display:grid;grid-template-columns:repeat(24,1fr);grid-auto-rows:28px;gap:6px;padding:8px 10px}
      .row{font-weight:600;color:#fff;align-self:end;font-size:13px}
      .panel{background:#181b1f;border:1px solid #22252b;border-radius:3px;padding:6px 8px;overflow:hidden}
      .title{font-weight:600;color:#fff;margin-bottom:6px}
      .bar{display:flex;align-items:center;gap:6px;margin:3px 0}.lbl{flex:0 0 42%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
      .track{flex:1;background:#22252b;height:10px;border-radius:2px}.fill{display:block;height:10px;background:#73bf69;border-radius:2px}
      .val{flex:0 0 auto;min-width:64px;text-align:right;color:#fff}.empty{color:#8e8e9a}
    </style></head><body><header><h1>${esc(dashboard.title)}</h1><p>Rendered from one /metrics scrape of a running distributed stack (no Grafana): rates shown as totals since start, quantiles over all observations.</p></header><div class="grid">${cells.join("")}</div></body></html>`;

    // The panels show the traffic: the Job's call, the refused one, the Runners, the provisioning.
    const value = (title: string, l: string) => rendered[title]?.find((s) => s.legend === l)?.value;
    assert.ok((value("Calls by tool and outcome", "run_shell success") ?? 0) >= 1, JSON.stringify(rendered["Calls by tool and outcome"]));
    assert.ok((value("Rate-limited requests", "principal") ?? 0) >= 1, JSON.stringify(rendered["Rate-limited requests"]));
    assert.equal((value("Runner fleet", "connected") ?? 0) + (value("Runner fleet", "lost") ?? 0), 2, "both Runners are in the fleet");
    assert.ok((value("Runner fleet", "connected") ?? 0) >= 1);
    assert.ok((value("Runner provisioning time", "p50") ?? 0) > 0, JSON.stringify(rendered["Runner provisioning time"]));
    assert.ok((value("Call latency", "p95") ?? 0) > 0);

    const context = await chromium.launchPersistentContext(tempDir("wcx-chromium-"), {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width: 1440, height: 900 },
    });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      await page.setContent(html);
      for (const p of panels) assert.equal((await page.locator(".panel .title", { hasText: p.title }).count()) >= 1, true, `${p.title} is on the page`);
      const file = join(imagesDir, "dashboard.png");
      const png = await page.screenshot({ fullPage: true });
      assert.ok(png.length > 20_000, `a real image (${png.length} bytes)`);
      writeFileSync(file, png);
    } finally {
      await context.close();
    }
  });
});
