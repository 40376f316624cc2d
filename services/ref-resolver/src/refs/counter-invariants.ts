/**
 * A start-up check of the ref stores' one invariant that a write can break from outside this
 * service (two processes on one embedded data dir, a restored backup, a hand edit): each
 * (principal, kind) counter is at least the highest code it has issued. A counter behind its
 * refs would hand out a code that is already taken, and every issue of that kind would then
 * fail. Advancing the counter to the highest issued code is always safe (codes are never
 * reused, counters only advance), so the check repairs it and reports what it did.
 */
import type { Queryable } from "@webcodex/platform";
import { RefKind } from "./ref-codes.js";

/** Where each kind's issued codes live. */
const REF_TABLES: ReadonlyArray<{ kind: RefKind; table: string }> = [
  { kind: RefKind.project, table: "project_refs" },
  { kind: RefKind.session, table: "session_refs" },
  { kind: RefKind.agentContinuation, table: "agent_continuation_refs" },
  { kind: RefKind.attempt, table: "attempt_refs" },
];

/** One counter found behind its refs and advanced. */
export interface CounterRepair {
  clientId: string;
  subject: string;
  kind: RefKind;
  /** The counter before the repair (0 when the row was missing). */
  was: number;
  /** The highest code issued, where the counter now stands. */
  now: number;
}

/**
 * Advances every ref counter that is below the highest code issued for its principal and kind
 * (creating a missing counter row) and returns what it changed; an empty list means the stores
 * were consistent. Runs in one transaction per kind, taking each counter row's lock.
 */
export async function repairRefCounters(db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> }, schema: string): Promise<CounterRepair[]> {
  const repairs: CounterRepair[] = [];
  for (const { kind, table } of REF_TABLES) {
    const behind = await db.transaction(async (tx) => {
      const found = await tx.query<{ client_id: string; subject: string; highest: string; last_code: string | null }>(
        `SELECT r.client_id, r.subject, max(r.code)::text AS highest, c.last_code::text AS last_code
           FROM ${schema}.${table} r
           LEFT JOIN ${schema}.ref_counters c ON c.client_id = r.client_id AND c.subject = r.subject AND c.kind = $1
          GROUP BY r.client_id, r.subject, c.last_code
         HAVING c.last_code IS NULL OR max(r.code) > c.last_code`,
        [kind],
      );
      for (const row of found.rows) {
        // Takes the row lock (creating it at 0 when missing), then only ever advances it.
        await tx.query(`SELECT ${schema}.lock_ref_counter($1, $2, $3)`, [row.client_id, row.subject, kind]);
        await tx.query(`UPDATE ${schema}.ref_counters SET last_code = $4 WHERE client_id = $1 AND subject = $2 AND kind = $3 AND last_code < $4`, [
          row.client_id,
          row.subject,
          kind,
          row.highest,
        ]);
      }
      return found.rows;
    });
    for (const row of behind) {
      repairs.push({ clientId: row.client_id, subject: row.subject, kind, was: Number(row.last_code ?? 0), now: Number(row.highest) });
    }
  }
  return repairs;
}
