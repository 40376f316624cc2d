/**
 * `make bench code_mode`: discovery tasks on one fixture repository, each solved twice against
 * `webcodex dev` with a Host that selects Code Mode: by the shortest fixed script of direct tool
 * calls (every result passes through the model), and by one run_code_cell (only its text does).
 * Both must produce the same answer. Per task: model-visible calls and bytes (the JSON of each
 * tools/call's params and whole result) of each strategy and their ratios (each at most 0.5x);
 * then the cell's overhead: its p50 wall time against the p50 of the same child calls made
 * directly (a ratio, and the difference), and an empty cell (sandbox start and the bridge alone)
 * against a trivial call.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { benchDir, cliPathForBench } from "./project.js";
import { connect, projectRefOf } from "./tool-call.js";
import { median, round, startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";

type Json = Record<string, unknown>;
type Call = (name: string, args: Json) => Promise<Json>;

/** Counts a strategy's model-visible calls and bytes. */
function metered(client: Client) {
  const m = {
    calls: 0,
    bytes: 0,
    call: (async (name, args) => {
      const res = await client.callTool({ name, arguments: args });
      m.calls++;
      m.bytes += Buffer.byteLength(JSON.stringify({ name, arguments: args })) + Buffer.byteLength(JSON.stringify(res));
      if (res.isError) throw new Error(`${name} failed: ${JSON.stringify(res.structuredContent)}`);
      return (res.structuredContent ?? {}) as Json;
    }) as Call,
  };
  return m;
}

const filler = (n: number, label: string) =>
  Array.from({ length: n }, (_, i) => `// ${label} line ${i}: filler that keeps the file a realistic size`).join("\n");

function createFixture(): string {
  const root = join(benchDir("wcx-codemode-"), "shop");
  const files: Record<string, string> = {
    "src/util.ts": `${filler(20, "util")}\nexport function parseConfig(text: string): Record<string, string> {\n  const pairs = text.split("\\n").map((l) => l.split("="));\n  return Object.fromEntries(pairs);\n}\n${filler(40, "util tail")}\n`,
    "src/server.ts": `import { parseConfig } from "./util.js";\n${filler(40, "server")}\nexport const config = parseConfig("a=1");\n`,
    "src/worker.ts": `import { parseConfig } from "./util.js";\n${filler(25, "worker")}\nexport const settings = parseConfig("b=2");\n`,
    "src/pricing.ts": `import { taxFor } from "./tax.js";\n${filler(120, "pricing")}\nexport function discountFor(total: number): number {\n  return total > 100 ? 0.1 + taxFor(0) : 0;\n}\n${filler(80, "pricing tail")}\n`,
    "src/tax.ts": `${filler(60, "tax")}\nexport function taxFor(total: number): number {\n  return total * 0.2;\n}\n`,
    "src/cart.ts": `import { discountFor } from "./pricing.js";\n${filler(30, "cart")}\nexport const cartDiscount = discountFor(120);\n`,
    "src/legacy.ts": `export function useLegacy(n: number): number {\n  return n * 2;\n}\n${filler(30, "legacy")}\n`,
    "src/orders.ts": `import { useLegacy } from "./legacy.js";\n${filler(45, "orders")}\nexport const orderTotal = useLegacy(2); // TODO_MARK migrate\n`,
    "src/invoice.ts": `import { useLegacy } from "./legacy.js";\n${filler(25, "invoice")}\nexport const invoiceTotal = useLegacy(3); // TODO_MARK migrate\n`,
    "test/util.test.ts": `import { parseConfig } from "../src/util.js";\n${filler(15, "util test")}\n`,
    "test/pricing.test.ts": `import { discountFor } from "../src/pricing.js";\n${filler(15, "pricing test")}\n`,
  };
  // Feature modules, as a real repository has many: each prices through pricing.ts, still calls
  // the legacy helper (a TODO says so), and every other one has a test.
  for (let i = 0; i < 16; i++) {
    const name = `feature${String(i).padStart(2, "0")}`;
    files[`src/${name}.ts`] =
      `import { discountFor } from "./pricing.js";\nimport { useLegacy } from "./legacy.js";\n${filler(20 + i, name)}\n` +
      `export const ${name} = useLegacy(discountFor(${i * 10})); // TODO_MARK migrate\n`;
    if (i % 2 === 0) files[`test/${name}.test.ts`] = `import { ${name} } from "../src/${name}.js";\n${filler(10, `${name} test`)}\n`;
  }
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  execFileSync("git", ["-c", "user.email=b@example.com", "-c", "user.name=b", "init", "-q", "-b", "main"], { cwd: root });
  execFileSync("git", ["add", "-A"], { cwd: root });
  execFileSync("git", ["-c", "user.email=b@example.com", "-c", "user.name=b", "commit", "-qm", "fixture"], { cwd: root });
  // Uncommitted work for the review task.
  writeFileSync(join(root, "src/tax.ts"), `${filler(60, "tax")}\nexport function taxFor(total: number): number {\n  return total * 0.25;\n}\n`);
  writeFileSync(
    join(root, "src/cart.ts"),
    `import { discountFor } from "./pricing.js";\n${filler(30, "cart")}\nexport const cartDiscount = discountFor(150);\n`,
  );
  return root;
}

interface Match {
  path: string;
  line: number;
  text: string;
}
const matchesOf = (r: Json, i = 0) => ((r["results"] as Json[])[i]?.["matches"] ?? []) as Match[];
const filesOf = (r: Json, i = 0) => (((r["results"] as Json[])[i]?.["files"] ?? []) as Array<{ path: string }>).map((f) => f.path);

/** A discovery task: the shortest direct script, and the cell that answers the same. */
interface Task {
  name: string;
  direct(call: Call, project: string): Promise<string>;
  cell: string;
}

const tasks: Task[] = [
  {
    name: "definition_body_and_callers",
    async direct(call, project) {
      const def = matchesOf(await call("search_project_texts", { project, queries: [{ pattern: "export function parseConfig" }] }))[0] as Match;
      const read = await call("read_files", { project, files: [{ path: def.path, start_line: def.line, end_line: def.line + 3 }] });
      const body = String((read["items"] as Json[])[0]?.["content"])
        .trim()
        .split("\n").length;
      const callers = filesOf(await call("search_project_texts", { project, queries: [{ pattern: "parseConfig(", output: "files" }] }));
      return `${def.path}:${def.line} (${body} lines); callers: ${callers
        .filter((p) => p !== def.path)
        .sort()
        .join(", ")}`;
    },
    cell: `const def = (await tools.search_project_texts({ queries: [{ pattern: "export function parseConfig" }] })).results[0].matches[0];
const read = await tools.read_files({ files: [{ path: def.path, start_line: def.line, end_line: def.line + 3 }] });
const body = read.items[0].content.trim().split("\\n").length;
const callers = (await tools.search_project_texts({ queries: [{ pattern: "parseConfig(", output: "files" }] })).results[0].files.map((f) => f.path);
text(def.path + ":" + def.line + " (" + body + " lines); callers: " + callers.filter((p) => p !== def.path).sort().join(", "));`,
  },
  {
    // The answer names modules (src/<name>.ts without a test/<name>.test.ts), space-separated:
    // what the model needs, not the paths it can rebuild.
    name: "sources_without_tests",
    async direct(call, project) {
      const list = async (path: string) => (await call("list_project_files", { project, path }))["paths"] as string[];
      const [src, tests] = [await list("src"), await list("test")];
      const tested = new Set(tests.map((t) => t.slice(5, -8)));
      return src
        .map((s) => s.slice(4, -3))
        .filter((n) => !tested.has(n))
        .sort()
        .join(" ");
    },
    cell: `const [s, t] = await Promise.all(["src", "test"].map(async (path) => (await tools.list_project_files({ path })).paths));
const tested = new Set(t.map((p) => p.slice(5, -8)));
text(s.map((p) => p.slice(4, -3)).filter((n) => !tested.has(n)).sort().join(" "));`,
  },
  {
    name: "todo_call_targets",
    async direct(call, project) {
      const todos = matchesOf(await call("search_project_texts", { project, queries: [{ pattern: "TODO_MARK" }] }));
      const targets = [...new Set(todos.map((m) => /(\w+)\(/.exec(m.text)?.[1] ?? ""))].sort();
      const defs = await call("search_project_texts", { project, queries: targets.map((t) => ({ pattern: `export function ${t}` })) });
      return targets.map((t, i) => `${t} defined at ${matchesOf(defs, i)[0]?.path}:${matchesOf(defs, i)[0]?.line}, ${todos.length} TODOs`).join("; ");
    },
    cell: `const todos = (await tools.search_project_texts({ queries: [{ pattern: "TODO_MARK" }] })).results[0].matches;
const targets = [...new Set(todos.map((m) => (/(\\w+)\\(/.exec(m.text) || [])[1] || ""))].sort();
const defs = await tools.search_project_texts({ queries: targets.map((t) => ({ pattern: "export function " + t })) });
text(targets.map((t, i) => t + " defined at " + defs.results[i].matches[0].path + ":" + defs.results[i].matches[0].line + ", " + todos.length + " TODOs").join("; "));`,
  },
  {
    name: "changed_files_and_hunks",
    async direct(call, project) {
      const summary = await call("read_git_review_summary", { project });
      const files = (summary["files"] as Array<{ path: string }>).map((f) => f.path).sort();
      const hunks = (await call("read_git_diff_hunks", { project, paths: files, context_lines: 0 }))["hunks"] as Json[];
      return `${files.join(", ")}: ${hunks.length} hunks`;
    },
    cell: `const files = (await tools.read_git_review_summary({})).files.map((f) => f.path).sort();
const hunks = (await tools.read_git_diff_hunks({ paths: files, context_lines: 0 })).hunks;
text(files.join(", ") + ": " + hunks.length + " hunks");`,
  },
  {
    name: "longest_source_file",
    async direct(call, project) {
      const files = (await call("list_project_files", { project, path: "src" }))["paths"] as string[];
      const read = await call("read_files", { project, files: files.map((path) => ({ path })) });
      const sized = (read["items"] as Json[])
        .map((i, n) => [String(files[n]), Number(i["total_lines"])] as const)
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
      return `${sized[0]?.[0]} (${sized[0]?.[1]} lines)`;
    },
    cell: `const files = (await tools.list_project_files({ path: "src" })).paths;
const read = await tools.read_files({ files: files.map((path) => ({ path })) });
const sized = read.items.map((i, n) => [files[n], i.total_lines]).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
text(sized[0][0] + " (" + sized[0][1] + " lines)");`,
  },
  {
    name: "import_chain",
    async direct(call, project) {
      const importers = matchesOf(await call("search_project_texts", { project, queries: [{ pattern: 'from "./pricing.js"' }] }));
      const read = await call("read_files", { project, files: [{ path: "src/pricing.ts", start_line: 1, end_line: 1 }] });
      const dep = /from "\.\/(\w+)\.js"/.exec(String((read["items"] as Json[])[0]?.["content"]))?.[1];
      const defs = matchesOf(await call("search_project_texts", { project, queries: [{ pattern: "export function", path: `src/${dep}.ts` }] }));
      return `${importers
        .map((m) => m.path)
        .sort()
        .join(", ")} -> src/pricing.ts -> src/${dep}.ts (${defs.length} exported functions)`;
    },
    cell: `const importers = (await tools.search_project_texts({ queries: [{ pattern: 'from "./pricing.js"' }] })).results[0].matches;
const read = await tools.read_files({ files: [{ path: "src/pricing.ts", start_line: 1, end_line: 1 }] });
const dep = /from "\\.\\/(\\w+)\\.js"/.exec(read.items[0].content)[1];
const defs = (await tools.search_project_texts({ queries: [{ pattern: "export function", path: "src/" + dep + ".ts" }] })).results[0].matches;
text(importers.map((m) => m.path).sort().join(", ") + " -> src/pricing.ts -> src/" + dep + ".ts (" + defs.length + " exported functions)");`,
  },
];

const ROUNDS = Number(process.env["WEBCODEX_BENCH_CODE_MODE_ROUNDS"] ?? 5);
/** Each task's cell must take at most this share of the direct strategy's model-visible calls and bytes. */
const TARGET_RATIO = 0.5;

export async function benchCodeMode(): Promise<BenchResult[]> {
  const dir = benchDir("wcx-codemode-tokens-");
  const token = `bench-${randomBytes(12).toString("hex")}`;
  writeFileSync(join(dir, "tokens.json"), JSON.stringify({ tokens: [{ token, client_id: "local", subject: "bench", host_profile: "code_mode" }] }));
  const dev = await startChild(
    process.execPath,
    [cliPathForBench, "dev", "--project", createFixture(), "--port", "0", "--data-dir", benchDir("wcx-codemode-data-")],
    /MCP URL: (\S+)/,
    { WEBCODEX_DEV_TOKENS_FILE: join(dir, "tokens.json"), WEBCODEX_LOG_LEVEL: "warn" },
  );
  const results: BenchResult[] = [];
  try {
    const client = await connect(dev.match[1] as string, token);
    const project = await projectRefOf(client);
    const totals = { direct_calls: 0, direct_bytes: 0, cell_calls: 0, cell_bytes: 0, same: 0, meeting: 0 };
    const overheads: number[] = [];
    const ratios: number[] = [];
    for (const task of tasks) {
      const direct = metered(client);
      const expected = await task.direct(direct.call, project);
      const cell = metered(client);
      const answered = await cell.call("run_code_cell", { project, code: task.cell });
      const same = String(answered["text"]).trim() === expected;
      if (!same) process.stderr.write(`code_mode ${task.name}: direct "${expected}" != cell "${String(answered["text"]).trim()}"\n`);
      // Wall time of the same child calls: directly (one round trip each) and inside one cell.
      const directMs: number[] = [];
      const cellMs: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        let t = performance.now();
        await task.direct(metered(client).call, project);
        directMs.push(performance.now() - t);
        t = performance.now();
        await metered(client).call("run_code_cell", { project, code: task.cell });
        cellMs.push(performance.now() - t);
      }
      overheads.push(median(cellMs) - median(directMs));
      ratios.push(median(cellMs) / median(directMs));
      const callsRatio = cell.calls / direct.calls;
      const bytesRatio = cell.bytes / direct.bytes;
      const meets = same && callsRatio <= TARGET_RATIO && bytesRatio <= TARGET_RATIO;
      if (!meets) process.stderr.write(`code_mode ${task.name}: misses a target (calls ${callsRatio.toFixed(2)}x, bytes ${bytesRatio.toFixed(2)}x)\n`);
      totals.meeting += meets ? 1 : 0;
      totals.direct_calls += direct.calls;
      totals.direct_bytes += direct.bytes;
      totals.cell_calls += cell.calls;
      totals.cell_bytes += cell.bytes;
      totals.same += same ? 1 : 0;
      results.push({
        name: `code_mode_${task.name}`,
        metrics: {
          direct_calls: direct.calls,
          cell_calls: cell.calls,
          calls_ratio: round(callsRatio, 2),
          direct_bytes: direct.bytes,
          cell_bytes: cell.bytes,
          bytes_ratio: round(bytesRatio, 2),
          same_answer: same ? 1 : 0,
          meets_targets: meets ? 1 : 0,
          direct_p50_ms: round(median(directMs), 1),
          cell_p50_ms: round(median(cellMs), 1),
          cell_vs_direct_p50_ratio: round(median(cellMs) / median(directMs), 2),
        },
        notes: `model-visible calls and bytes of one cell against the shortest direct script (targets <= ${TARGET_RATIO}x); same answer; wall time of the cell against the same child calls made directly`,
      });
    }
    const empty: number[] = [];
    const ping: number[] = [];
    for (let i = 0; i < ROUNDS * 4; i++) {
      let t = performance.now();
      await client.callTool({ name: "run_code_cell", arguments: { project, code: `text("ok")` } });
      empty.push(performance.now() - t);
      t = performance.now();
      await client.callTool({ name: "list_projects", arguments: {} });
      ping.push(performance.now() - t);
    }
    results.push({
      name: "code_mode_totals",
      metrics: {
        tasks: tasks.length,
        same_answer: totals.same,
        calls_ratio: round(totals.cell_calls / totals.direct_calls, 2),
        bytes_ratio: round(totals.cell_bytes / totals.direct_bytes, 2),
        tasks_meeting_targets: totals.meeting,
        cell_vs_direct_p50_ratio: round(median(ratios), 2),
        cell_overhead_vs_direct_p50_ms: round(median(overheads), 1),
        empty_cell_p50_ms: round(median(empty), 1),
        trivial_call_p50_ms: round(median(ping), 1),
        empty_cell_vs_trivial_ratio: round(median(empty) / median(ping), 2),
      },
      notes:
        "cell vs direct: each task's cell p50 / the p50 of the same child calls made directly (median over tasks), and the difference in ms; empty cell (project resolution, sandbox start, bridge) against a trivial call (list_projects)",
    });
    await client.close();
  } finally {
    await stopChild(dev.child);
  }
  return results;
}
