/**
 * ActionAudit end to end in distributed mode (six processes, HTTP/2, real Postgres and
 * Redis, a real MCP client): every tools/call of a scripted run has exactly one audit row,
 * and no row contains any argument value, file content, command, path or the bearer token.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, startTestStack, quietWindow, tempDir, until } from "../support/index.js";
import type { TestDatabase, ToolOutcome } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
/** A token of the same tenant with the read scope only: its edits are refused before the pipeline. */
const readerToken = `r-${randomBytes(16).toString("hex")}`;
const marker = (name: string) => `${name}-${randomBytes(4).toString("hex")}`;
const M = {
  dir: marker("secretdir"),
  file: marker("notes"),
  content: marker("CONTENT"),
  replaced: marker("REPLACED"),
  command: marker("CMDMARK"),
  argv: marker("ARGVMARK"),
  workdir: marker("WORKDIRMARK"),
  timeout: marker("TIMEOUTMARK"),
  missing: marker("missingfile"),
  pattern: marker("PATTERNMARK"),
};

describe("ActionAudit in an end-to-end run", () => {
  let database: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let sql: pg.Client;
  const calls: Array<{ tool: string; outcome: ToolOutcome }> = [];
  const call = async (tool: string, args: Record<string, unknown>) => {
    const outcome = await callTool(client, tool, args);
    calls.push({ tool, outcome });
    return outcome;
  };

  before(async () => {
    const services = await backingServices();
    database = await createTestDatabase();
    const path = `${M.dir}/${M.file}.txt`;
    const tokensFile = join(tempDir("wcx-audit-tokens-"), "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { token, client_id: "local", subject: "dev" },
          { token: readerToken, client_id: "local", subject: "reader", scopes: ["webcodex:read"] },
        ],
      }),
    );
    const projectDir = createProjectDir({ "README.md": "# audit e2e\n", [path]: `first line\n${M.content}\n` }, { name: "auditdemo" });
    stack = await startTestStack({
      postgresUrl: database.url,
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: tokensFile },
    });
    client = await connectMcp(stack.mcpUrl, token);
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();

    // The scripted run: discovery, reads, search, an edit, processes, rejections and failures.
    const listed = await call("list_projects", {});
    const project = ((listed.result["projects"] as Array<Record<string, string>>)[0] ?? {})["project_ref"] ?? "";
    await call("list_tools", {});
    await call("read_tool_manifest", { tool: "read_files" });
    const read = await call("read_files", { project, files: [{ path }] });
    const revision = ((read.result["items"] as Array<Record<string, string>>)[0] ?? {})["read_revision"] ?? "";
    await call("search_project_texts", { project, queries: [{ pattern: M.content }] });
    await call("list_project_files", { project, path: M.dir });
    await call("edit_project_files", {
      project,
      changes: [{ kind: "edit", path, expected_read_revision: revision, edits: [{ replace_exact: { old_text: M.content, new_text: M.replaced } }] }],
    });
    await call("edit_project_files", {
      project,
      changes: [{ kind: "edit", path, expected_read_revision: revision, edits: [{ replace_exact: { old_text: M.replaced, new_text: M.content } }] }],
    });
    await call("run_shell", { project, command: `echo ${M.command}` });
    await call("run_process", { project, argv: ["echo", M.argv] });
    await call("run_shell", { project, command: `echo ${M.command}`, workdir: M.workdir });
    await call("run_shell", { project, command: `echo ${M.command}`, timeout_ms: M.timeout });
    await call("read_files", { project, files: [{ path: `${M.missing}.txt` }] });
    await call("search_project_texts", { project, queries: [{ pattern: M.pattern }] });
  });

  after(async () => {
    await sql?.end();
    await client?.close();
    await stack?.stop();
    await database?.drop();
  });

  async function rows(): Promise<Array<Record<string, unknown>>> {
    return (await sql.query(`SELECT * FROM audit.action_audit ORDER BY started_at, call_id`)).rows as Array<Record<string, unknown>>;
  }

  it("every call has exactly one row (read-only batches included), with the right outcome", async () => {
    assert.ok(calls.some((c) => c.outcome.isError) && calls.some((c) => !c.outcome.isError), "the run has successes and failures");
    await until("a row for every call", async () => (await rows()).length >= calls.length, 10_000, 100);
    await quietWindow(300, "no second row for any call may arrive");
    const stored = await rows();
    assert.equal(stored.length, calls.length, `${stored.length} rows for ${calls.length} calls`);
    assert.equal(new Set(stored.map((r) => r["call_id"])).size, stored.length, "call ids are unique");
    const count = (list: string[]) => list.reduce<Record<string, number>>((m, t) => ({ ...m, [t]: (m[t] ?? 0) + 1 }), {});
    assert.deepEqual(count(stored.map((r) => String(r["tool"]))), count(calls.map((c) => (c.tool === "run_process" ? "run_process" : c.tool))));
    assert.deepEqual(stored.map((r) => r["outcome"]).sort(), calls.map((c) => (c.outcome.isError ? "failure" : "success")).sort());
    const normalized = stored.filter(
      (r) => (r["summary"] as { model_ergonomics?: { input_normalization_code?: string } }).model_ergonomics?.input_normalization_code,
    );
    assert.deepEqual(
      normalized.map((r) => [
        r["tool"],
        (r["summary"] as { model_ergonomics: { input_normalization_code: string } }).model_ergonomics.input_normalization_code,
      ]),
      [["run_process", "argv_to_args"]],
    );
    for (const r of stored) assert.equal((r["summary"] as { model_ergonomics: { version: number } }).model_ergonomics.version, 13);
  });

  it("no row contains an argument value, a path, file content, a command or the token (searched by value)", async () => {
    const columns = (
      await sql.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = 'audit' AND table_name = 'action_audit'`,
      )
    ).rows;
    const values = [...Object.values(M), token, "echo"];
    for (const value of values) {
      const where = columns.map((c) => `${c.column_name}::text ILIKE $1`).join(" OR ");
      const hits = await sql.query(`SELECT call_id, tool FROM audit.action_audit WHERE ${where}`, [`%${value}%`]);
      assert.equal(hits.rowCount, 0, `${value} found in ${JSON.stringify(hits.rows)}`);
    }
  });

  it("a call_runtime_tool rejection is audited too", async () => {
    const before = (await rows()).length;
    await callTool(client, "call_runtime_tool", { tool: "present_work_result", arguments: {} });
    await until("the refused call's row", async () => (await rows()).length > before, 5_000, 100);
    await quietWindow(300, "no second row may arrive");
    const stored = await rows();
    assert.equal(stored.length, before + 1);
    const refused = stored.find((r) => r["tool"] === "present_work_result");
    assert.deepEqual([refused?.["outcome"], refused?.["reason_code"], refused?.["failure_stage"]], ["failure", "presentation_tool_not_callable", "admission"]);
  });

  it("a call refused for a missing scope (HTTP 403) is audited with its stage and argument shape", async () => {
    const before = (await rows()).length;
    const reader = await connectMcp(stack.mcpUrl, readerToken);
    try {
      await assert.rejects(
        callTool(reader, "edit_project_files", { project: "~p1", changes: [{ kind: "create", path: `${M.file}.txt`, content: M.content }] }),
        /403|insufficient_scope/,
      );
    } finally {
      await reader.close();
    }
    await until("the denied call's row", async () => (await rows()).length > before, 5_000, 100);
    const stored = await rows();
    const denied = stored.filter((r) => r["subject"] === "reader");
    assert.deepEqual(
      denied.map((r) => [r["tool"], r["reason_code"], r["failure_stage"]]),
      [["edit_project_files", "insufficient_scope", "admission"]],
    );
    assert.match(String(denied[0]?.["args_shape_fingerprint"]), /^[0-9a-f]{16}$/);
  });

  it("rows carry the argument shape, result sizes and failure stage", async () => {
    for (const r of await rows()) {
      assert.match(String(r["args_shape_fingerprint"]), /^[0-9a-f]{16}$/);
      if (r["outcome"] === "success") assert.ok(Number(r["result_projected_bytes"]) > 0);
      else assert.ok(r["failure_stage"]);
    }
  });
});
