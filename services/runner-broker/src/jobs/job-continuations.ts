/**
 * Job continuation records: what happened after a Job continuation card was presented, as
 * separate observations (Postgres table `broker.job_continuations`):
 * - dispatch: the card claims the one continuation message before it sends it (none →
 *   claimed, once), then records the Host's answer (accepted, rejected, or uncertain). A
 *   claim without an answer is itself uncertain delivery, and nothing ever moves the record
 *   back to none: an uncertain dispatch is never re-sent;
 * - fresh turn: the first model call on the Project after an accepted dispatch;
 * - consume: wait_for_job_terminal called for the Job after its dispatch.
 * Accepted dispatch alone proves neither of the others.
 */
import type { Queryable } from "@webcodex/platform";
import type { JobKey } from "./job-store.js";

export const DISPATCH_STATES = ["none", "claimed", "accepted", "rejected", "uncertain"] as const;
export type DispatchState = (typeof DISPATCH_STATES)[number];

export interface JobContinuationRecord extends JobKey {
  clientId: string;
  dispatch: DispatchState;
  presentedAtMs: number;
  dispatchAtMs?: number;
  freshTurnAtMs?: number;
  consumedAtMs?: number;
}

export type ContinuationAction = "present" | "claim" | "accepted" | "rejected" | "uncertain";

export interface JobContinuationStore {
  /** Applies an action; `applied` is false when the record's state refuses it (a second claim, a receipt without a claim). */
  apply(key: JobKey, clientId: string, action: ContinuationAction): Promise<{ applied: boolean; record: JobContinuationRecord | undefined }>;
  get(key: JobKey): Promise<JobContinuationRecord | undefined>;
  /** A model call reached the Project: marks the fresh turn of accepted dispatches that lack one, and returns their Job ids. Cheap when none is waiting. */
  observeModelCall(projectCanonicalId: string): Promise<string[]>;
  /** Whether the Project has an accepted dispatch awaiting its fresh turn (its next model call must reach observeModelCall). */
  awaitsModelCall(projectCanonicalId: string): Promise<boolean>;
  /** wait_for_job_terminal ran for the Job: marks the consume of a dispatched continuation once; true when this call marked it. */
  observeConsume(key: JobKey): Promise<boolean>;
}

interface Row {
  project_canonical_id: string;
  job_id: string;
  client_id: string;
  dispatch: DispatchState;
  presented_at: Date | string;
  dispatch_at: Date | string | null;
  fresh_turn_at: Date | string | null;
  consumed_at: Date | string | null;
}

const ms = (d: Date | string) => (d instanceof Date ? d.getTime() : new Date(d).getTime());

function fromRow(r: Row): JobContinuationRecord {
  return {
    projectCanonicalId: r.project_canonical_id,
    jobId: r.job_id,
    clientId: r.client_id,
    dispatch: r.dispatch,
    presentedAtMs: ms(r.presented_at),
    ...(r.dispatch_at !== null ? { dispatchAtMs: ms(r.dispatch_at) } : {}),
    ...(r.fresh_turn_at !== null ? { freshTurnAtMs: ms(r.fresh_turn_at) } : {}),
    ...(r.consumed_at !== null ? { consumedAtMs: ms(r.consumed_at) } : {}),
  };
}

/**
 * `awaitingFreshTurn` keeps, per broker process, the Projects with an accepted dispatch and
 * no fresh turn yet, so an ordinary call costs no query. It is seeded from the table on the
 * first observation, so a restarted broker still sees dispatches accepted before.
 */
export function createJobContinuationStore(o: { db: Queryable; schema?: string }): JobContinuationStore {
  const s = o.schema ?? "broker";
  const awaiting = new Set<string>();
  let seeded: Promise<void> | undefined;
  const seed = () =>
    (seeded ??= o.db
      .query<{ project_canonical_id: string }>(
        `SELECT DISTINCT project_canonical_id FROM ${s}.job_continuations WHERE dispatch = 'accepted' AND fresh_turn_at IS NULL`,
      )
      .then((r) => r.rows.forEach((x) => awaiting.add(x.project_canonical_id)))
      .catch(() => {
        seeded = undefined;
      }));
  const get = async (k: JobKey) => {
    const r = (await o.db.query<Row>(`SELECT * FROM ${s}.job_continuations WHERE project_canonical_id = $1 AND job_id = $2`, [k.projectCanonicalId, k.jobId]))
      .rows[0];
    return r ? fromRow(r) : undefined;
  };
  return {
    get,
    async apply(key, clientId, action) {
      let sql: string;
      switch (action) {
        case "present":
          sql = `INSERT INTO ${s}.job_continuations (project_canonical_id, job_id, client_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`;
          break;
        case "claim":
          sql = `UPDATE ${s}.job_continuations SET dispatch = 'claimed', dispatch_at = now() WHERE project_canonical_id = $1 AND job_id = $2 AND client_id = $3 AND dispatch = 'none'`;
          break;
        default:
          sql = `UPDATE ${s}.job_continuations SET dispatch = '${action}', dispatch_at = now() WHERE project_canonical_id = $1 AND job_id = $2 AND client_id = $3 AND dispatch = 'claimed'`;
      }
      const res = await o.db.query(sql, [key.projectCanonicalId, key.jobId, clientId]);
      if (action === "accepted" && (res.rowCount ?? 0) > 0) awaiting.add(key.projectCanonicalId);
      const record = await get(key);
      return { applied: (res.rowCount ?? 0) > 0, record: record && record.clientId === clientId ? record : undefined };
    },
    async awaitsModelCall(projectCanonicalId) {
      await seed();
      return awaiting.has(projectCanonicalId);
    },
    async observeModelCall(projectCanonicalId) {
      await seed();
      if (!awaiting.has(projectCanonicalId)) return [];
      awaiting.delete(projectCanonicalId);
      const marked = await o.db.query<{ job_id: string }>(
        `UPDATE ${s}.job_continuations SET fresh_turn_at = now() WHERE project_canonical_id = $1 AND dispatch = 'accepted' AND fresh_turn_at IS NULL RETURNING job_id`,
        [projectCanonicalId],
      );
      return marked.rows.map((r) => r.job_id);
    },
    async observeConsume(key) {
      const marked = await o.db.query(
        `UPDATE ${s}.job_continuations SET consumed_at = now() WHERE project_canonical_id = $1 AND job_id = $2 AND dispatch <> 'none' AND consumed_at IS NULL`,
        [key.projectCanonicalId, key.jobId],
      );
      return (marked.rowCount ?? 0) > 0;
    },
  };
}
