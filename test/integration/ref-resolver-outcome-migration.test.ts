/**
 * Migration 0009 on databases that already hold Session calls: rows recorded in the earlier
 * spelling (ok, failed) read back as the platform's CallOutcome (success, failure), the
 * handoff counts them as before, a row inserted later in the old spelling is stored in the new
 * one, anything else is refused, and the table stays append-only. Run on Postgres and on the embedded PGlite `webcodex dev` uses.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createPgliteDatabase, createPostgresDatabase, principalHeaders, runMigrations } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver, refResolverMigrations, REF_RESOLVER_SCHEMA } from "@webcodex/ref-resolver";
import { createTestDatabase } from "../support/index.js";

const as = (p: Principal) => ({ headers: principalHeaders(p) });
const runner: Principal = { clientId: "acme", subject: "runner:r1" };
const alice: Principal = { clientId: "acme", subject: "alice" };

/** Columns of a session_calls row as the earlier release wrote it. */
const OLD_ROWS: Array<
  [seq: number, tool: string, effect: string, outcome: string, reason: string | null, job: string | null, command: string | null, exit: number | null]
> = [
  [1, "read_files", "read_only", "ok", null, null, null, null],
  [2, "edit_project_files", "workspace_write", "failed", "stale_read_revision", null, null, null],
  [3, "run_shell", "process_execution", "ok", null, null, "npm test", 1],
  [4, "run_shell", "process_execution", "pending", null, "job-1", "sleep 9", null],
  [5, "edit_project_files", "workspace_write", "unknown", "dependency_unavailable", null, null, null],
];

async function migratesOldRows(db: Database): Promise<void> {
  // The previous release's schema, with a Session and calls recorded in the old spelling …
  await runMigrations(
    db,
    REF_RESOLVER_SCHEMA,
    refResolverMigrations.filter((m) => m.id < "0009"),
  );
  let client = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: 0 }));
  await client.registerProject({ clientId: "acme", projectId: "app", rootIdentity: "/srv/app", name: "app" }, as(runner));
  const created = await client.createSession({ projectSelector: "agent:acme:app" }, as(alice));
  const sessionId = created.session?.sessionId ?? "";
  assert.match(sessionId, /^wc_sess_/);
  for (const [seq, tool, effect, outcome, reason, job, command, exit] of OLD_ROWS)
    await db.query(
      `INSERT INTO refs.session_calls (session_id, seq, call_id, tool, effect, outcome, reason_code, job_id, job_state, command_summary, exit_code)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [sessionId, seq, `call-${seq}`, tool, effect, outcome, reason, job, job === null ? null : "pending", command, exit],
    );
  await db.query("UPDATE refs.sessions SET calls_recorded = $2 WHERE session_id = $1", [sessionId, OLD_ROWS.length]);
  await assert.rejects(
    db.query(
      `INSERT INTO refs.session_calls (session_id, seq, call_id, tool, effect, outcome) VALUES ($1, 9, 'call-9', 'read_files', 'read_only', 'success')`,
      [sessionId],
    ),
    /session_calls_outcome_check/,
    "the old table knows only the old spelling",
  );

  // … then this release's migration rewrites them in place.
  assert.deepEqual(await migrateRefResolver(db), [
    "0009_session_call_outcome_vocabulary",
    "0010_recovered_writes",
    "0011_session_call_parent",
    "0012_project_use",
  ]);
  const { rows } = await db.query<{ seq: string; outcome: string }>("SELECT seq, outcome FROM refs.session_calls ORDER BY seq");
  assert.deepEqual(
    rows.map((r) => [Number(r.seq), r.outcome]),
    [
      [1, "success"],
      [2, "failure"],
      [3, "success"],
      [4, "pending"],
      [5, "unknown"],
    ],
  );

  // The handoff reads them in the one spelling and counts them as before.
  client = createInProcessClient(RefResolverService, createRefResolver({ db, liveCacheTtlMs: 0 }));
  const h = (await client.readSessionHandoff({ selector: sessionId }, as(alice))).handoff;
  assert.ok(h);
  assert.deepEqual([h.callsFailed, h.callsOutcomeUnknown], [1n, 1n]);
  assert.deepEqual(
    h.recentCalls.map((c) => [Number(c.seq), c.outcome, c.parentCallId]),
    // Rows recorded before 0011 were all direct calls: no parent.
    [
      [1, "success", ""],
      [2, "failure", ""],
      [3, "success", ""],
      [4, "pending", ""],
      [5, "unknown", ""],
    ],
  );
  assert.deepEqual(
    h.commands.map((c) => [c.commandSummary, c.outcome]),
    [
      ["sleep 9", "pending"],
      ["npm test", "success"],
    ],
  );

  // New records use the one spelling. A gateway of the previous release (still running while a
  // release rolls out) sends the earlier one: the service records it in the one spelling. Any
  // other word is refused by the service and by the table.
  const record = (outcome: string, callId: string) =>
    client.recordSessionCall(
      { sessionSelector: sessionId, projectCanonicalId: "agent:acme:app", call: { callId, tool: "read_files", effect: "read_only", outcome } },
      as(alice),
    );
  assert.equal((await record("success", "call-new")).recorded, true);
  assert.equal((await record("ok", "call-old-gateway")).recorded, true);
  assert.equal((await record("failed", "call-old-gateway-2")).recorded, true);
  assert.deepEqual(
    (
      await db.query<{ call_id: string; outcome: string }>(
        `SELECT call_id, outcome FROM refs.session_calls WHERE call_id LIKE 'call-old-gateway%' ORDER BY seq`,
        [],
      )
    ).rows.map((r) => [r.call_id, r.outcome]),
    [
      ["call-old-gateway", "success"],
      ["call-old-gateway-2", "failure"],
    ],
  );
  await assert.rejects(record("maybe", "call-made-up"), /outcome/);
  await assert.rejects(
    db.query(
      `INSERT INTO refs.session_calls (session_id, seq, call_id, tool, effect, outcome) VALUES ($1, 98, 'call-98', 'read_files', 'read_only', 'maybe')`,
      [sessionId],
    ),
    /session_calls_outcome_check/,
  );
  // A ref-resolver of the previous release (still running while a release rolls out) inserts
  // the earlier spelling: the row is kept, stored in the one spelling.
  await db.query(
    `INSERT INTO refs.session_calls (session_id, seq, call_id, tool, effect, outcome, reason_code) VALUES ($1, 99, 'call-99', 'run_shell', 'process_execution', 'failed', 'execution_failed')`,
    [sessionId],
  );
  await db.query(
    `INSERT INTO refs.session_calls (session_id, seq, call_id, tool, effect, outcome) VALUES ($1, 100, 'call-100', 'read_files', 'read_only', 'ok')`,
    [sessionId],
  );
  const late = await db.query<{ seq: string; outcome: string }>("SELECT seq, outcome FROM refs.session_calls WHERE seq >= 99 ORDER BY seq");
  assert.deepEqual(
    late.rows.map((r) => [Number(r.seq), r.outcome]),
    [
      [99, "failure"],
      [100, "success"],
    ],
  );
  // The rewrite did not leave the table open to updates.
  await assert.rejects(db.query("UPDATE refs.session_calls SET outcome = 'failure' WHERE seq = 1"), /never rewritten/);
}

describe("ref-resolver migration 0009: one spelling of a call's outcome", { timeout: 60_000 }, () => {
  it("rewrites stored Session calls on Postgres", async () => {
    const database = await createTestDatabase();
    const db = createPostgresDatabase({ url: database.url, max: 3 });
    try {
      await migratesOldRows(db);
    } finally {
      await db.close();
      await database.drop();
    }
  });

  it("rewrites stored Session calls on embedded PGlite", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-refs-outcome-"));
    const db = await createPgliteDatabase(dir);
    try {
      await migratesOldRows(db);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
