/**
 * The audit spool and retention as deployed, not just as library code:
 * - distributed: the gateway's WEBCODEX_AUDIT_SPOOL_DIR keeps effectful calls acknowledged
 *   while the audit service is down and delivers their records once it is back; a spool that
 *   cannot be opened makes such a call answer audit_not_durable, saying the change happened;
 * - embedded (`webcodex dev`): the spool lives in <data dir>/audit-spool, and the audit
 *   retention setting drives partition maintenance (old partitions dropped, new ones ahead).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { projectIdFor, startEmbedded } from "@webcodex/cli";
import type { DistributedStack } from "@webcodex/cli";
import { AUDIT_SCHEMA, dayOf, ensurePartitions, listPartitionDays, migrateAudit } from "@webcodex/audit";
import { createLogger, createPgliteDatabase } from "@webcodex/platform";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  seedPgliteCluster,
  startTestStack,
  tempDir,
  until,
} from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const DAY_MS = 86_400_000;
const token = `t-${randomBytes(16).toString("hex")}`;

/** A distributed stack whose gateway uses `spoolDir`, with an MCP client and a SQL connection. */
async function stackWithSpool(spoolDir: string) {
  const services = await backingServices();
  const database = await createTestDatabase();
  const projectDir = createProjectDir({ "README.md": "# spool\n" }, { name: "spooldemo" });
  const stack = await startTestStack({
    postgresUrl: database.url,
    redisUrl: services.redisUrl,
    projectDir,
    gatewayEnv: { WEBCODEX_DEV_TOKEN: token, WEBCODEX_AUDIT_SPOOL_DIR: spoolDir },
  });
  const client = await connectMcp(stack.mcpUrl, token);
  const sql = new pg.Client({ connectionString: database.url });
  await sql.connect();
  const killAudit = async () => {
    const audit = stack.processes.get("audit");
    assert.ok(audit);
    const exited = new Promise((r) => audit.once("exit", r));
    audit.kill("SIGKILL");
    await exited;
  };
  const close = async () => {
    await sql.end();
    await client.close();
    await stack.stop();
    await database.drop();
  };
  return { stack, client, sql, projectDir, project: `agent:local:${projectIdFor(projectDir)}`, killAudit, close };
}

/** Segments holding records (the next segment is created ahead of need, empty but for preallocated zeros). */
const segments = (dir: string) =>
  existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".jsonl") && readFileSync(join(dir, f), "utf8").replace(/\0+$/, "") !== "") : [];

describe("gateway audit spool (distributed, WEBCODEX_AUDIT_SPOOL_DIR)", () => {
  let env: Awaited<ReturnType<typeof stackWithSpool>>;
  const spoolDir = join(tempDir("wcx-gw-spool-"), "spool");

  before(async () => {
    env = await stackWithSpool(spoolDir);
  });
  after(async () => {
    await env?.close();
  });

  it("an edit during an audit outage is acknowledged from the spool and stored once the audit service is back", async () => {
    await env.killAudit();
    const edit = await callTool(env.client, "edit_project_files", {
      project: env.project,
      changes: [{ kind: "create", path: "while-down.txt", content: "x\n" }],
    });
    assert.equal(edit.isError, false, JSON.stringify(edit.result));
    assert.ok(segments(spoolDir).length > 0, "the record was spooled");
    const stored = async () =>
      (await env.sql.query(`SELECT outcome FROM audit.action_audit WHERE tool = 'edit_project_files'`).catch(() => ({ rows: [] }))).rows;
    await env.stack.restart("audit");
    await until("the spooled record delivered", async () => (await stored()).length === 1, 20_000);
    assert.deepEqual(await stored(), [{ outcome: "success" }]);
    await until("the delivered segment deleted", async () => segments(spoolDir).length === 0, 10_000);
  });
});

describe("gateway audit spool that cannot be opened", () => {
  let env: Awaited<ReturnType<typeof stackWithSpool>>;

  before(async () => {
    // A path under a regular file: the spool directory can never be created.
    env = await stackWithSpool("/dev/null/webcodex-spool");
  });
  after(async () => {
    await env?.close();
  });

  it("an edit while the audit service is down answers audit_not_durable and says the change happened", async () => {
    await env.killAudit();
    const edit = await callTool(env.client, "edit_project_files", {
      project: env.project,
      changes: [{ kind: "create", path: "unaudited.txt", content: "y\n" }],
    });
    assert.equal(edit.isError, true);
    assert.deepEqual(
      [edit.result["reason_code"], edit.result["failure_stage"], edit.result["detail_code"], edit.result["state_changed"], edit.result["outcome_unknown"]],
      ["dependency_unavailable", "record", "audit_not_durable", true, false],
    );
    assert.equal(readFileSync(join(env.projectDir, "unaudited.txt"), "utf8"), "y\n", "the edit really happened, as the failure says");
  });
});

describe("embedded mode: spool in the data dir, retention drives partition maintenance", () => {
  const dataDir = tempDir("wcx-embedded-audit-");
  const today = dayOf(Date.now());
  const expired = today - 10 * DAY_MS;

  before(async () => {
    // A data dir from an earlier run, with a partition past a 3-day retention.
    await seedPgliteCluster(dataDir);
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    await migrateAudit(db);
    await ensurePartitions(db, AUDIT_SCHEMA, [expired]);
    await db.close();
  });

  it("creates <data dir>/audit-spool, drops partitions past retention and creates the days ahead", async () => {
    const embedded = await startEmbedded({
      projectDir: createProjectDir({ "a.txt": "a\n" }, { name: "embeddedaudit" }),
      port: 0,
      dataDir,
      tokens: [{ token, clientId: "local", subject: "dev" }],
      clientId: "local",
      logger: createLogger({ service: "test", level: "silent" }),
      auditRetention: { retentionDays: 3, partitionsAheadDays: 12, maintenanceIntervalMs: 60_000 },
    });
    let client: Client | undefined;
    try {
      await until("the spool is opened", async () => existsSync(join(dataDir, "audit-spool", "spool.lock")), 5_000);
      client = await connectMcp(embedded.mcpUrl, token);
      const listed = await callTool(client, "list_projects", {});
      assert.equal(listed.isError, false);
    } finally {
      await client?.close();
      await embedded.close();
    }
    assert.equal(existsSync(join(dataDir, "audit-spool", "spool.lock")), false, "the lock is released on close");
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      const days = await listPartitionDays(db, AUDIT_SCHEMA);
      assert.ok(!days.includes(expired), "the partition past retention was dropped");
      assert.ok(days.includes(today) && days.includes(today + 12 * DAY_MS), "today's and 12 days ahead exist");
      const rows = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${AUDIT_SCHEMA}.action_audit WHERE tool = 'list_projects'`);
      assert.equal(Number(rows.rows[0]?.n), 1, "the call was audited through the embedded recorder");
    } finally {
      await db.close();
    }
  });
});
