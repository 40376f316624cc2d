import assert from "node:assert/strict";
import type { Queryable } from "@webcodex/platform";

/**
 * Lapses a live Attempt's lease now instead of waiting lease_ms: the lease clock is the
 * database's (lease_live is lease_expires_at > now()), so moving the expiry into the past is
 * what lease_ms without a heartbeat does. Checks first that the lease is live and runs at most
 * `leaseMs` from now, so the lease's length is still what the test checks.
 */
export async function lapseLease(db: Queryable, attemptId: unknown, leaseMs: number): Promise<void> {
  const live = await db.query<{ left_ms: number }>(
    `SELECT (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS left_ms FROM refs.agent_task_attempts WHERE attempt_id = $1 AND state = 'live'`,
    [attemptId],
  );
  const left = live.rows[0]?.left_ms ?? -1;
  assert.ok(left > 0 && left <= leaseMs, `the lease is live and at most ${leaseMs} ms long (${left} ms left)`);
  await db.query(`UPDATE refs.agent_task_attempts SET lease_expires_at = now() - interval '1 millisecond' WHERE attempt_id = $1`, [attemptId]);
}
