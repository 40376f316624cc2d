/**
 * `make bench economy`: ten scripted coding tasks on one fixture repository, each run by a
 * fixed script against WebCodex (`webcodex dev`, Streamable HTTP) and against the reference
 * MCP filesystem server (@modelcontextprotocol/server-filesystem, pinned, over stdio) where
 * that server can do the task at all. Each side starts from its own fresh copy of the fixture.
 * Per task: tool calls, request+response bytes (the JSON of each tools/call's params and of
 * its whole result, as both servers put them on the wire) and whether the task was done,
 * checked on disk or in what the script received. The scripts use what a model would know
 * at that point: nothing about file contents it has not read, except the task itself.
 *
 * One concept over 400 lines: the economy bench (its scripted tasks and their accounting).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { benchDir, cliPathForBench } from "./project.js";
import { connect, projectRefOf } from "./tool-call.js";
import { round, startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";
import { addSkillFixture, benchFollowSkill } from "./economy-skills.js";

type Json = Record<string, unknown>;

/** A client that counts its tools/call round trips and their bytes. */
interface Metered {
  call(name: string, args: Json): Promise<{ isError: boolean; structured: Json; text: string }>;
  calls: number;
  bytes: number;
}

function metered(client: Client): Metered {
  const m: Metered = {
    calls: 0,
    bytes: 0,
    async call(name, args) {
      const res = await client.callTool({ name, arguments: args });
      m.calls++;
      m.bytes += Buffer.byteLength(JSON.stringify({ name, arguments: args })) + Buffer.byteLength(JSON.stringify(res));
      const text = ((res.content as Array<{ type: string; text?: string }> | undefined) ?? []).map((c) => c.text ?? "").join("\n");
      return { isError: res.isError === true, structured: (res.structuredContent ?? {}) as Json, text };
    },
  };
  return m;
}

const pad = (n: number, label: string) =>
  Array.from({ length: n }, (_, i) => `// ${label} filler line ${i}: keeps the file a realistic size for reads`).join("\n");

/** The fixture repository: a small TypeScript project under git, with a test that fails and a slow build. */
function createFixture(): string {
  const root = join(benchDir("wcx-economy-"), "shop");
  const files: Record<string, string> = {
    "README.md": "# shop\n\nA small fixture project.\n",
    "package.json": JSON.stringify({ name: "shop", type: "module", scripts: { test: "node --test" } }, null, 2) + "\n",
    "src/legacy.ts": `export function useLegacy(n: number): number {\n  return n * 2;\n}\n${pad(40, "legacy")}\n`,
    "src/cart.ts": `import { useLegacy } from "./legacy.js";\n${pad(30, "cart")}\nexport const cartTotal = useLegacy(1);\n${pad(30, "cart tail")}\n`,
    "src/orders.ts": `import { useLegacy } from "./legacy.js";\n${pad(45, "orders")}\nexport const orderTotal = useLegacy(2);\n${pad(20, "orders tail")}\n`,
    "src/invoice.ts": `import { useLegacy } from "./legacy.js";\n${pad(25, "invoice")}\nexport const invoiceTotal = useLegacy(3);\n${pad(35, "invoice tail")}\n`,
    "src/util.ts": `export function parseConfig(text: string): Record<string, string> {\n  return Object.fromEntries(text.split("\\n").map((l) => l.split("=")));\n}\n${pad(30, "util")}\n`,
    "src/server.ts": `import { parseConfig } from "./util.js";\n${pad(40, "server")}\nexport const config = parseConfig("a=1");\n${pad(10, "server tail")}\n`,
    "src/worker.ts": `import { parseConfig } from "./util.js";\n${pad(20, "worker")}\nexport const settings = parseConfig("b=2");\n${pad(25, "worker tail")}\n`,
    "src/pricing.ts": `${pad(120, "pricing")}\nexport function discountFor(total: number): number {\n  return total > 100 ? 0.1 : 0;\n}\n${pad(180, "pricing tail")}\n`,
    "src/tax.ts": `${pad(60, "tax")}\nexport function taxFor(total: number): number {\n  return total * 0.2;\n}\n${pad(60, "tax tail")}\n`,
    "src/messages.ts":
      Array.from({ length: 100 }, (_, i) => (i % 10 === 3 ? `export const m${i} = "TODO_MARK ${i}";` : `export const m${i} = "message ${i}";`)).join("\n") +
      "\n",
    "docs/notes.md": "# Notes\n\nstatus: draft\n",
    "test/math.test.mjs":
      'import { test } from "node:test";\nimport assert from "node:assert/strict";\n\ntest("adds", () => {\n  assert.equal(1 + 1, 3, "ADDITION_BROKEN");\n});\n',
    "build.sh": "sleep 2\necho BUILD_DONE\n",
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.email=bench@example.com", "-c", "user.name=bench", ...args], { cwd: root, stdio: "ignore" });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "fixture");
  return root;
}

interface Side {
  root: string;
  m: Metered;
}

interface Task {
  name: string;
  webcodex: (s: Side, project: string) => Promise<boolean>;
  /** Absent when the filesystem server cannot do the task at all (no search by content, no process, no git). */
  filesystem?: (s: Side) => Promise<boolean>;
}

/** A Gateway tool, called as a Host that only knows tools/list calls it. */
const gw = (s: Side, tool: string, args: Json) => s.m.call("call_runtime_tool", { tool, arguments: args });
const read = (root: string, path: string) => readFileSync(join(root, path), "utf8");
const items = (r: Json) => (r["items"] ?? []) as Json[];
/** What a model copies from a tools/call result for its next call. */
const revisionsByPath = (r: Json) => Object.fromEntries(items(r).map((i) => [i["path"], i["read_revision"]]));

/** The filesystem server's way to find text: see every file, then read them all. */
async function fsReadAll(s: Side, dir: string): Promise<string> {
  const tree = await s.m.call("directory_tree", { path: join(s.root, dir) });
  const paths: string[] = [];
  const walk = (nodes: Array<{ name: string; type: string; children?: unknown[] }>, prefix: string) => {
    for (const n of nodes) {
      if (n.type === "file") paths.push(join(prefix, n.name));
      else walk((n.children ?? []) as Array<{ name: string; type: string; children?: unknown[] }>, join(prefix, n.name));
    }
  };
  walk(JSON.parse(tree.text) as Array<{ name: string; type: string; children?: unknown[] }>, join(s.root, dir));
  return (await s.m.call("read_multiple_files", { paths })).text;
}

const tasks: Task[] = [
  {
    name: "change_three_uses",
    async webcodex(s, project) {
      // The search proves each matched file's read_revision, so the guarded edit follows at once.
      const found = await s.m.call("search_project_texts", { project, queries: [{ pattern: "useLegacy(", glob: "!src/legacy.ts" }] });
      const query = (found.structured["results"] as Json[])[0] ?? {};
      const matches = (query["matches"] ?? []) as Array<{ path: string; line: number }>;
      const uses = matches.filter((m) => !/^import/.test(String((m as unknown as Json)["text"])));
      const rev = (query["read_revisions"] ?? {}) as Record<string, string>;
      await s.m.call("edit_project_files", {
        project,
        changes: uses.map((m) => ({
          kind: "edit",
          path: m.path,
          expected_read_revision: rev[m.path],
          edits: [{ replace_exact: { old_text: "= useLegacy(", new_text: "= useModern(" } }],
        })),
      });
      return ["src/cart.ts", "src/orders.ts", "src/invoice.ts"].every((p) => read(s.root, p).includes("= useModern("));
    },
    async filesystem(s) {
      const all = await fsReadAll(s, "src");
      for (const path of ["src/cart.ts", "src/orders.ts", "src/invoice.ts"].filter((p) => all.includes(join(s.root, p)))) {
        await s.m.call("edit_file", { path: join(s.root, path), edits: [{ oldText: "= useLegacy(", newText: "= useModern(" }] });
      }
      return ["src/cart.ts", "src/orders.ts", "src/invoice.ts"].every((p) => read(s.root, p).includes("= useModern("));
    },
  },
  {
    name: "rename_across_files",
    async webcodex(s, project) {
      const found = await s.m.call("search_project_texts", { project, queries: [{ pattern: "parseConfig" }] });
      const query = (found.structured["results"] as Json[])[0] ?? {};
      const matches = (query["matches"] ?? []) as Array<{ path: string; line: number }>;
      const byPath = new Map<string, number>();
      for (const m of matches) byPath.set(m.path, (byPath.get(m.path) ?? 0) + 1);
      const rev = (query["read_revisions"] ?? {}) as Record<string, string>;
      await s.m.call("edit_project_files", {
        project,
        changes: [...byPath].map(([path, n]) => ({
          kind: "edit",
          path,
          expected_read_revision: rev[path],
          edits: [{ replace_exact: { old_text: "parseConfig", new_text: "loadConfig" }, expected_match_count: n }],
        })),
      });
      return ["src/util.ts", "src/server.ts", "src/worker.ts"].every((p) => read(s.root, p).includes("loadConfig") && !read(s.root, p).includes("parseConfig"));
    },
    async filesystem(s) {
      const all = await fsReadAll(s, "src");
      for (const [path, n] of [
        ["src/util.ts", 1],
        ["src/server.ts", 2],
        ["src/worker.ts", 2],
      ] as const) {
        if (!all.includes(join(s.root, path))) continue;
        await s.m.call("edit_file", { path: join(s.root, path), edits: Array.from({ length: n }, () => ({ oldText: "parseConfig", newText: "loadConfig" })) });
      }
      return ["src/util.ts", "src/server.ts", "src/worker.ts"].every((p) => read(s.root, p).includes("loadConfig") && !read(s.root, p).includes("parseConfig"));
    },
  },
  {
    name: "read_three_related_ranges",
    async webcodex(s, project) {
      const r = await s.m.call("read_files", {
        project,
        files: [
          { path: "src/pricing.ts", start_line: 121, end_line: 123 },
          { path: "src/tax.ts", start_line: 61, end_line: 63 },
          { path: "src/cart.ts", start_line: 32, end_line: 32 },
        ],
      });
      const text = items(r.structured)
        .map((i) => String(i["content"]))
        .join("");
      return text.includes("discountFor") && text.includes("taxFor") && text.includes("cartTotal");
    },
    async filesystem(s) {
      const r = await s.m.call("read_multiple_files", { paths: ["src/pricing.ts", "src/tax.ts", "src/cart.ts"].map((p) => join(s.root, p)) });
      return r.text.includes("discountFor") && r.text.includes("taxFor") && r.text.includes("cartTotal");
    },
  },
  {
    name: "run_tests_read_failure",
    async webcodex(s, project) {
      const r = await s.m.call("run_shell", { project, command: "node --test 2>&1 | tail -n 30" });
      return String(r.structured["output"] ?? r.structured["stdout"] ?? "").includes("ADDITION_BROKEN");
    },
  },
  {
    name: "long_build_collect",
    async webcodex(s, project) {
      let r = await s.m.call("run_shell", { project, command: "sh build.sh", wait_ms: 200 });
      while (r.structured["execution_state"] === "pending") {
        const f = r.structured["follow_up"] as { tool: string; arguments: Json };
        r = await s.m.call(f.tool, f.arguments);
      }
      return String(r.structured["output"] ?? "").includes("BUILD_DONE");
    },
  },
  {
    name: "recover_from_stale_revision",
    async webcodex(s, project) {
      const first = await s.m.call("read_files", { project, files: [{ path: "docs/notes.md" }] });
      writeFileSync(join(s.root, "docs/notes.md"), read(s.root, "docs/notes.md") + "owner: ops\n");
      const stale = await s.m.call("edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "docs/notes.md",
            expected_read_revision: revisionsByPath(first.structured)["docs/notes.md"],
            edits: [{ replace_exact: { old_text: "status: draft", new_text: "status: final" } }],
          },
        ],
      });
      if (stale.structured["reason_code"] !== "stale_read_revision") return false;
      // The failure is the re-read: the current revision and the current lines around old_text.
      // The anchor still says what the model meant to change, so it retries with that revision;
      // had it not, the model would run the follow-up (a full re-read) instead.
      const evidence = (stale.structured["evidence"] ?? {}) as Json;
      const anchor = ((evidence["anchors"] ?? []) as Json[])[0] ?? {};
      const excerpt = (((anchor["excerpts"] ?? []) as Json[])[0] ?? {})["text"];
      let current = evidence["current_read_revision"];
      if (anchor["match_count"] !== 1 || !String(excerpt).includes("status: draft")) {
        const f = stale.structured["follow_up"] as { tool: string; arguments: Json };
        current = revisionsByPath((await s.m.call(f.tool, f.arguments)).structured)["docs/notes.md"];
      }
      await s.m.call("edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "docs/notes.md",
            expected_read_revision: current,
            edits: [{ replace_exact: { old_text: "status: draft", new_text: "status: final" } }],
          },
        ],
      });
      const now = read(s.root, "docs/notes.md");
      return now.includes("status: final") && now.includes("owner: ops");
    },
    async filesystem(s) {
      await s.m.call("read_text_file", { path: join(s.root, "docs/notes.md") });
      writeFileSync(join(s.root, "docs/notes.md"), read(s.root, "docs/notes.md") + "owner: ops\n");
      // No revision guard: the edit applies to whatever the file holds now.
      await s.m.call("edit_file", { path: join(s.root, "docs/notes.md"), edits: [{ oldText: "status: draft", newText: "status: final" }] });
      const now = read(s.root, "docs/notes.md");
      return now.includes("status: final") && now.includes("owner: ops");
    },
  },
  {
    name: "undo_after_review",
    async webcodex(s, project) {
      const before = read(s.root, "src/tax.ts");
      const ctx = await gw(s, "search_file_context", { project, path: "src/tax.ts", pattern: "total * 0.2", context_lines: 0 });
      const edited = await s.m.call("edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "src/tax.ts",
            expected_read_revision: ctx.structured["read_revision"],
            edits: [{ replace_exact: { old_text: "total * 0.2", new_text: "total * 0.25" } }],
          },
        ],
        include_undo: true,
      });
      // The review: what the runtime replaced, as the exact guarded inverse it offers (like the
      // filesystem server's edit_file diff). Undo is that call, run exactly as returned.
      const undo = edited.structured["undo"] as { tool: string; arguments: Json } | undefined;
      if (undo === undefined || !JSON.stringify(undo.arguments).includes('"old_text":"total * 0.25","new_text":"total * 0.2"')) return false;
      const undone = await s.m.call(undo.tool, undo.arguments);
      return !undone.isError && read(s.root, "src/tax.ts") === before;
    },
    async filesystem(s) {
      const before = read(s.root, "src/tax.ts");
      const diff = await s.m.call("edit_file", { path: join(s.root, "src/tax.ts"), edits: [{ oldText: "total * 0.2", newText: "total * 0.25" }] });
      if (!diff.text.includes("0.25")) return false;
      await s.m.call("edit_file", { path: join(s.root, "src/tax.ts"), edits: [{ oldText: "total * 0.25", newText: "total * 0.2" }] });
      return read(s.root, "src/tax.ts") === before;
    },
  },
  {
    name: "find_files_by_name",
    async webcodex(s, project) {
      const r = await gw(s, "list_project_files", { project, glob: "**/*.test.mjs" });
      return JSON.stringify(r.structured["paths"]) === JSON.stringify(["test/math.test.mjs"]);
    },
    async filesystem(s) {
      const r = await s.m.call("search_files", { path: s.root, pattern: "**/*.test.mjs" });
      return r.text.includes("math.test.mjs");
    },
  },
  {
    name: "replace_all_in_one_file",
    async webcodex(s, project) {
      const ctx = await gw(s, "search_file_context", { project, path: "src/messages.ts", pattern: "TODO_MARK", context_lines: 0, max_matches: 1 });
      const n = Number(ctx.structured["match_count"]);
      await s.m.call("edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "src/messages.ts",
            expected_read_revision: ctx.structured["read_revision"],
            edits: [{ replace_exact: { old_text: "TODO_MARK", new_text: "DONE_MARK" }, expected_match_count: n }],
          },
        ],
      });
      return !read(s.root, "src/messages.ts").includes("TODO_MARK") && read(s.root, "src/messages.ts").split("DONE_MARK").length === 11;
    },
    async filesystem(s) {
      const r = await s.m.call("read_text_file", { path: join(s.root, "src/messages.ts") });
      const n = r.text.split("TODO_MARK").length - 1;
      await s.m.call("edit_file", {
        path: join(s.root, "src/messages.ts"),
        edits: Array.from({ length: n }, () => ({ oldText: "TODO_MARK", newText: "DONE_MARK" })),
      });
      return !read(s.root, "src/messages.ts").includes("TODO_MARK") && read(s.root, "src/messages.ts").split("DONE_MARK").length === 11;
    },
  },
  {
    name: "locate_function_in_large_file",
    async webcodex(s, project) {
      const r = await gw(s, "search_file_context", { project, path: "src/pricing.ts", pattern: "function discountFor", context_lines: 3 });
      const m = ((r.structured["matches"] as Json[]) ?? [])[0] ?? {};
      return m["line"] === 121 && JSON.stringify(m["after"]).includes("return total > 100");
    },
    async filesystem(s) {
      const r = await s.m.call("read_text_file", { path: join(s.root, "src/pricing.ts") });
      return r.text.includes("function discountFor") && r.text.includes("return total > 100");
    },
  },
];

export async function benchEconomy(): Promise<BenchResult[]> {
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const webcodexRoot = createFixture();
  const fsRoot = createFixture();
  const dev = await startChild(
    process.execPath,
    [cliPathForBench, "dev", "--project", webcodexRoot, "--port", "0", "--data-dir", benchDir("wcx-economy-data-")],
    /MCP URL: (\S+)/,
    { WEBCODEX_DEV_TOKEN: token, WEBCODEX_LOG_LEVEL: "warn" },
  );
  const fsServer = createRequire(import.meta.url).resolve("@modelcontextprotocol/server-filesystem/dist/index.js");
  const fsClient = new Client({ name: "webcodex-bench", version: "1.0.0" });
  await fsClient.connect(new StdioClientTransport({ command: process.execPath, args: [fsServer, fsRoot], stderr: "ignore" }));
  const results: BenchResult[] = [];
  try {
    const ours = await connect(dev.match[1] as string, token);
    const project = await projectRefOf(ours);
    const totals = {
      wc_calls: 0,
      wc_bytes: 0,
      fs_calls: 0,
      fs_bytes: 0,
      both_wc_calls: 0,
      both_wc_bytes: 0,
      both_fs_calls: 0,
      both_fs_bytes: 0,
      wc_done: 0,
      fs_done: 0,
    };
    for (const task of tasks) {
      const wc: Side = { root: webcodexRoot, m: metered(ours) };
      const wcDone = await task.webcodex(wc, project).catch(() => false);
      const fs: Side = { root: fsRoot, m: metered(fsClient) };
      const fsDone = task.filesystem ? await task.filesystem(fs).catch(() => false) : false;
      totals.wc_calls += wc.m.calls;
      totals.wc_bytes += wc.m.bytes;
      totals.fs_calls += fs.m.calls;
      totals.fs_bytes += fs.m.bytes;
      totals.wc_done += wcDone ? 1 : 0;
      totals.fs_done += fsDone ? 1 : 0;
      if (wcDone && fsDone) {
        totals.both_wc_calls += wc.m.calls;
        totals.both_wc_bytes += wc.m.bytes;
        totals.both_fs_calls += fs.m.calls;
        totals.both_fs_bytes += fs.m.bytes;
      }
      results.push({
        name: `economy_${task.name}`,
        metrics: {
          webcodex_calls: wc.m.calls,
          webcodex_bytes: wc.m.bytes,
          webcodex_done: wcDone ? 1 : 0,
          filesystem_calls: fs.m.calls,
          filesystem_bytes: fs.m.bytes,
          filesystem_done: fsDone ? 1 : 0,
          ...(wcDone && fsDone ? { bytes_ratio: round(wc.m.bytes / fs.m.bytes, 2) } : {}),
        },
        notes: task.filesystem ? "same task, same fixture, each side on its own copy" : "the filesystem server cannot do this task (no process execution)",
      });
    }
    // Last, so the other tasks see the fixture unchanged: the skill and its release notes appear now.
    addSkillFixture(webcodexRoot);
    results.push(await benchFollowSkill(webcodexRoot, project, () => metered(ours)));
    results.push({
      name: "economy_total",
      metrics: {
        tasks: tasks.length,
        webcodex_done: totals.wc_done,
        filesystem_done: totals.fs_done,
        webcodex_calls: totals.wc_calls,
        filesystem_calls: totals.fs_calls,
        both_done_webcodex_calls: totals.both_wc_calls,
        both_done_filesystem_calls: totals.both_fs_calls,
        both_done_webcodex_bytes: totals.both_wc_bytes,
        both_done_filesystem_bytes: totals.both_fs_bytes,
        both_done_bytes_ratio: round(totals.both_wc_bytes / Math.max(1, totals.both_fs_bytes), 2),
      },
      notes:
        "calls and request+response bytes of tools/call (JSON of params and of the whole result); target: every task done, fewer calls, bytes ratio <= 0.4 on tasks both do",
    });
    const wcList = Buffer.byteLength(JSON.stringify(await ours.listTools()));
    const fsList = Buffer.byteLength(JSON.stringify(await fsClient.listTools()));
    results.push({
      name: "economy_tools_list",
      metrics: { webcodex_bytes: wcList, filesystem_bytes: fsList, ratio: round(wcList / fsList, 2) },
      notes: "tools/list, paid once per session by each Host",
    });
    await ours.close();
  } finally {
    await fsClient.close();
    await stopChild(dev.child);
  }
  return results;
}
