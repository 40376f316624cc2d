/**
 * ActionAudit against real Postgres: the 0002 migration over a database that has 0001, daily
 * partitions (ahead, on demand, retention), idempotency by (call_id, started_at), the
 * append-only guards, summary.model_ergonomics, and the CHECKs that keep free text out.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ActionRecordSchema, AuditService } from "@webcodex/proto";
import type { ActionRecord } from "@webcodex/proto";
import {
  AUDIT_SCHEMA,
  appendActions,
  createAudit,
  dayOf,
  dropExpiredPartitions,
  listPartitionDays,
  maintainPartitions,
  migrateAudit,
  partitionName,
} from "@webcodex/audit";
import { createInProcessClient, createPostgresDatabase, principalHeaders } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { createTestDatabase } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const DAY = 86_400_000;
let n = 0;
function record(over: Omit<MessageInitShape<typeof ActionRecordSchema>, "$typeName"> = {}): ActionRecord {
  n += 1;
  return create(ActionRecordSchema, {
    callId: `call-${n}-${Date.now()}`,
    clientId: "acme",
    subject: "alice",
    tool: "read_files",
    projectCanonicalId: "agent:acme:p",
    effect: "read_only",
    outcome: "success",
    startedAtUnixMs: BigInt(Date.now()),
    durationUs: 1500,
    stageDurationsUs: { normalization: 10, resolution: 200, dispatch: 1200 },
    argumentShape: { fingerprint: "0123456789abcdef", leaves: ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] },
    resultSize: { canonicalBytes: 900, projectedBytes: 700, projectedMetadataBytes: 60 },
    ...over,
  });
}

describe("ActionAudit store on Postgres", () => {
  let database: TestDatabase;
  let db: Database;

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 4 });
  });
  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it("the baseline migration leaves a range-partitioned, append-only table, and runs once", async () => {
    assert.deepEqual(await migrateAudit(db), ["0001_baseline"]);
    assert.deepEqual(await migrateAudit(db), [], "idempotent");
    const kind = await db.query<{ relkind: string }>(`SELECT relkind FROM pg_class WHERE oid = 'audit.action_audit'::regclass`);
    assert.equal(kind.rows[0]?.relkind, "p", "partitioned table");
    const key = await db.query<{ def: string }>(`SELECT pg_get_partkeydef('audit.action_audit'::regclass) AS def`);
    assert.equal(key.rows[0]?.def, "RANGE (started_at)");
    const pk = await db.query<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'audit.action_audit'::regclass AND contype = 'p'`,
    );
    assert.equal(pk.rows[0]?.def, "PRIMARY KEY (call_id, started_at)");
  });

  it("maintenance creates today's and the next days' partitions", async () => {
    const now = Date.now();
    await maintainPartitions(db, AUDIT_SCHEMA, { retentionDays: 30, aheadDays: 3 }, now);
    const days = await listPartitionDays(db, AUDIT_SCHEMA);
    for (let i = 0; i <= 3; i++) assert.ok(days.includes(dayOf(now) + i * DAY), partitionName(dayOf(now) + i * DAY));
  });

  it("appends once per (call_id, started_at): a replayed batch stores nothing new", async () => {
    const batch = [record(), record(), record()];
    assert.equal(await appendActions(db, batch), 3);
    assert.equal(await appendActions(db, [...batch, ...batch]), 0);
    const rows = await db.query<{ n: string }>(`SELECT count(*) AS n FROM audit.action_audit WHERE call_id = ANY($1)`, [batch.map((r) => r.callId)]);
    assert.equal(Number(rows.rows[0]?.n), 3);
  });

  it("a batch larger than one statement allows (65,535 parameters) is stored whole", async () => {
    const big = Array.from({ length: 3_500 }, () => record({ subject: "bulk" }));
    assert.equal(await appendActions(db, big), 3_500);
    assert.equal(await appendActions(db, big), 0);
  });

  it("a record for a day without a partition gets one on demand; a record past retention is acknowledged but not stored", async () => {
    const old = record({ startedAtUnixMs: BigInt(Date.now() - 20 * DAY) });
    const future = record({ startedAtUnixMs: BigInt(Date.now() + 40 * DAY) });
    const expired = record({ startedAtUnixMs: BigInt(Date.now() - 400 * DAY) });
    assert.equal(await appendActions(db, [old, future, expired], { retentionDays: 90 }), 2);
    const days = await listPartitionDays(db, AUDIT_SCHEMA);
    assert.ok(days.includes(dayOf(Date.now() - 20 * DAY)));
    assert.ok(days.includes(dayOf(Date.now() + 40 * DAY)));
    assert.ok(!days.includes(dayOf(Date.now() - 400 * DAY)));
  });

  it("retention drops whole expired partitions and nothing newer; a dropped day is recreated if a record arrives", async () => {
    const old = record({ startedAtUnixMs: BigInt(Date.now() - 20 * DAY) });
    await appendActions(db, [old]);
    const dropped = await dropExpiredPartitions(db, AUDIT_SCHEMA, { retentionDays: 10, aheadDays: 0 });
    assert.ok(dropped.includes(dayOf(Date.now() - 20 * DAY)));
    assert.ok(dropped.every((d) => d < dayOf(Date.now()) - 10 * DAY + 1));
    const left = await db.query(`SELECT 1 FROM audit.action_audit WHERE call_id = $1`, [old.callId]);
    assert.equal(left.rowCount, 0);
    // The append path's cache still believes the partition exists: it recovers (23514) by recreating it.
    const again = record({ startedAtUnixMs: BigInt(Date.now() - 20 * DAY) });
    assert.equal(await appendActions(db, [again]), 1);
  });

  it("rows cannot be updated, deleted or truncated, on the table or on a partition", async () => {
    const r = record();
    await appendActions(db, [r]);
    const part = partitionName(dayOf(Number(r.startedAtUnixMs)));
    for (const sql of [
      `UPDATE audit.action_audit SET outcome = 'failure' WHERE call_id = '${r.callId}'`,
      `DELETE FROM audit.action_audit WHERE call_id = '${r.callId}'`,
      `UPDATE audit.${part} SET tool = 'run_shell' WHERE call_id = '${r.callId}'`,
      `DELETE FROM audit.${part} WHERE call_id = '${r.callId}'`,
      `TRUNCATE audit.action_audit`,
      `TRUNCATE audit.${part}`,
    ]) {
      await assert.rejects(db.query(sql), /append-only/, sql);
    }
  });

  it("summary.model_ergonomics has the code of a canonical success only, and only known codes", async () => {
    const ok = record({ inputNormalizationCode: "argv_to_args" });
    const failed = record({ outcome: "failure", reasonCode: "execution_failed", failureStage: "execution", inputNormalizationCode: "argv_to_args" });
    const unknown = record({ inputNormalizationCode: "python3_alias" });
    await appendActions(db, [ok, failed, unknown]);
    const rows = await db.query<{ call_id: string; summary: unknown }>(`SELECT call_id, summary FROM audit.action_audit WHERE call_id = ANY($1)`, [
      [ok.callId, failed.callId, unknown.callId],
    ]);
    const by = new Map(rows.rows.map((r) => [r.call_id, r.summary]));
    assert.deepEqual(by.get(ok.callId), { model_ergonomics: { version: 13, input_normalization_code: "argv_to_args" } });
    assert.deepEqual(by.get(failed.callId), { model_ergonomics: { version: 13 } });
    assert.deepEqual(by.get(unknown.callId), { model_ergonomics: { version: 13 } });
    await assert.rejects(
      db.query(`INSERT INTO audit.action_audit (call_id, started_at, client_id, subject, tool, effect, outcome, reason_code, state_changed, outcome_unknown, duration_us, summary)
                VALUES ('x-fail-code', now(), 'acme', 'a', 'run_shell', 'process_execution', 'failure', 'execution_failed', false, false, 1, '{"model_ergonomics":{"version":13,"input_normalization_code":"argv_to_args"}}')`),
      /check constraint/,
      "the table itself refuses a code on a failure",
    );
  });

  it("free text never lands in code or hash columns: the service drops it and the table refuses it", async () => {
    const prose = record({
      outcome: "failure",
      reasonCode: "expected ';' at line 3 of /etc/passwd",
      failureStage: "parse error near 'rm -rf'",
      tool: "run_shell",
      effect: "process_execution",
      argumentShape: { fingerprint: "cat /etc/shadow", leaves: ["/home/alice/.ssh/id_rsa"] },
      stageDurationsUs: { normalization: 5, "resolution.session": 3, "token=abc123 secret": 7, normalize: 4, "resolution.other": 2 },
    });
    await appendActions(db, [prose]);
    const row = (
      await db.query<Record<string, unknown>>(
        `SELECT reason_code, failure_stage, args_shape_fingerprint, args_shape_leaves, stage_durations_us FROM audit.action_audit WHERE call_id = $1`,
        [prose.callId],
      )
    ).rows[0];
    assert.deepEqual(row, {
      reason_code: null,
      failure_stage: null,
      args_shape_fingerprint: null,
      args_shape_leaves: null,
      // Only the pipeline vocabulary is kept: prose and names this build does not know are dropped.
      stage_durations_us: { normalization: 5, "resolution.session": 3 },
    });
    for (const [column, value] of [
      ["reason_code", "'no such file: /etc/passwd'"],
      ["args_shape_fingerprint", "'rm -rf /'"],
      ["args_shape_leaves", "ARRAY['src/secret.ts']"],
    ] as const) {
      await assert.rejects(
        db.query(`INSERT INTO audit.action_audit (call_id, started_at, client_id, subject, tool, effect, outcome, state_changed, outcome_unknown, duration_us, summary, ${column})
                  VALUES ('x-${column}', now(), 'acme', 'a', 'run_shell', 'process_execution', 'failure', false, false, 1, '{}', ${value})`),
        /check constraint/,
        column,
      );
    }
  });

  it("ListActions returns the caller tenant's records with shape, sizes and the normalization code", async () => {
    const client = createInProcessClient(AuditService, createAudit({ db }));
    const mine = record({ clientId: "tenant-list", inputNormalizationCode: "clamped_to_ceiling" });
    await client.recordActions({ records: [mine, record({ clientId: "someone-else" })] });
    const res = await client.listActions({ limit: 10 }, { headers: principalHeaders({ clientId: "tenant-list", subject: "alice" }) });
    assert.equal(res.records.length, 1);
    const got = res.records[0];
    assert.equal(got?.callId, mine.callId);
    assert.equal(got?.inputNormalizationCode, "clamped_to_ceiling");
    assert.deepEqual(got?.argumentShape?.leaves, ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]);
    assert.equal(got?.resultSize?.projectedBytes, 700);
    assert.equal(got?.startedAtUnixMs, mine.startedAtUnixMs);
  });
});
