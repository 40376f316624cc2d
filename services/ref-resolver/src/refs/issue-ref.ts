/**
 * Issuing one ref of a kind whose target is created rarely (Session, Endpoint generation,
 * Attempt generation), inside the caller's transaction. The (principal, kind) counter row is
 * locked before the "already issued?" check that decides, so two issuers can neither give
 * one target two codes nor one code two targets, and codes stay consecutive. Project refs
 * use the batched SQL function `issue_project_refs` instead (list_projects issues many).
 */
import type { Principal, Queryable } from "@webcodex/platform";
import { RefKind } from "./ref-codes.js";

export interface PinnedRefTable {
  kind: Exclude<RefKind, "project">;
  /** Table in the service schema. */
  table: string;
  /** The pin columns (the exact target identity), in the order values are passed. */
  pin: readonly string[];
}

export const sessionRefTable: PinnedRefTable = { kind: RefKind.session, table: "session_refs", pin: ["session_id"] };
export const agentContinuationRefTable: PinnedRefTable = {
  kind: RefKind.agentContinuation,
  table: "agent_continuation_refs",
  pin: ["agent_id", "endpoint_id", "controller_generation"],
};
export const attemptRefTable: PinnedRefTable = {
  kind: RefKind.attempt,
  table: "attempt_refs",
  pin: ["task_id", "attempt_id", "assignee_agent_id", "attempt_fence", "controller_generation"],
};

/** Returns the decimal code of the ref pinned to `pin` for `principal`, issuing it if needed. */
export async function issuePinnedRef(tx: Queryable, schema: string, spec: PinnedRefTable, principal: Principal, pin: readonly unknown[]): Promise<string> {
  const where = spec.pin.map((c, i) => `${c} = $${i + 3}`).join(" AND ");
  const find = `SELECT code FROM ${schema}.${spec.table} WHERE client_id = $1 AND subject = $2 AND ${where}`;
  const params = [principal.clientId, principal.subject, ...pin];
  const before = await tx.query<{ code: string }>(find, params);
  if (before.rows[0]) return String(before.rows[0].code);
  const locked = await tx.query<{ last: string }>(`SELECT ${schema}.lock_ref_counter($1, $2, $3) AS last`, [principal.clientId, principal.subject, spec.kind]);
  const after = await tx.query<{ code: string }>(find, params);
  if (after.rows[0]) return String(after.rows[0].code);
  const code = (BigInt(locked.rows[0]?.last ?? "0") + 1n).toString();
  const columns = ["client_id", "subject", "code", ...spec.pin];
  await tx.query(`INSERT INTO ${schema}.${spec.table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`, [
    principal.clientId,
    principal.subject,
    code,
    ...pin,
  ]);
  await tx.query(`UPDATE ${schema}.ref_counters SET last_code = $4 WHERE client_id = $1 AND subject = $2 AND kind = $3`, [
    principal.clientId,
    principal.subject,
    spec.kind,
    code,
  ]);
  return code;
}
