/**
 * Job records. A Job's live state (queued/running/recovering, its owner and fence) lives in
 * the fast backend under a lease that its Runner renews; its durable record lives in
 * Postgres table `broker.jobs`: opened when the Job starts, closed exactly once with the
 * terminal summary. Every write is fenced: a write carrying a fence lower than the Job's
 * current fence is refused (a stale owner), a higher fence adopts the Job (a new owner).
 *
 * Reconciliation closes open records whose live state is gone (Runner lost and lease
 * expired, or Redis lost its data) as `lost_after_reconcile` with outcome unknown: never
 * reported as success. `counts` is the one canonical Job counting path for fleet status.
 */
import type { Logger, Queryable } from "@webcodex/platform";
import type { JobCounts as ProtoJobCounts } from "@webcodex/proto";

import type { JobState, LiveJobState, TerminalJobState } from "@webcodex/contracts";
// The words are owned by @webcodex/contracts (job-states.ts); re-exported for the broker's modules.
export { LIVE_JOB_STATES, TERMINAL_JOB_STATES } from "@webcodex/contracts";
import { JOB_STATE } from "@webcodex/contracts";
export type { JobState, LiveJobState, TerminalJobState };

export interface JobKey {
  projectCanonicalId: string;
  jobId: string;
}

export interface JobStart extends JobKey {
  clientId: string;
  runnerId: string;
  tool: string;
  callId?: string;
  /** Fence of the Project lease the Job was started under. */
  fence: number;
  state?: "queued" | "running";
}

export interface LiveJob extends JobKey {
  clientId: string;
  runnerId: string;
  tool: string;
  callId?: string;
  fence: number;
  state: LiveJobState;
  createdAtMs: number;
  updatedAtMs: number;
}

export interface JobTerminal {
  state: Exclude<TerminalJobState, "lost_after_reconcile">;
  exitCode?: number;
  outcomeUnknown?: boolean;
  /** Bounded, caller-safe summary (no raw command, args or paths). */
  summary?: Record<string, unknown>;
}

export interface JobRecord extends JobKey {
  clientId: string;
  runnerId: string;
  tool: string;
  callId?: string;
  fence: number;
  state: JobState;
  createdAtMs: number;
  /** Present once terminal. */
  terminal?: { atMs: number; exitCode?: number; outcomeUnknown: boolean; summary?: Record<string, unknown> };
}

export type FencedWrite =
  | { ok: true; /** True when the write's higher fence took the Job over. */ adopted: boolean }
  | { ok: false; reason: "stale_fence"; fence: number }
  | { ok: false; reason: "not_found" }
  | { ok: false; reason: "already_terminal"; state: JobState };

/** Job counts by state: the JobCounts message's fields (derived from the generated type). */
export type JobCounts = Omit<ProtoJobCounts, "$typeName" | "$unknown">;

export interface JobStore {
  /** Opens the durable record and the live state. Idempotent for the same Job and fence. */
  start(job: JobStart, leaseTtlMs: number): Promise<FencedWrite>;
  /** Fenced live update; also renews the Job lease. An empty change is a renewal. */
  update(key: JobKey, fence: number, change: { state?: LiveJobState; runnerId?: string }, leaseTtlMs: number): Promise<FencedWrite>;
  /** Fenced terminal write: closes the durable record once and drops the live state. */
  finish(key: JobKey, fence: number, terminal: JobTerminal): Promise<FencedWrite>;
  /** Live state if any, else the durable record. */
  get(key: JobKey): Promise<JobRecord | undefined>;
  /** Open (not yet terminal) records of one tenant's Runner, oldest first (bounded). */
  openJobs(scope: { clientId: string; runnerId: string }): Promise<JobRecord[]>;
  /** Open (not yet terminal) records of one Project, oldest first, at most `limit`. */
  openProjectJobs(projectCanonicalId: string, limit: number): Promise<JobRecord[]>;
  /** Closes open records without live state as lost_after_reconcile; returns them. */
  reconcile(options?: { clientId?: string; graceMs?: number }): Promise<JobKey[]>;
  /**
   * Reconciles one Job now: an open record older than `graceMs` whose live state is gone is
   * closed as lost_after_reconcile. Returns the record as it stands afterwards.
   */
  reconcileJob(key: JobKey, options?: { graceMs?: number }): Promise<JobRecord | undefined>;
  /**
   * The owning Runner answered that it does not have this Job (it restarted): closes the open
   * record as lost_after_reconcile with outcome unknown and drops the live state. Fenced.
   */
  lose(key: JobKey, fence: number): Promise<FencedWrite>;
  /**
   * The one Job counting path (live states + recently reconciled lost Jobs). With
   * `ownerConnected`, a live Job whose owning Runner is not connected counts as recovering:
   * its live lease has not lapsed yet, but nobody is confirming it.
   */
  counts(scope?: { clientId?: string }, options?: { ownerConnected?: (runnerId: string) => boolean }): Promise<JobCounts>;
}

/** Atomic live-state primitives (Redis scripts or in-process maps). */
export interface LiveJobBackend {
  /** Creates or overwrites when the stored fence is not higher. */
  put(job: LiveJob, ttlMs: number): Promise<FencedWrite>;
  update(key: JobKey, fence: number, change: { state?: LiveJobState; runnerId?: string }, ttlMs: number, nowMs: number): Promise<FencedWrite>;
  /** The live fence, if live. */
  fence(key: JobKey): Promise<number | undefined>;
  /** Drops the live state unless a higher fence owns it. */
  remove(key: JobKey, fence: number): Promise<void>;
  get(key: JobKey): Promise<LiveJob | undefined>;
  exists(keys: readonly JobKey[]): Promise<boolean[]>;
  list(scope: { clientId?: string }): Promise<LiveJob[]>;
}

export interface JobStoreOptions {
  live: LiveJobBackend;
  db: Queryable;
  schema?: string;
  now?: () => number;
  /** lost_after_reconcile Jobs count in status for this long after reconciliation (default 24 h). */
  lostWindowMs?: number;
}

interface JobRow {
  project_canonical_id: string;
  job_id: string;
  client_id: string;
  runner_id: string;
  tool: string;
  call_id: string | null;
  fence: string | number;
  state: JobState;
  created_at: Date | string;
  terminal_at: Date | string | null;
  exit_code: number | null;
  outcome_unknown: boolean;
  summary: Record<string, unknown> | string | null;
}

const ms = (d: Date | string) => (d instanceof Date ? d.getTime() : new Date(d).getTime());

function fromRow(r: JobRow): JobRecord {
  const rec: JobRecord = {
    projectCanonicalId: r.project_canonical_id,
    jobId: r.job_id,
    clientId: r.client_id,
    runnerId: r.runner_id,
    tool: r.tool,
    fence: Number(r.fence),
    state: r.state,
    createdAtMs: ms(r.created_at),
  };
  if (r.call_id !== null) rec.callId = r.call_id;
  if (r.terminal_at !== null) {
    const summary = typeof r.summary === "string" ? (JSON.parse(r.summary) as Record<string, unknown>) : r.summary;
    rec.terminal = {
      atMs: ms(r.terminal_at),
      outcomeUnknown: r.outcome_unknown,
      ...(r.exit_code !== null ? { exitCode: r.exit_code } : {}),
      ...(summary ? { summary } : {}),
    };
  }
  return rec;
}

export function createJobStore(o: JobStoreOptions): JobStore {
  const s = o.schema ?? "broker";
  const now = o.now ?? Date.now;
  const lostWindowMs = o.lostWindowMs ?? 24 * 60 * 60 * 1000;
  const row = async (k: JobKey) =>
    (await o.db.query<JobRow>(`SELECT * FROM ${s}.jobs WHERE project_canonical_id = $1 AND job_id = $2`, [k.projectCanonicalId, k.jobId])).rows[0];

  /** Why a fenced close of an open record changed no row. */
  const whyNotClosed = async (key: JobKey): Promise<FencedWrite> => {
    const existing = await row(key);
    if (!existing) return { ok: false, reason: "not_found" };
    if (existing.terminal_at !== null) return { ok: false, reason: "already_terminal", state: existing.state };
    return { ok: false, reason: "stale_fence", fence: Number(existing.fence) };
  };

  const get = async (key: JobKey): Promise<JobRecord | undefined> => {
    const live = await o.live.get(key);
    if (live) {
      const { updatedAtMs: _u, ...rest } = live;
      return rest;
    }
    const r = await row(key);
    return r ? fromRow(r) : undefined;
  };

  return {
    async start(job, leaseTtlMs) {
      const state = job.state ?? JOB_STATE.queued;
      const t = now();
      await o.db.query(
        `INSERT INTO ${s}.jobs (project_canonical_id, job_id, client_id, runner_id, tool, call_id, fence, state)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
        [job.projectCanonicalId, job.jobId, job.clientId, job.runnerId, job.tool, job.callId ?? null, job.fence, state],
      );
      const existing = await row(job);
      if (!existing) return { ok: false, reason: "not_found" };
      if (existing.terminal_at !== null) return { ok: false, reason: "already_terminal", state: existing.state };
      if (Number(existing.fence) > job.fence) return { ok: false, reason: "stale_fence", fence: Number(existing.fence) };
      if (Number(existing.fence) < job.fence) {
        await o.db.query(
          `UPDATE ${s}.jobs SET fence = $3, runner_id = $4 WHERE project_canonical_id = $1 AND job_id = $2 AND fence < $3 AND terminal_at IS NULL`,
          [job.projectCanonicalId, job.jobId, job.fence, job.runnerId],
        );
      }
      const live: LiveJob = { ...job, state, createdAtMs: ms(existing.created_at), updatedAtMs: t };
      if (job.callId === undefined) delete live.callId;
      return o.live.put(live, leaseTtlMs);
    },

    async update(key, fence, change, leaseTtlMs) {
      const r = await o.live.update(key, fence, change, leaseTtlMs, now());
      if (r.ok && r.adopted) {
        await o.db.query(
          `UPDATE ${s}.jobs SET fence = $3, runner_id = COALESCE($4, runner_id) WHERE project_canonical_id = $1 AND job_id = $2 AND fence < $3 AND terminal_at IS NULL`,
          [key.projectCanonicalId, key.jobId, fence, change.runnerId ?? null],
        );
      }
      if (!r.ok && r.reason === "not_found") {
        const existing = await row(key);
        if (existing?.terminal_at != null) return { ok: false, reason: "already_terminal", state: existing.state };
      }
      return r;
    },

    async finish(key, fence, terminal) {
      const liveFence = await o.live.fence(key);
      if (liveFence !== undefined && liveFence > fence) return { ok: false, reason: "stale_fence", fence: liveFence };
      const closed = await o.db.query(
        `UPDATE ${s}.jobs SET state = $4, terminal_at = now(), exit_code = $5, outcome_unknown = $6, summary = $7, fence = $3
         WHERE project_canonical_id = $1 AND job_id = $2 AND terminal_at IS NULL AND fence <= $3 RETURNING 1`,
        [
          key.projectCanonicalId,
          key.jobId,
          fence,
          terminal.state,
          terminal.exitCode ?? null,
          terminal.outcomeUnknown ?? false,
          terminal.summary ? JSON.stringify(terminal.summary) : null,
        ],
      );
      if (closed.rowCount === 0) return whyNotClosed(key);
      await o.live.remove(key, fence);
      return { ok: true, adopted: liveFence !== undefined && fence > liveFence };
    },

    get,

    async openJobs(scope) {
      const rows = await o.db.query<JobRow>(
        `SELECT * FROM ${s}.jobs WHERE client_id = $1 AND runner_id = $2 AND terminal_at IS NULL ORDER BY created_at LIMIT 1024`,
        [scope.clientId, scope.runnerId],
      );
      return rows.rows.map(fromRow);
    },

    async openProjectJobs(projectCanonicalId, limit) {
      const rows = await o.db.query<JobRow>(`SELECT * FROM ${s}.jobs WHERE project_canonical_id = $1 AND terminal_at IS NULL ORDER BY created_at LIMIT $2`, [
        projectCanonicalId,
        limit,
      ]);
      return Promise.all(rows.rows.map(async (r) => (await get({ projectCanonicalId: r.project_canonical_id, jobId: r.job_id })) ?? fromRow(r)));
    },

    async reconcile(options = {}) {
      const graceMs = options.graceMs ?? 5_000;
      const params: unknown[] = [graceMs];
      let filter = "";
      if (options.clientId !== undefined) {
        params.push(options.clientId);
        filter = ` AND client_id = $${params.length}`;
      }
      const open = (
        await o.db.query<{ project_canonical_id: string; job_id: string }>(
          `SELECT project_canonical_id, job_id FROM ${s}.jobs
         WHERE terminal_at IS NULL AND created_at < now() - make_interval(secs => $1::double precision / 1000)${filter}
         ORDER BY created_at LIMIT 1000`,
          params,
        )
      ).rows.map((r) => ({ projectCanonicalId: r.project_canonical_id, jobId: r.job_id }));
      if (open.length === 0) return [];
      const alive = await o.live.exists(open);
      const lost: JobKey[] = [];
      for (const [i, k] of open.entries()) {
        if (alive[i]) continue;
        const r = await o.db.query(
          `UPDATE ${s}.jobs SET state = 'lost_after_reconcile', terminal_at = now(), outcome_unknown = true
           WHERE project_canonical_id = $1 AND job_id = $2 AND terminal_at IS NULL RETURNING 1`,
          [k.projectCanonicalId, k.jobId],
        );
        if (r.rowCount === 1) lost.push(k);
      }
      return lost;
    },

    async reconcileJob(key, options = {}) {
      const graceMs = options.graceMs ?? 1_000;
      if ((await o.live.fence(key)) === undefined) {
        await o.db.query(
          `UPDATE ${s}.jobs SET state = 'lost_after_reconcile', terminal_at = now(), outcome_unknown = true
           WHERE project_canonical_id = $1 AND job_id = $2 AND terminal_at IS NULL
             AND created_at < now() - make_interval(secs => $3::double precision / 1000)`,
          [key.projectCanonicalId, key.jobId, graceMs],
        );
      }
      return get(key);
    },

    async lose(key, fence) {
      const liveFence = await o.live.fence(key);
      if (liveFence !== undefined && liveFence > fence) return { ok: false, reason: "stale_fence", fence: liveFence };
      const closed = await o.db.query(
        `UPDATE ${s}.jobs SET state = 'lost_after_reconcile', terminal_at = now(), outcome_unknown = true
         WHERE project_canonical_id = $1 AND job_id = $2 AND terminal_at IS NULL AND fence <= $3 RETURNING 1`,
        [key.projectCanonicalId, key.jobId, fence],
      );
      if (closed.rowCount === 0) return whyNotClosed(key);
      await o.live.remove(key, fence);
      return { ok: true, adopted: false };
    },

    async counts(scope = {}, options = {}) {
      const live = await o.live.list(scope);
      const c: JobCounts = { active: 0, running: 0, queued: 0, recovering: 0, lostAfterReconcile: 0 };
      for (const j of live) {
        const orphaned = options.ownerConnected !== undefined && !options.ownerConnected(j.runnerId);
        c[orphaned ? JOB_STATE.recovering : j.state] += 1;
        c.active += 1;
      }
      const params: unknown[] = [lostWindowMs];
      let filter = "";
      if (scope.clientId !== undefined) {
        params.push(scope.clientId);
        filter = ` AND client_id = $${params.length}`;
      }
      const lost = await o.db.query<{ n: string | number }>(
        `SELECT count(*) AS n FROM ${s}.jobs
         WHERE state = 'lost_after_reconcile' AND terminal_at > now() - make_interval(secs => $1::double precision / 1000)${filter}`,
        params,
      );
      c.lostAfterReconcile = Number(lost.rows[0]?.n ?? 0);
      return c;
    },
  };
}

/**
 * Periodically closes Jobs whose live state vanished as lost_after_reconcile (both modes:
 * after a restart the embedded broker's in-process live state is gone too). 0 disables it.
 */
export function startJobReconciler(jobs: JobStore, intervalMs: number, logger: Logger): { stop(): void } {
  if (intervalMs <= 0) return { stop: () => undefined };
  const timer = setInterval(() => {
    jobs.reconcile().then(
      (lost) => {
        if (lost.length > 0) logger.warn("jobs lost after reconcile", { count: lost.length });
      },
      (error: unknown) => logger.warn("job reconciliation failed", { error }),
    );
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
