/**
 * Escape and abuse probes of run_code_cell through `webcodex dev` and a real MCP client: each
 * hostile cell ends as a bounded structured failure (or a harmless success) that changed
 * nothing, and while 8 runaway cells spin, another tenant's MCP ping stays fast.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, connectMcp, createProjectDir, firstProjectRef, startDevServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome } from "../support/index.js";

const TOKENS = { owner: "owner-cell-token-0123456789abcdef", other: "other-cell-token-0123456789abcdef" };
const ORIGINAL = "export const value = 1;\n";

describe("run_code_cell escape and abuse probes", { timeout: 300_000 }, () => {
  let server: DevServer;
  let projectDir: string;
  let owner: Client;
  let other: Client;
  let project: string;
  let canonicalId: string;

  const cell = async (code: string, timeoutMs = 3_000): Promise<ToolOutcome & { ms: number }> => {
    const t0 = performance.now();
    const outcome = await callTool(owner, "call_runtime_tool", { tool: "run_code_cell", arguments: { project, code, timeout_ms: timeoutMs } });
    return { ...outcome, ms: performance.now() - t0 };
  };
  const evidence = (o: ToolOutcome) => (o.result["evidence"] ?? {}) as Record<string, unknown>;
  const assertBoundedFailure = (o: ToolOutcome & { ms: number }, detail: string | RegExp, maxMs: number) => {
    assert.equal(o.isError, true, JSON.stringify(o.result));
    assert.equal(o.result["reason_code"], "execution_failed");
    assert.match(String(o.result["detail_code"]), detail instanceof RegExp ? detail : new RegExp(`^${detail}$`), String(o.result["message"]));
    assert.equal(o.result["state_changed"], false);
    assert.equal(o.result["outcome_unknown"], false);
    assert.ok(o.ms < maxMs, `answered after ${Math.round(o.ms)} ms`);
  };

  before(async () => {
    const dir = tempDir("wcx-cellabuse-");
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: TOKENS.owner, client_id: "local", subject: "owner" },
          { token: TOKENS.other, client_id: "othertenant", subject: "mallory" },
        ],
      }),
    );
    projectDir = createProjectDir({ "src/value.ts": ORIGINAL }, { name: "cellabuse" });
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-cellabuse-data-"), tokensFile: join(dir, "tokens.json") });
    [owner, other] = await Promise.all([connectMcp(server.mcpUrl, TOKENS.owner), connectMcp(server.mcpUrl, TOKENS.other)]);
    project = await firstProjectRef(owner);
    const listed = await callTool(owner, "list_projects", {});
    canonicalId = String((listed.result["projects"] as Array<Record<string, unknown>>)[0]?.["project_id"]);
  });
  after(async () => {
    await Promise.all([owner?.close(), other?.close()]);
    await server?.stop();
    assert.equal(readFileSync(join(projectDir, "src/value.ts"), "utf8"), ORIGINAL, "no probe changed the project");
  });

  it('constructor.constructor("return process")() reaches no host object', async () => {
    const o = await cell(`const p = constructor.constructor("return typeof process")(); text(p + "," + typeof require + "," + typeof setTimeout);`);
    assert.equal(o.isError, false, JSON.stringify(o.result));
    assert.equal(o.result["text"], "undefined,undefined,undefined\n");
    const escape = await cell(`constructor.constructor("return process")().exit(1);`);
    assertBoundedFailure(escape, "cell_threw", 10_000);
  });

  it("prototype pollution inside the cell does not reach the bridge or the gateway", async () => {
    const o = await cell(
      `Object.prototype.tool = "run_shell"; Object.prototype.argv = ["touch", "pwned"]; Array.prototype.push = null;
       const r = await tools.read_files({ files: [{ path: "src/value.ts" }] });
       text(r.items[0].content.trim());`,
    );
    assert.equal(o.isError, false, JSON.stringify(o.result));
    assert.equal(o.result["text"], ORIGINAL);
    const poisoned = await cell(`await tools.read_files({ files: [{ path: "src/value.ts" }], __proto__: { admin: true }, extra: 1 });`);
    assertBoundedFailure(poisoned, "cell_threw", 10_000);
    assert.equal(evidence(poisoned)["child_reason_code"], "unknown_field");
  });

  it("while(true){} stops at the cell's deadline", async () => {
    const o = await cell(`text("spinning"); while (true) {}`, 500);
    assertBoundedFailure(o, "cell_timeout", 500 + 5_000);
    assert.equal(evidence(o)["text"], "spinning\n");
  });

  it("a 1 GB allocation and deep recursion fail within their budgets", async () => {
    assertBoundedFailure(await cell(`const a = new Uint8Array(1024 * 1024 * 1024); text(a.length);`), /^cell_(memory|threw)$/, 10_000);
    assertBoundedFailure(await cell(`const f = (n) => f(n + 1) + 1; f(0);`), "cell_stack", 10_000);
  });

  it("10,000 child calls end the cell at its child-call limit", async () => {
    const o = await cell(`for (let i = 0; i < 10000; i++) await tools.list_projects({});`, 30_000);
    assertBoundedFailure(o, "cell_child_call_limit", 35_000);
    assert.equal(evidence(o)["child_calls"], 257);
  });

  it("a 100 MB text is cut at the text budget and says so", async () => {
    const o = await cell(`const mb = "x".repeat(1024 * 1024); for (let i = 0; i < 100; i++) text(mb);`, 20_000);
    assert.equal(o.isError, false, JSON.stringify(o.result).slice(0, 300));
    assert.equal(o.result["truncated"], true);
    assert.equal(Buffer.byteLength(String(o.result["text"])), 16 * 1024);
  });

  it("edit_project_files and run_shell named in a cell fail as tool_not_admitted", async () => {
    for (const [tool, args] of [
      ["edit_project_files", `{ changes: [{ kind: "create", path: "pwned.txt", content: "x" }] }`],
      ["run_shell", `{ command: "touch pwned" }`],
    ] as const) {
      const o = await cell(`await tools.${tool}(${args});`);
      assertBoundedFailure(o, "cell_threw", 10_000);
      assert.equal(evidence(o)["child_reason_code"], "tool_not_admitted");
    }
  });

  it("another principal's project id or ref is not found, and nothing in the cell runs", async () => {
    const foreign = await callTool(other, "call_runtime_tool", { tool: "run_code_cell", arguments: { project: canonicalId, code: `text("in")` } });
    assert.equal(foreign.isError, true);
    assert.equal(foreign.result["reason_code"], "project_not_found");
    const child = await callTool(other, "call_runtime_tool", {
      tool: "run_code_cell",
      arguments: { project, code: `await tools.read_files({ project: "${canonicalId}", files: [{ path: "src/value.ts" }] });` },
    });
    assert.equal(child.isError, true);
    assert.equal(child.result["reason_code"], "project_not_found");
  });

  it("while 8 runaway cells run, another tenant's ping p99 stays under 100 ms", async (t) => {
    const pings = async (ms: number) => {
      const latencies: number[] = [];
      const stopAt = performance.now() + ms;
      while (performance.now() < stopAt) {
        const t0 = performance.now();
        await other.ping();
        latencies.push(performance.now() - t0);
      }
      latencies.sort((a, b) => a - b);
      const p99 = latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))] ?? Infinity;
      return { n: latencies.length, p99, slowest: latencies.slice(-3).map((l) => l.toFixed(0)) };
    };
    // Warm: a sandbox worker exists and the other tenant's session has answered before.
    await cell(`text("warm")`);
    const baseline = await pings(2_000);
    const runaway = Array.from({ length: 8 }, () => cell(`while (true) {}`, 4_000));
    const loaded = await pings(3_000);
    const outcomes = await Promise.all(runaway);
    for (const o of outcomes) assertBoundedFailure(o, "cell_timeout", 4_000 + 10_000);
    const report = `ping p99 ${loaded.p99.toFixed(1)} ms over ${loaded.n} pings with 8 runaway cells (slowest ${loaded.slowest.join(", ")} ms); without cells p99 ${baseline.p99.toFixed(1)} ms over ${baseline.n}`;
    t.diagnostic(report);
    assert.ok(loaded.n >= 20, report);
    // The bound is absolute where the machine itself answers pings well within it; on a machine
    // so loaded that its own ping p99 is past half the bound, the cells may add at most the bound.
    if (baseline.p99 < 50) assert.ok(loaded.p99 < 100, report);
    else assert.ok(loaded.p99 < baseline.p99 + 100, report);
  });
});
