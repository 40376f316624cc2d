/**
 * The operator's tool policy through the real path (MCP SDK client → `webcodex dev` → gateway
 * → in-process tool-registry admission → Runner). Two tenants and two OAuth clients from a dev
 * tokens file: the tenant `locked` (also denied run_script) and the client `untrusted-host` are denied run_shell. For
 * them run_shell is a name that does not exist: absent from tools/list, the server
 * instructions, list_tools and read_tool_manifest, and a call by name (direct or through
 * call_runtime_tool) fails exactly as a call to a tool that never existed. The tenant `open`
 * on another client runs it. A malformed policy stops `webcodex dev` naming the field.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, cliPath, firstProjectRef, connectMcp, createProjectDir, executeFollowUp, runCaptured, startDevServer, tempDir } from "../support/index.js";
import type { DevServer } from "../support/index.js";

const TOKENS = {
  open: "open-dev-token-0123456789abcdef",
  untrusted: "untrusted-dev-token-0123456789ab",
  locked: "locked-dev-token-0123456789abcde",
};
const POLICY = { tenants: { locked: { deny_tools: ["run_shell", "run_script"] } }, clients: { "untrusted-host": { deny_tools: ["run_shell"] } } };

/** A result with one tool name replaced by another, to compare a withheld tool's failure with an unknown one's. */
const renamed = (value: unknown, from: string, to: string): unknown => JSON.parse(JSON.stringify(value).split(JSON.stringify(from)).join(JSON.stringify(to)));

describe("tool policy (embedded)", { timeout: 240_000 }, () => {
  let server: DevServer;
  let open: Client;
  let untrusted: Client;
  let locked: Client;
  let lockedProject = "";
  let openProject = "";

  before(async () => {
    const dir = tempDir("wcx-policy-cfg-");
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: TOKENS.open, client_id: "open", subject: "alice", oauth_client_id: "trusted-host" },
          { token: TOKENS.untrusted, client_id: "open", subject: "alice", oauth_client_id: "untrusted-host" },
          { token: TOKENS.locked, client_id: "locked", subject: "eve" },
        ],
      }),
    );
    writeFileSync(join(dir, "policy.json"), JSON.stringify(POLICY));
    server = await startDevServer({
      projectDir: createProjectDir({ "README.md": "policy\n" }, { name: "policy" }),
      dataDir: tempDir("wcx-policy-data-"),
      tokensFile: join(dir, "tokens.json"),
      env: { WEBCODEX_TOOL_POLICY_FILE: join(dir, "policy.json") },
    });
    [open, untrusted, locked] = await Promise.all([
      connectMcp(server.mcpUrl, TOKENS.open),
      connectMcp(server.mcpUrl, TOKENS.untrusted),
      connectMcp(server.mcpUrl, TOKENS.locked),
    ]);
    // The locked tenant has a Project of its own, where run_shell would otherwise run.
    let created = await callTool(locked, "call_runtime_tool", { tool: "create_project", arguments: { name: "mine", source: { empty: {} } } });
    for (let i = 0; i < 30 && created.result["project_state"] === "pending"; i++) created = await executeFollowUp(locked, created.result["follow_up"]);
    assert.equal(created.result["project_id"], "agent:locked:mine", JSON.stringify(created));
    lockedProject = String(created.result["project_id"]);
    openProject = await firstProjectRef(untrusted);
    assert.notEqual(openProject, "");
  });
  after(async () => {
    await Promise.all([open?.close(), untrusted?.close(), locked?.close()]);
    await server?.stop();
  });

  const shell = (client: Client, project: string) =>
    callTool(client, "call_runtime_tool", { tool: "run_shell", arguments: { project, command: "echo ran-$((6*7))", wait_ms: 30_000 } });

  it("another tenant's caller sees run_shell everywhere and runs it", async () => {
    assert.ok(
      (await open.listTools()).tools.some((t) => t.name === "run_shell"),
      "run_shell is a Direct tool",
    );
    assert.match(open.getInstructions() ?? "", /\brun_script\b/, "gateway-only tools are named in the instructions");
    const listed = await callTool(open, "list_tools", { category: "execution" });
    assert.ok((listed.result["categories"] as Record<string, string[]>)["execution"]?.includes("run_shell"), JSON.stringify(listed));
    const manifest = await callTool(open, "read_tool_manifest", { tool: "run_shell" });
    assert.equal(manifest.isError, false);
    const ran = await shell(open, await firstProjectRef(open));
    assert.equal(ran.isError, false, JSON.stringify(ran));
    assert.match(JSON.stringify(ran.result), /ran-42/);
  });

  for (const [who, client, project] of [
    ["the tenant denied run_shell", () => locked, () => lockedProject],
    ["the OAuth client denied run_shell (same tenant as the caller who may)", () => untrusted, () => openProject],
  ] as const) {
    it(`${who} does not see it: not in tools/list, the instructions, list_tools or read_tool_manifest`, async () => {
      const c = client();
      const tools = (await c.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes("call_runtime_tool"));
      assert.ok(!JSON.stringify(await c.listTools()).includes("run_shell"));
      assert.doesNotMatch(c.getInstructions() ?? "", /run_shell/);
      if (c === locked) assert.doesNotMatch(c.getInstructions() ?? "", /run_script/, "a withheld gateway-only tool is not named either");
      assert.match(c.getInstructions() ?? "", /\brun_process\b/, "other execution tools are still named");
      const listed = await callTool(c, "list_tools", {});
      assert.equal(listed.isError, false);
      assert.ok(!JSON.stringify(listed.result).includes("run_shell"), JSON.stringify(listed.result));
      assert.ok((listed.result["categories"] as Record<string, string[]>)["execution"]?.includes("run_process"));
      const manifest = await callTool(c, "read_tool_manifest", { tool: "run_shell" });
      const unknown = await callTool(c, "read_tool_manifest", { tool: "no_such_tool" });
      assert.equal(manifest.isError, true);
      assert.deepEqual(renamed(manifest, "run_shell", "no_such_tool"), unknown);
    });

    it(`${who} cannot call it in any way: directly and through call_runtime_tool it fails as an unknown tool does`, async () => {
      const c = client();
      const args = { project: project(), command: "echo ran-$((6*7))" };
      const direct = await callTool(c, "run_shell", args);
      const directUnknown = await callTool(c, "no_such_tool", args);
      assert.equal(direct.isError, true);
      assert.equal(direct.result["reason_code"], "unknown_tool", JSON.stringify(direct));
      assert.deepEqual(renamed(direct, "run_shell", "no_such_tool"), directUnknown);
      const gateway = await shell(c, project());
      const gatewayUnknown = await callTool(c, "call_runtime_tool", {
        tool: "no_such_tool",
        arguments: { project: project(), command: "echo ran-$((6*7))", wait_ms: 30_000 },
      });
      assert.equal(gateway.isError, true);
      assert.equal(gateway.result["reason_code"], "unknown_tool");
      assert.deepEqual(gateway, gatewayUnknown);
      assert.doesNotMatch(JSON.stringify([direct, gateway]), /ran-42/);
    });
  }

  it("a malformed policy stops webcodex dev at start-up, naming the field", async () => {
    const dir = tempDir("wcx-policy-bad-");
    const run = await runCaptured(process.execPath, [cliPath, "dev", "--project", dir, "--port", "0", "--data-dir", join(dir, "data")], {
      cwd: dir,
      timeoutMs: 60_000,
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: dir,
        WEBCODEX_DEV_TOKEN: "a-dev-token-0123456789",
        WEBCODEX_TOOL_POLICY: JSON.stringify({ tenants: { locked: { deny_tools: ["run_shel"] } } }),
      },
    });
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /invalid tool policy: \/tenants\/locked\/deny_tools\/0 must be one of the known tool names \(WEBCODEX_TOOL_POLICY\)/);
  });
});
