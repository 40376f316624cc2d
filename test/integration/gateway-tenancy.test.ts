/**
 * Tenant isolation through the real gateway (`webcodex dev` as a child process, a dev tokens
 * file with several tenants, the official MCP SDK client):
 * - tenant B presents tenant A's project_ref, canonical project id, job id and session ref /
 *   wc_sess_* id to every tool that takes one: each fails closed, and the failure is
 *   identical to the one for an id that does not exist, so B learns nothing; another subject
 *   of tenant A, who can see the Project, cannot use or even detect A's Session either;
 * - a read-only caller sees no mutating tool and cannot run one, directly or through
 *   call_runtime_tool;
 * - a tenant over its rate limit gets a structured rate_limited failure with Retry-After,
 *   and other tenants are not affected.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { MCP_ANNOTATION_DEFAULTS, sampleToolArgs, toolDefinition, toolDefinitions } from "@webcodex/contracts";
import { callTool, connectMcp, createProjectDir, startDevServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome } from "../support/index.js";

const TOKENS = {
  alice: "tenant-a-alice-token-0123456789",
  bob: "tenant-b-bob-token-0123456789ab",
  auditor: "tenant-a-auditor-token-01234567",
  limited: "tenant-l-limited-token-01234567",
};

describe("tenant isolation, read-only admission and rate limits", { timeout: 180_000 }, () => {
  let server: DevServer;
  let projectDir: string;
  let alice: Client;
  let bob: Client;
  let auditor: Client;
  let directTools: Set<string>;
  let aliceRef: string;
  let aliceProject: string;
  let aliceJob: string;

  before(async () => {
    projectDir = createProjectDir({ "README.md": "# tenant A\n", "src/a.ts": "export const a = 1;\n" }, { name: "demo" });
    const tokensFile = join(tempDir("wcx-tokens-"), "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          // The first entry's tenant owns the local Project.
          { token: TOKENS.alice, client_id: "tenant-a", subject: "alice" },
          { token: TOKENS.bob, client_id: "tenant-b", subject: "bob" },
          { token: TOKENS.auditor, client_id: "tenant-a", subject: "auditor", admission_profile: "read_only" },
          { token: TOKENS.limited, client_id: "tenant-l", subject: "lim" },
        ],
      }),
    );
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-tenancy-data-"), tokensFile, env: { WEBCODEX_RATE_LIMITS: "tenant-l=3" } });
    [alice, bob, auditor] = await Promise.all([
      connectMcp(server.mcpUrl, TOKENS.alice),
      connectMcp(server.mcpUrl, TOKENS.bob),
      connectMcp(server.mcpUrl, TOKENS.auditor),
    ]);
    directTools = new Set((await alice.listTools()).tools.map((t) => t.name));
    const listed = await callTool(alice, "list_projects", {});
    const project = (listed.result["projects"] as Array<Record<string, string>>)[0];
    aliceRef = project?.["project_ref"] ?? "";
    aliceProject = project?.["project_id"] ?? "";
    assert.equal(aliceProject, "agent:tenant-a:demo");
    const job = await callTool(alice, "run_shell", { project: aliceRef, command: "sleep 5", wait_ms: 100 });
    assert.equal(job.result["execution_state"], "pending", JSON.stringify(job.result));
    aliceJob = String(job.result["job_id"]);
  });
  after(async () => {
    await Promise.all([alice?.close(), bob?.close(), auditor?.close()]);
    await server?.stop();
  });

  /**
   * Calls a tool directly when tools/list shows it or it is a Direct-only presentation tool
   * (callable by name, refused by call_runtime_tool), else through call_runtime_tool.
   */
  const call = (client: Client, tool: string, args: Record<string, unknown>): Promise<ToolOutcome> =>
    directTools.has(tool) || toolDefinition(tool)?.category === "presentation"
      ? callTool(client, tool, args)
      : callTool(client, "call_runtime_tool", { tool, arguments: args });

  /** The admitted tools (full profile) whose schema has `field`. */
  async function admittedToolsWith(field: string): Promise<string[]> {
    const groups = (await callTool(alice, "list_tools", {})).result["categories"] as Record<string, string[]>;
    const admitted = Object.values(groups).flat();
    return admitted.filter((name) => toolDefinition(name)?.inputSchema.properties?.[field] !== undefined).sort();
  }

  function argsFor(tool: string, overrides: Record<string, unknown>): Record<string, unknown> {
    const args = { ...sampleToolArgs(tool), ...overrides };
    const props = toolDefinition(tool)?.inputSchema.properties ?? {};
    if ("job_ids" in props && "job_id" in overrides) {
      args["job_ids"] = [overrides["job_id"]];
      delete args["job_id"];
    }
    return args;
  }

  /** B's call about A's thing and B's call about nothing must fail closed, identically. */
  async function assertIndistinguishable(tool: string, foreign: Record<string, unknown>, missing: Record<string, unknown>) {
    const a = await call(bob, tool, argsFor(tool, foreign));
    const b = await call(bob, tool, argsFor(tool, missing));
    assert.equal(a.isError, true, `${tool} with A's ${JSON.stringify(foreign)} must fail closed: ${JSON.stringify(a.result)}`);
    assert.notEqual(a.result["reason_code"], "dependency_unavailable", `${tool}: ${JSON.stringify(a.result)}`);
    assert.notEqual(a.result["reason_code"], "internal", `${tool}: ${JSON.stringify(a.result)}`);
    assert.deepEqual(a, b, `${tool}: "exists but not yours" must equal "does not exist"`);
    return a;
  }

  it("tenant B sees none of tenant A's Projects", async () => {
    const listed = await callTool(bob, "list_projects", {});
    assert.deepEqual(listed, { isError: false, result: { projects: [] } });
  });

  it("A's project_ref and canonical id fail closed for B through every tool that takes a project, like ids that do not exist", async (t) => {
    const tools = await admittedToolsWith("project");
    assert.ok(tools.length >= 10, `expected the project tools to be admitted, got ${tools.join(", ")}`);
    for (const tool of tools) {
      const byRef = await assertIndistinguishable(tool, { project: aliceRef }, { project: "~p77" });
      assert.equal(byRef.result["reason_code"], "project_not_found", `${tool}: ${JSON.stringify(byRef.result)}`);
      if (tool === "read_files") t.diagnostic(`B's failure for A's project: ${JSON.stringify(byRef.result)}`);
      await assertIndistinguishable(tool, { project: aliceProject }, { project: "agent:tenant-a:no-such-project" });
      await assertIndistinguishable(tool, { project: aliceProject }, { project: "agent:tenant-b:demo" });
    }
    // Positive control: the same selector works for A.
    const own = await call(alice, "read_files", { project: aliceProject, files: [{ path: "README.md" }] });
    assert.equal(own.isError, false);
  });

  it("A's live job id fails closed for B through every tool that takes one, like a job id that does not exist", async () => {
    const tools = [...new Set([...(await admittedToolsWith("job_id")), ...(await admittedToolsWith("job_ids"))])];
    assert.ok(tools.includes("observe_jobs") && tools.includes("wait_for_job_terminal"), tools.join(", "));
    // Positive control: the job is live for A.
    const observed = await call(alice, "observe_jobs", { project: aliceRef, job_ids: [aliceJob] });
    assert.equal(observed.isError, false, JSON.stringify(observed.result));
    for (const tool of tools) {
      await assertIndistinguishable(tool, { project: aliceProject, job_id: aliceJob }, { project: aliceProject, job_id: "job_does_not_exist" });
      await assertIndistinguishable(tool, { project: aliceRef, job_id: aliceJob }, { project: "~p77", job_id: "job_does_not_exist" });
    }
  });

  it("B cannot focus A's runners in get_runtime_status", async () => {
    await assertIndistinguishable("get_runtime_status", { client_id: "tenant-a" }, { client_id: "tenant-zz" });
  });

  it("A's session refs fail closed for B like unknown ones", async () => {
    const sessionTools = await admittedToolsWith("session_id");
    assert.ok(
      sessionTools.includes("read_session_handoff") && sessionTools.includes("edit_project_files") && sessionTools.includes("run_shell"),
      sessionTools.join(", "),
    );
    const created = await call(alice, "create_session", { project: aliceRef, title: "tenancy" });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const selectors = [created.result["session_ref"], created.result["session_id"]].filter((s): s is string => typeof s === "string");
    assert.equal(selectors.length, 2);
    for (const selector of selectors) {
      // A well-formed selector that names no Session.
      const missing = selector.startsWith("~") ? "~s77" : `wc_sess_${"0".repeat(32)}`;
      for (const tool of sessionTools) {
        const projectOf = toolDefinition(tool)?.inputSchema.properties?.["project"] !== undefined ? { project: aliceProject } : {};
        await assertIndistinguishable(tool, { ...projectOf, session_id: selector }, { ...projectOf, session_id: missing });
      }
    }
  });

  it("another subject of A's tenant, who sees the Project, can neither use nor detect A's Session", async () => {
    const created = await call(alice, "create_session", { project: aliceRef });
    const ref = String(created.result["session_ref"]);
    const id = String(created.result["session_id"]);
    const handoff = async () => (await call(alice, "read_session_handoff", { session_id: ref })).result["calls"];
    const recorded = await handoff();
    for (const [selector, missing] of [
      [ref, "~s77"],
      [id, `wc_sess_${"0".repeat(32)}`],
    ] as const) {
      const foreign = await callTool(auditor, "read_files", { project: aliceProject, session_id: selector, files: [{ path: "README.md" }] });
      const absent = await callTool(auditor, "read_files", { project: aliceProject, session_id: missing, files: [{ path: "README.md" }] });
      assert.deepEqual(foreign, absent);
      assert.deepEqual([foreign.isError, foreign.result["detail_code"]], [true, "session_not_found"], JSON.stringify(foreign.result));
      assert.deepEqual(
        await callTool(auditor, "call_runtime_tool", { tool: "read_session_handoff", arguments: { session_id: selector } }),
        await callTool(auditor, "call_runtime_tool", { tool: "read_session_handoff", arguments: { session_id: missing } }),
      );
    }
    assert.deepEqual(await handoff(), recorded, "nothing was recorded into A's Session");
    // Positive control: A's own call with the same selector is recorded.
    assert.equal((await call(alice, "read_files", { project: aliceProject, session_id: ref, files: [{ path: "README.md" }] })).isError, false);
    assert.equal(((await handoff()) as Record<string, number>)["total"], ((recorded as Record<string, number>)["total"] ?? 0) + 1);
  });

  it("a read-only caller sees no mutating tool in tools/list", async () => {
    const { tools } = await auditor.listTools();
    assert.ok(tools.length > 0);
    for (const t of tools) assert.equal(toolDefinition(t.name)?.effect, "read_only", `${t.name} is listed to a read-only caller`);
    const groups = (await callTool(auditor, "list_tools", {})).result["categories"] as Record<string, string[]>;
    // mcp_tool's effect is its target's: admitted, it lets a read-only caller reach only operator-marked read-only tools (test/e2e/mcp-gateway.test.ts).
    for (const name of Object.values(groups).flat())
      assert.ok(toolDefinition(name)?.effect === "read_only" || toolDefinition(name)?.effectByTarget === true, `${name} is admitted to a read-only caller`);
  });

  it("a read-only caller's server instructions name no tool it may not call, and call_runtime_tool is read-only for it alone", async () => {
    const instructions = auditor.getInstructions() ?? "";
    assert.match(instructions, /read_files/);
    // mcp_tool's effect is its target's: a read-only caller may call it (operator-marked read-only targets only).
    for (const def of toolDefinitions().filter((d) => d.effect !== "read_only" && d.effectByTarget !== true))
      assert.ok(!new RegExp(`\\b${def.name}\\b`).test(instructions), `${def.name} named to a read-only caller: ${instructions}`);
    assert.match(alice.getInstructions() ?? "", /edit with edit_project_files/);
    const forwarder = async (client: Client) => (await client.listTools()).tools.find((t) => t.name === "call_runtime_tool")?.annotations;
    assert.equal((await forwarder(auditor))?.readOnlyHint, true);
    // What the Host reads: stated hints over MCP's defaults (a descriptor states only non-defaults).
    assert.deepEqual(
      { ...MCP_ANNOTATION_DEFAULTS, ...(await forwarder(alice)) },
      { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    );
  });

  it("a read-only caller's mutating calls fail closed and change nothing, directly or through call_runtime_tool", async () => {
    const mutating = toolDefinitions().filter(
      (d) => d.implemented && d.effect !== "read_only" && d.effectByTarget !== true && d.inputSchema.properties?.["project"] !== undefined,
    );
    assert.ok(mutating.some((d) => d.name === "run_shell"));
    const attempts: Array<[string, Record<string, unknown>]> = [
      // The auditor is tenant A too: the canonical id resolves for it, so only admission stops these.
      ["run_shell", { project: aliceProject, command: "touch pwned-by-run-shell" }],
      ["edit_project_files", { project: aliceProject, changes: [{ kind: "create", path: "pwned-by-edit.txt", content: "x" }] }],
      ...mutating.map((d): [string, Record<string, unknown>] => [d.name, { ...sampleToolArgs(d.name), project: aliceProject }]),
    ];
    for (const [tool, args] of attempts) {
      const presentation = toolDefinition(tool)?.category === "presentation";
      for (const [outcome, expected] of [
        [await callTool(auditor, tool, args), "tool_not_admitted"],
        // call_runtime_tool refuses a presentation tool before admission is even asked.
        [await callTool(auditor, "call_runtime_tool", { tool, arguments: args }), presentation ? "presentation_tool_not_callable" : "tool_not_admitted"],
      ] as const) {
        assert.equal(outcome.isError, true, `${tool}: ${JSON.stringify(outcome.result)}`);
        assert.equal(outcome.result["reason_code"], expected, `${tool}: ${JSON.stringify(outcome.result)}`);
        assert.equal(outcome.result["failure_stage"], "admission", `${tool}: ${JSON.stringify(outcome.result)}`);
        assert.equal(outcome.result["state_changed"], false, `${tool}: ${JSON.stringify(outcome.result)}`);
      }
    }
    assert.equal(existsSync(join(projectDir, "pwned-by-run-shell")), false, "run_shell ran for a read-only caller");
    assert.equal(existsSync(join(projectDir, "pwned-by-edit.txt")), false, "edit_project_files wrote for a read-only caller");
    // Positive control: reading the same Project is admitted.
    const read = await callTool(auditor, "read_files", { project: aliceProject, files: [{ path: "README.md" }] });
    assert.equal(read.isError, false, JSON.stringify(read.result));
  });

  it("a tenant over its rate limit gets rate_limited with retry_after_ms and Retry-After; other tenants are not affected", async () => {
    const limited = await connectMcp(server.mcpUrl, TOKENS.limited);
    try {
      for (let i = 0; i < 3; i++) assert.equal((await callTool(limited, "list_projects", {})).isError, false, `call ${i + 1} of 3`);
      const denied = await callTool(limited, "list_projects", {});
      assert.equal(denied.isError, true);
      assert.equal(denied.result["reason_code"], "rate_limited");
      assert.equal(denied.result["failure_stage"], "admission");
      assert.equal(denied.result["state_changed"], false);
      const retryAfterMs = denied.result["retry_after_ms"] as number;
      assert.ok(retryAfterMs > 0 && retryAfterMs <= 20_000, String(retryAfterMs));
      // The HTTP answer carries Retry-After too.
      const res = await fetch(server.mcpUrl, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TOKENS.limited}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-11-25",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "list_projects", arguments: {} } }),
      });
      assert.equal(res.status, 200);
      assert.ok(Number(res.headers.get("retry-after")) >= 1, String(res.headers.get("retry-after")));
      const body = (await res.json()) as { id: number; result: { isError: boolean; structuredContent: Record<string, unknown> } };
      assert.equal(body.id, 7);
      assert.equal(body.result.isError, true);
      assert.equal(body.result.structuredContent["reason_code"], "rate_limited");
      // Protocol requests are not limited, and another tenant still gets through.
      assert.ok((await limited.listTools()).tools.length > 0);
      assert.equal((await callTool(bob, "list_projects", {})).isError, false);
    } finally {
      await limited.close();
    }
  });
});
