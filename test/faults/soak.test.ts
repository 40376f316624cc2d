/**
 * Soak: 32 real MCP clients run a mixed workload (reads, searches, listings, guarded edits of
 * their own file, workspace changes, runtime status, short processes) against `webcodex dev`
 * (gateway, services and Runner in one process, plus its spawn host and the processes it
 * runs) for WEBCODEX_FAULTS_SOAK_SECONDS (`make faults`: 600; `make test`: 15). Every few
 * seconds the RSS and open file descriptors of every process of the server's tree are sampled
 * from /proc. It asserts that every call succeeds (or is refused by the project's concurrency
 * admission, structured and with nothing run), that each long-lived process stays within
 * the stated bounds, and (for runs of 5 minutes or more) that the p99 latency of the last
 * minute is at most 20% above the first minute's. Every 30 s it also records a memory series
 * into the report: the RSS of each long-lived process and, from the server's /metrics, its V8
 * heap, the memory outside it, and the embedded Postgres's WebAssembly memory.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, connectMcp, firstProjectRef } from "../support/mcp.js";
import { createProjectDir, startDevServer, tempDir, type DevServer } from "../support/processes.js";
import { recordFigures } from "./figures.js";
import { memoryBreakdown, residentBreakdown } from "./memory-breakdown.js";

const seconds = Number(process.env["WEBCODEX_FAULTS_SOAK_SECONDS"] ?? 15);
const CALLERS = 32;
const SAMPLE_MS = Number(process.env["WEBCODEX_FAULTS_SOAK_SAMPLE_MS"] ?? 3_000);
/** The comparison window: the first and the last minute (a quarter of a run shorter than 4 minutes). */
const WINDOW_MS = Math.min(60_000, (seconds * 1000) / 4);
const DRIFT_ASSERTED = seconds >= 300;
const SERIES_MS = Number(process.env["WEBCODEX_FAULTS_SOAK_SERIES_MS"] ?? 30_000);

/** Stated bounds for each process alive in both windows (see docs/reliability.md). */
export const SOAK_BOUNDS = {
  /** Last-window peak RSS at most this factor of the first window's peak, plus the slack below. */
  rss_growth_factor: 1.25,
  rss_slack_mib: 64,
  /** Absolute ceiling of any process's RSS. */
  rss_ceiling_mib: 1024,
  /** Last-window peak open descriptors at most this factor of the first window's peak, plus the slack below (descriptors follow the calls in flight). */
  fd_growth_factor: 1.5,
  fd_slack: 128,
  /** Absolute ceiling of any process's open descriptors. */
  fd_ceiling: 1024,
  /** p99 of the last minute at most this factor of the first minute's. */
  p99_drift_factor: 1.2,
};

interface Sample {
  t: number;
  pid: number;
  kind: string;
  rssKib: number;
  fds: number;
}
interface Call {
  t: number;
  ms: number;
  op: string;
}

function stat(pid: number): { ppid: number; comm: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = text.lastIndexOf(")");
    return { comm: text.slice(text.indexOf("(") + 1, close), ppid: Number(text.slice(close + 2).split(" ")[1]) };
  } catch {
    return undefined;
  }
}

/** The server's pid and every descendant, from /proc. */
function processTree(rootPid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const s = stat(pid);
    if (s === undefined) continue;
    children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  }
  const out: number[] = [];
  const queue = [rootPid];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

function sampleProcess(pid: number, rootPid: number, t: number): Sample | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const rssKib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const fds = readdirSync(`/proc/${pid}/fd`).length;
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      .split("\0")
      .filter((a) => a !== "");
    const kind =
      pid === rootPid
        ? "webcodex dev (gateway, services, Runner)"
        : cmd.some((a) => a.includes("spawn-host"))
          ? "spawn host"
          : cmd.slice(0, 2).join(" ") || (stat(pid)?.comm ?? "?");
    return { t, pid, kind, rssKib, fds };
  } catch {
    return undefined; // exited between listing and reading
  }
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

const loadAverage = () => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);

describe("soak: 32 concurrent MCP callers against webcodex dev", () => {
  let server: DevServer;
  let clients: Client[] = [];
  let project = "";
  const files: Record<string, string> = { "README.md": "# soak\n" };
  for (let i = 0; i < 40; i++) files[`src/m${i}.ts`] = `export const value${i} = ${i};\n// soak module ${i}\n`.repeat(20);
  for (let i = 0; i < CALLERS; i++) files[`work/c${i}.txt`] = "count: 0\n";

  before(async () => {
    const projectDir = createProjectDir(files, { name: "soak" });
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-soak-") });
    clients = await Promise.all(Array.from({ length: CALLERS }, () => connectMcp(server.mcpUrl, server.token)));
    project = await firstProjectRef(clients[0] as Client);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server?.stop();
  });

  it(
    `${seconds} s: every call succeeds or is refused at admission, RSS and descriptors stay within bounds, p99 does not drift`,
    { timeout: seconds * 1000 + 300_000 },
    async () => {
      const rootPid = server.child.pid as number;
      const calls: Call[] = [];
      const failures: string[] = [];
      let admissionRefusals = 0;
      const samples: Sample[] = [];
      const loads: Array<{ t: number; load1: number }> = [];
      const series: Array<Record<string, unknown>> = [];
      let latest: Sample[] = [];
      const started = performance.now();
      const deadline = started + seconds * 1000;
      const elapsed = () => performance.now() - started;

      const seriesPoint = async (t: number, now: Sample[]) => {
        const root = now.find((s) => s.pid === rootPid);
        const host = now.find((s) => s.kind === "spawn host");
        series.push({
          t_s: Math.round(t / 1000),
          calls: calls.length,
          rss_mib: root ? Math.round(root.rssKib / 1024) : undefined,
          ...(await memoryBreakdown(server.baseUrl)),
          ...residentBreakdown(rootPid),
          spawn_host_rss_mib: host ? Math.round(host.rssKib / 1024) : undefined,
          load1: loadAverage(),
        });
      };
      const sampler = (async () => {
        while (performance.now() < deadline) {
          const t = elapsed();
          const now: Sample[] = [];
          for (const pid of processTree(rootPid)) {
            const s = sampleProcess(pid, rootPid, t);
            if (s !== undefined) now.push(s);
          }
          samples.push(...now);
          latest = now;
          loads.push({ t: Math.round(t), load1: loadAverage() });
          await new Promise((resolve) => setTimeout(resolve, Math.min(SAMPLE_MS, Math.max(0, deadline - performance.now()))));
        }
      })();
      // The memory series on its own timer: a breakdown (a /metrics scrape, smaps) can take
      // seconds on a loaded machine, and must not hold up the process samples.
      const seriesLoop = (async () => {
        while (performance.now() < deadline) {
          await seriesPoint(elapsed(), latest);
          await new Promise((resolve) => setTimeout(resolve, Math.min(SERIES_MS, Math.max(0, deadline - performance.now()))));
        }
      })();

      const ops: Array<[string, number, (c: Client, i: number, n: number) => Promise<{ isError: boolean; result: Record<string, unknown> }>]> = [
        ["read_files", 4, (c, i, n) => callTool(c, "read_files", { project, files: [{ path: `work/c${i}.txt` }, { path: `src/m${n % 40}.ts`, end_line: 5 }] })],
        [
          "search_project_texts",
          2,
          (c, _i, n) => callTool(c, "search_project_texts", { project, queries: [{ pattern: `value${n % 40}` }, { pattern: "soak module", output: "count" }] }),
        ],
        ["list_project_files", 1, (c) => callTool(c, "list_project_files", { project, glob: "src/**/*.ts", max_results: 50 })],
        [
          "edit_project_files",
          2,
          async (c, i, n) => {
            const read = await callTool(c, "read_files", { project, files: [{ path: `work/c${i}.txt` }] });
            if (read.isError) return read; // refused at admission: no revision to guard an edit with
            const item = (read.result["items"] as Array<Record<string, unknown>> | undefined)?.[0] ?? {};
            const old = /count: \d+\n/.exec(String(item["content"] ?? ""))?.[0] ?? "count: 0\n";
            return callTool(c, "edit_project_files", {
              project,
              changes: [
                {
                  kind: "edit",
                  path: `work/c${i}.txt`,
                  expected_read_revision: item["read_revision"],
                  edits: [{ replace_exact: { old_text: old, new_text: `count: ${n}\n` } }],
                },
              ],
            });
          },
        ],
        ["read_workspace_changes", 1, (c) => callTool(c, "read_workspace_changes", { project })],
        ["get_runtime_status", 1, (c) => callTool(c, "get_runtime_status", {})],
        ["run_process", 1, (c) => callTool(c, "call_runtime_tool", { tool: "run_process", arguments: { project, args: ["true"] } })],
      ];
      const weighted = ops.flatMap((op) => Array.from({ length: op[1] }, () => op));

      await Promise.all(
        clients.map(async (client, i) => {
          for (let n = 1; performance.now() < deadline; n++) {
            const [op, , run] = weighted[(i * 7 + n) % weighted.length] as (typeof ops)[number];
            const callStarted = performance.now();
            try {
              const { isError, result } = await run(client, i, n);
              calls.push({ t: elapsed(), ms: performance.now() - callStarted, op });
              // 32 callers on one project exceed its concurrency admission (16): a call that waited
              // its admission time is refused, structured, with nothing run. Counted, not a failure.
              if (isError && result["reason_code"] === "rate_limited" && result["detail_code"] === "project_concurrency_limit") admissionRefusals++;
              else if (isError) failures.push(`${op}: ${String(result["reason_code"])}/${String(result["detail_code"] ?? "")}`);
            } catch (error) {
              failures.push(`${op}: the call did not answer: ${String(error)}`);
            }
          }
        }),
      );
      await sampler;
      await seriesLoop;
      const durationMs = elapsed();
      // The run ends when the last call answers, which can be seconds after the sampler's last
      // tick at the deadline: a closing sample puts the end of the run in the last window.
      const closing = processTree(rootPid).flatMap((pid) => sampleProcess(pid, rootPid, durationMs) ?? []);
      samples.push(...closing);
      await seriesPoint(durationMs, closing);

      // Per long-lived process (sampled in both windows): first and last window peaks.
      const first = (t: number) => t < WINDOW_MS;
      const last = (t: number) => t >= durationMs - WINDOW_MS;
      const byPid = new Map<number, Sample[]>();
      for (const s of samples) byPid.set(s.pid, [...(byPid.get(s.pid) ?? []), s]);
      const processes: Array<Record<string, unknown>> = [];
      const problems: string[] = [];
      let shortLived = 0;
      let shortLivedPeakRssKib = 0;
      for (const [pid, list] of byPid) {
        const peak = (f: (t: number) => boolean, k: "rssKib" | "fds") => Math.max(0, ...list.filter((s) => f(s.t)).map((s) => s[k]));
        const maxRss = Math.max(...list.map((s) => s.rssKib));
        const maxFds = Math.max(...list.map((s) => s.fds));
        if (maxRss > SOAK_BOUNDS.rss_ceiling_mib * 1024)
          problems.push(`pid ${pid} (${list[0]?.kind}): RSS ${Math.round(maxRss / 1024)} MiB above ${SOAK_BOUNDS.rss_ceiling_mib} MiB`);
        if (maxFds > SOAK_BOUNDS.fd_ceiling) problems.push(`pid ${pid} (${list[0]?.kind}): ${maxFds} descriptors above ${SOAK_BOUNDS.fd_ceiling}`);
        if (!list.some((s) => first(s.t)) || !list.some((s) => last(s.t))) {
          shortLived++;
          shortLivedPeakRssKib = Math.max(shortLivedPeakRssKib, maxRss);
          continue;
        }
        const figures = {
          pid,
          kind: list[0]?.kind,
          rss_mib_first_peak: Math.round(peak(first, "rssKib") / 1024),
          rss_mib_last_peak: Math.round(peak(last, "rssKib") / 1024),
          rss_mib_max: Math.round(maxRss / 1024),
          fds_first_peak: peak(first, "fds"),
          fds_last_peak: peak(last, "fds"),
          fds_max: maxFds,
        };
        processes.push(figures);
        const rssBound = figures.rss_mib_first_peak * SOAK_BOUNDS.rss_growth_factor + SOAK_BOUNDS.rss_slack_mib;
        if (figures.rss_mib_last_peak > rssBound)
          problems.push(
            `pid ${pid} (${figures.kind}): RSS ${figures.rss_mib_first_peak} → ${figures.rss_mib_last_peak} MiB, bound ${Math.round(rssBound)} MiB`,
          );
        const fdBound = figures.fds_first_peak * SOAK_BOUNDS.fd_growth_factor + SOAK_BOUNDS.fd_slack;
        if (figures.fds_last_peak > fdBound)
          problems.push(`pid ${pid} (${figures.kind}): descriptors ${figures.fds_first_peak} → ${figures.fds_last_peak}, bound ${Math.round(fdBound)}`);
      }

      const p99First = percentile(
        calls.filter((c) => first(c.t)).map((c) => c.ms),
        99,
      );
      const p99Last = percentile(
        calls.filter((c) => last(c.t)).map((c) => c.ms),
        99,
      );
      const perOp: Record<string, { calls: number; p50_ms: number; p99_ms: number }> = {};
      for (const [op] of ops) {
        const ms = calls.filter((c) => c.op === op).map((c) => c.ms);
        perOp[op] = { calls: ms.length, p50_ms: Math.round(percentile(ms, 50)), p99_ms: Math.round(percentile(ms, 99)) };
      }
      const loadFirst = loads.filter((l) => first(l.t)).map((l) => l.load1);
      const loadLast = loads.filter((l) => last(l.t)).map((l) => l.load1);
      const figures = {
        seconds,
        callers: CALLERS,
        stack: "webcodex dev (embedded: gateway, services and Runner in one process, plus its spawn host and the processes it runs)",
        window_s: WINDOW_MS / 1000,
        sample_interval_ms: SAMPLE_MS,
        samples: samples.length,
        calls: calls.length,
        failed_calls: failures.length,
        admission_refusals: admissionRefusals,
        calls_per_s: Math.round(calls.length / (durationMs / 1000)),
        p50_ms: Math.round(
          percentile(
            calls.map((c) => c.ms),
            50,
          ),
        ),
        p99_ms_first_window: Math.round(p99First),
        p99_ms_last_window: Math.round(p99Last),
        p99_drift: p99First === 0 ? 0 : Number((p99Last / p99First - 1).toFixed(3)),
        drift_asserted: DRIFT_ASSERTED,
        per_op: perOp,
        processes,
        short_lived_processes: shortLived,
        short_lived_peak_rss_mib: Math.round(shortLivedPeakRssKib / 1024),
        load1_first_window: loadFirst,
        load1_last_window: loadLast,
        cpus: readFileSync("/proc/cpuinfo", "utf8")
          .split("\n")
          .filter((l) => l.startsWith("processor")).length,
        memory_series: series,
        bounds: SOAK_BOUNDS,
        bound_problems: problems,
        failure_examples: [...new Set(failures)].slice(0, 10),
      };
      await recordFigures(seconds >= 300 ? "soak" : "soak_short", figures);
      if (process.env["WEBCODEX_FAULTS_VERBOSE"] === "1") console.log(JSON.stringify(figures, null, 1));

      assert.deepEqual(failures, [], "every call succeeds");
      assert.ok(
        processes.some((p) => p["pid"] === rootPid),
        "the server process was sampled through the run",
      );
      assert.deepEqual(problems, [], "every process stays within the stated bounds");
      const seriesTimes = series.map((p) => Number(p["t_s"]));
      assert.ok(
        series.length >= 2 &&
          seriesTimes[0] === 0 &&
          seriesTimes.at(-1) === Math.round(durationMs / 1000) &&
          series.every((p) => typeof p["rss_mib"] === "number"),
        `the memory series runs from the start to the end of the run, with the server's RSS at each point: ${JSON.stringify(series.map((p) => [p["t_s"], p["rss_mib"]]))}`,
      );
      if (DRIFT_ASSERTED) {
        assert.ok(
          p99Last <= p99First * SOAK_BOUNDS.p99_drift_factor,
          `p99 ${Math.round(p99First)} ms (first minute) → ${Math.round(p99Last)} ms (last minute); load ${loadFirst.join(",")} → ${loadLast.join(",")}`,
        );
      }
    },
  );
});
