/**
 * End to end in distributed mode: each service its own process on its own port, HTTP/2
 * between them, real Postgres and Redis, a real MCP client. Faults: the Runner is killed,
 * and Postgres goes away (behind a proxy that then refuses and resets connections like a
 * stopped server) and comes back.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RefResolverService } from "@webcodex/proto";
import { createServiceIdentity, principalHeaders } from "@webcodex/platform";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  firstProjectRef,
  startTcpProxy,
  startTestStack,
  until,
} from "../support/index.js";
import type { TcpProxy, TestDatabase } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;

describe("distributed mode: six processes over HTTP/2 with Postgres and Redis", () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  let projectDir: string;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const target = new URL(db.url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    const proxied = new URL(db.url);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(proxy.port);
    projectDir = createProjectDir({ "README.md": "# distributed\n", "src/a.ts": "export const x = 1;\n" }, { name: "dist" });
    stack = await startTestStack({
      postgresUrl: proxied.toString(),
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
    });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await proxy?.close();
    await db?.drop();
  });

  it("lists tools and reads a file through all six services, and audits the call", async () => {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "read_files"));
    assert.equal(project, "~p1");
    const { isError, result } = await callTool(client, "read_files", { project, files: [{ path: "src/a.ts" }] });
    assert.equal(isError, false, JSON.stringify(result));
    assert.equal((result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "export const x = 1;\n");
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      let rows: Array<Record<string, unknown>> = [];
      for (let i = 0; i < 50 && rows.length === 0; i++) {
        rows = (await sql.query("SELECT tool, client_id, project_canonical_id, outcome FROM audit.action_audit WHERE tool = 'read_files'")).rows;
        if (rows.length === 0) await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(rows[0], { tool: "read_files", client_id: "local", project_canonical_id: "agent:local:dist", outcome: "success" });
    } finally {
      await sql.end();
    }
  });

  it("a Workflow Session across services: session_ref as session_id is recorded, audited and handed off; once closed it fails closed with no dispatch", async () => {
    const runtime = (tool: string, args: Record<string, unknown>) => callTool(client, "call_runtime_tool", { tool, arguments: args });
    const created = await runtime("create_session", { project, title: "distributed" });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const ref = String(created.result["session_ref"]);
    const id = String(created.result["session_id"]);
    const read = await callTool(client, "read_files", { project, session_id: ref, files: [{ path: "src/a.ts" }] });
    assert.equal(read.isError, false, JSON.stringify(read.result));
    const revision = String((read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
    const edit = (sessionId: string, rev: string, to: string) =>
      callTool(client, "edit_project_files", {
        project,
        session_id: sessionId,
        changes: [{ kind: "edit", path: "src/a.ts", expected_read_revision: rev, edits: [{ replace_exact: { old_text: "x = 1", new_text: to } }] }],
      });
    const edited = await edit(ref, revision, "x = 2");
    assert.equal(edited.isError, false, JSON.stringify(edited.result));
    const ran = await callTool(client, "run_shell", { project, session_id: ref, command: "cat src/a.ts" });
    assert.equal(ran.result["output"], "export const x = 2;\n");

    const handoff = await runtime("read_session_handoff", { session_id: ref });
    assert.equal(handoff.isError, false, JSON.stringify(handoff.result));
    assert.deepEqual(
      [handoff.result["session_id"], handoff.result["calls"], handoff.result["read"], handoff.result["changed"], handoff.result["run"]],
      [id, { total: 3, failed: 0 }, { calls: 1, paths: 1, failed: 0 }, { calls: 1, paths: 1, failed: 0 }, { calls: 1, failed: 0 }],
    );

    // The audit record carries the canonical Session id.
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      let rows: Array<Record<string, unknown>> = [];
      for (let i = 0; i < 50 && rows.length < 3; i++) {
        rows = (
          await sql.query(
            "SELECT tool FROM audit.action_audit WHERE session_id = $1 AND tool IN ('read_files', 'edit_project_files', 'run_shell') ORDER BY started_at",
            [id],
          )
        ).rows;
        if (rows.length < 3) await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(
        rows.map((r) => r["tool"]),
        ["read_files", "edit_project_files", "run_shell"],
      );
    } finally {
      await sql.end();
    }

    // Close it at the ref-resolver (no model tool closes Sessions yet): it then fails closed.
    // Internal calls need a service identity: this one is made as the gateway would.
    const gatewayIdentity = createServiceIdentity({ service: "gateway", key: stack.serviceKey });
    const resolver = createClient(
      RefResolverService,
      createConnectTransport({
        baseUrl: `http://127.0.0.1:${stack.ports["ref-resolver"]}`,
        httpVersion: "2",
        interceptors: [gatewayIdentity.clientInterceptor],
      }),
    );
    const closed = await resolver.closeSession({ selector: id }, { headers: principalHeaders({ clientId: "local", subject: "dev" }) });
    assert.equal(closed.closedNow, true, JSON.stringify(closed.failure));
    const current = String((edited.result["files"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
    for (const selector of [ref, id]) {
      const refused = await edit(selector, current, "x = 3");
      assert.equal(refused.isError, true, JSON.stringify(refused.result));
      assert.deepEqual(
        [refused.result["reason_code"], refused.result["detail_code"], refused.result["state_changed"]],
        ["invalid_value", "session_closed", false],
      );
    }
    assert.equal(readFileSync(join(projectDir, "src/a.ts"), "utf8"), "export const x = 2;\n", "nothing was dispatched");
    const closedHandoff = await runtime("read_session_handoff", { session_id: ref });
    assert.deepEqual(
      [closedHandoff.result["state"], closedHandoff.result["calls"]],
      ["closed", { total: 3, failed: 0 }],
      "a closed Session keeps its handoff and records nothing more",
    );
  });

  it("a run_code_cell's child calls are recorded into its Session with the cell's call id as parent, in the handoff and the audit", async () => {
    const runtime = (tool: string, args: Record<string, unknown>) => callTool(client, "call_runtime_tool", { tool, arguments: args });
    const created = await runtime("create_session", { project, title: "cell" });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const ref = String(created.result["session_ref"]);
    const cell = await runtime("run_code_cell", {
      project,
      session_id: ref,
      code: `const hit = (await tools.search_project_texts({ queries: [{ pattern: "export const" }] })).results[0].matches[0];
const read = await tools.read_files({ files: [{ path: hit.path }] });
const all = await tools.list_project_files({});
text(hit.path + " " + read.items[0].total_lines + " " + all.paths.length);`,
    });
    assert.equal(cell.isError, false, JSON.stringify(cell.result));
    assert.equal(cell.result["child_calls"], 3);
    const handoff = await runtime("read_session_handoff", { session_id: ref });
    const recent = handoff.result["recent_calls"] as Array<Record<string, unknown>>;
    assert.deepEqual(
      recent.map((c) => c["tool"]),
      ["search_project_texts", "read_files", "list_project_files"],
    );
    const parents = new Set(recent.map((c) => c["parent_call_id"]));
    assert.equal(parents.size, 1, JSON.stringify(recent));
    const [parent] = parents;
    assert.equal(typeof parent, "string");
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      let rows: Array<Record<string, unknown>> = [];
      for (let i = 0; i < 50 && rows.length < 4; i++) {
        rows = (
          await sql.query(
            "SELECT call_id, tool, summary->>'parent_call_id' AS parent FROM audit.action_audit WHERE call_id = $1 OR summary->>'parent_call_id' = $1",
            [parent],
          )
        ).rows;
        if (rows.length < 4) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(rows.find((r) => r["call_id"] === parent)?.["tool"], "run_code_cell", "the parent is the cell's own audited call");
      assert.deepEqual(
        rows
          .filter((r) => r["parent"] === parent)
          .map((r) => r["tool"])
          .sort(),
        ["list_project_files", "read_files", "search_project_texts"],
      );
    } finally {
      await sql.end();
    }
  });

  it("a killed Runner gives a structured failure, not a hang, and a restarted one serves again", async () => {
    const runner = stack.processes.get("runner");
    runner?.kill("SIGKILL");
    await new Promise((r) => runner?.once("exit", r));
    const started = Date.now();
    const { isError, result } = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
    assert.ok(Date.now() - started < 10_000, "answered promptly");
    assert.equal(isError, true);
    assert.ok(["runner_unavailable", "runner_lost"].includes(String(result["reason_code"])), JSON.stringify(result));
    assert.equal(result["outcome_unknown"], false, "a read has no effect to be unsure about");
    // After two heartbeat intervals the broker knows the Runner is gone (and says so, not a hang).
    const later = await until(
      "the broker to know the Runner is lost",
      async () => {
        const r = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
        return r.result["detail_code"] === "runner_lost" || r.result["reason_code"] !== "runner_unavailable" ? r : undefined;
      },
      5_000,
      100,
    );
    assert.equal(later.result["reason_code"], "runner_unavailable");
    assert.equal(later.result["detail_code"], "runner_lost", "the broker knows the Runner it lost");
    await stack.restart("runner");
    const back = await until(
      "the restarted Runner to serve",
      async () => {
        const r = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
        return r.isError ? undefined : r;
      },
      6_000,
      200,
    );
    assert.equal(back.isError, false, JSON.stringify(back.result));
  });

  it("with Postgres down the gateway is not ready and calls fail with a clear reason; it recovers", async () => {
    const gateway = `http://127.0.0.1:${stack.ports.gateway}`;
    assert.equal((await fetch(`${gateway}/readyz`)).status, 200);
    await proxy.down();
    try {
      const ready = await fetch(`${gateway}/readyz`);
      assert.equal(ready.status, 503);
      const report = (await ready.json()) as { checks: Record<string, { ok: boolean; detail?: string }> };
      assert.equal(report.checks["ref-resolver"]?.ok, false);
      // The refused connection names the dependency and why, through the peer's own report.
      assert.match(
        String(report.checks["ref-resolver"]?.detail),
        /^not ready \(503\): postgres unreachable \((connect ECONNREFUSED|read ECONNRESET|Connection terminated)/,
      );
      assert.equal(report.checks["tool-registry"]?.ok, true, "a service without Postgres stays ready");
      const { isError, result } = await callTool(client, "list_projects", {});
      assert.equal(isError, true);
      assert.equal(result["reason_code"], "dependency_unavailable");
      assert.equal(result["outcome_unknown"], false);
    } finally {
      await proxy.up();
    }
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await fetch(`${gateway}/readyz`)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(status, 200);
    assert.equal((await callTool(client, "list_projects", {})).isError, false);
  });
});
