/**
 * End to end in distributed mode: each service its own process on its own port, HTTP/2
 * between them, real Postgres and Redis, a real MCP client. Faults: the Runner is killed,
 * and Postgres goes away (behind a proxy) and comes back.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { startDistributed } from "@webcodex/cli";
import type { DistributedStack } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, redisKeyPrefix, startTcpProxy } from "../support/index.js";
import type { TcpProxy, TestDatabase } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;

describe("distributed mode: six processes over HTTP/2 with Postgres and Redis", () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let stack: DistributedStack;
  let client: Client;
  let project: string;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const target = new URL(db.url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    const proxied = new URL(db.url);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(proxy.port);
    const projectDir = createProjectDir({ "README.md": "# distributed\n", "src/a.ts": "export const x = 1;\n" }, { name: "dist" });
    stack = await startDistributed({
      basePort: 20_000 + Math.floor(Math.random() * 20_000),
      postgresUrl: proxied.toString(),
      redisUrl: services.redisUrl,
      projectDir,
      clientId: "local",
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      extraEnv: { WEBCODEX_REDIS_KEY_PREFIX: redisKeyPrefix() },
      heartbeatIntervalMs: 500,
      stdio: "ignore",
    });
    client = await connectMcp(stack.mcpUrl, token);
    const listed = await callTool(client, "list_projects", {});
    project = ((listed.result["projects"] as Array<Record<string, string>>)[0] ?? {})["project_ref"] ?? "";
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
    // After two heartbeat intervals the broker knows the Runner is gone.
    await new Promise((r) => setTimeout(r, 1_200));
    const later = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
    assert.equal(later.result["reason_code"], "runner_unavailable");
    assert.equal(later.result["detail_code"], "runner_lost", "the broker knows the Runner it lost");
    await stack.restart("runner");
    let back = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
    for (let i = 0; i < 30 && back.isError; i++) {
      await new Promise((r) => setTimeout(r, 200));
      back = await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
    }
    assert.equal(back.isError, false, JSON.stringify(back.result));
  });

  it("with Postgres down the gateway is not ready and calls fail with a clear reason; it recovers", async () => {
    const gateway = `http://127.0.0.1:${stack.ports.gateway}`;
    assert.equal((await fetch(`${gateway}/readyz`)).status, 200);
    await proxy.down();
    try {
      const ready = await fetch(`${gateway}/readyz`);
      assert.equal(ready.status, 503);
      const report = (await ready.json()) as { checks: Record<string, { ok: boolean }> };
      assert.equal(report.checks["ref-resolver"]?.ok, false);
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
