/**
 * Workflow Sessions in Postgres: creation (pinned to one Project incarnation, with its
 * session_ref), resolution, lifecycle, the append-only call record and the handoff recap.
 *
 * Authority: a Session belongs to the principal that created it. Every use re-runs, in
 * order: Session authority (a foreign Session fails exactly like an unknown one), Project
 * visibility of the pinned incarnation, and, for business targeting, the Project match and
 * lifecycle. No MCP session, connection or recent activity selects a Session.
 *
 * One concept over 400 lines: the Workflow Session store (its records change in shared
 * transactions).
 */
import type { Database, Principal, Queryable } from "@webcodex/platform";
import { CallOutcome, callOutcomeOrUnknown } from "@webcodex/contracts";
import type { ToolFailure, Result } from "@webcodex/contracts";
import type { ProjectStore } from "../projects/project-store.js";
import { issuePinnedRef, sessionRefTable } from "../refs/issue-ref.js";
import { formatRef, RefKind } from "../refs/ref-codes.js";
import {
  buildHandoffRecap,
  HANDOFF_BOUNDS,
  invalidSessionSelector,
  invalidTitle,
  newSessionId,
  parseSessionSelector,
  sessionClosed,
  recoveredWriteProblem,
  sessionCallProblem,
  sessionNotFound,
  sessionProjectMismatch,
  sessionProjectUnavailable,
  titleProblem,
} from "./session-model.js";
import type { HandoffLists, HandoffRecap, RecoveredWriteInput, SessionCallInput, ValidationRecapRow } from "./session-model.js";

export interface SessionRecord {
  sessionId: string;
  clientId: string;
  subject: string;
  projectCanonicalId: string;
  projectIncarnation: number;
  title: string;
  state: "open" | "closed";
  createdMs: number;
  lastActivityMs: number;
  /** 0 while open. */
  closedMs: number;
  callsRecorded: number;
  callsDropped: number;
}

interface SessionRow {
  session_id: string;
  client_id: string;
  subject: string;
  project_canonical_id: string;
  project_incarnation: string | number;
  title: string;
  state: "open" | "closed";
  created_at: Date | string;
  last_activity_at: Date | string;
  closed_at: Date | string | null;
  calls_recorded: string | number;
  calls_dropped: string | number;
  ref_code: string | null;
}

const ms = (t: Date | string | null): number => (t === null ? 0 : new Date(t).getTime());
const toRecord = (r: SessionRow): SessionRecord => ({
  sessionId: r.session_id,
  clientId: r.client_id,
  subject: r.subject,
  projectCanonicalId: r.project_canonical_id,
  projectIncarnation: Number(r.project_incarnation),
  title: r.title,
  state: r.state,
  createdMs: ms(r.created_at),
  lastActivityMs: ms(r.last_activity_at),
  closedMs: ms(r.closed_at),
  callsRecorded: Number(r.calls_recorded),
  callsDropped: Number(r.calls_dropped),
});

export interface ResolvedSession {
  session: SessionRecord;
  /** The owner's session_ref (every Session gets one at creation). */
  sessionRef: string;
}

export interface SessionStoreOptions {
  /** Calls recorded per Session before further calls are only counted as dropped. */
  maxCallsPerSession?: number;
}

/** Thrown for a malformed call record: a caller (gateway) bug, not a model-facing failure. */
export class SessionCallRecordError extends Error {
  constructor(problem: string) {
    super(problem);
    this.name = "SessionCallRecordError";
  }
}

export function createSessionStore(db: Database, projects: ProjectStore, options: SessionStoreOptions = {}) {
  const schema = "refs";
  const maxCalls = options.maxCallsPerSession ?? 100_000;

  const ownedSelect = `SELECT s.*, r.code AS ref_code FROM ${schema}.sessions s
    LEFT JOIN ${schema}.session_refs r ON r.session_id = s.session_id AND r.client_id = s.client_id AND r.subject = s.subject`;

  /** Session authority: the caller's own Session by ref or id, or nothing (foreign = unknown). */
  async function lookup(q: Queryable, principal: Principal, selector: string): Promise<Result<ResolvedSession>> {
    const parsed = parseSessionSelector(selector);
    if (!parsed) return { ok: false, failure: invalidSessionSelector() };
    const r =
      parsed.kind === "ref"
        ? await q.query<SessionRow>(
            `SELECT s.*, r.code AS ref_code FROM ${schema}.session_refs r JOIN ${schema}.sessions s ON s.session_id = r.session_id
           WHERE r.client_id = $1 AND r.subject = $2 AND r.code = $3`,
            [principal.clientId, principal.subject, parsed.code],
          )
        : await q.query<SessionRow>(`${ownedSelect} WHERE s.session_id = $3 AND s.client_id = $1 AND s.subject = $2`, [
            principal.clientId,
            principal.subject,
            parsed.sessionId,
          ]);
    const row = r.rows[0];
    if (!row || row.client_id !== principal.clientId || row.subject !== principal.subject || row.ref_code === null)
      return { ok: false, failure: sessionNotFound() };
    return { ok: true, session: toRecord(row), sessionRef: formatRef(RefKind.session, String(row.ref_code)) };
  }

  /** Authority, then visibility of the pinned Project incarnation. */
  async function authorized(principal: Principal, selector: string): Promise<Result<ResolvedSession>> {
    const found = await lookup(db, principal, selector);
    if (!found.ok) return found;
    const project = await projects.pinnedVisible(principal, found.session.projectCanonicalId, found.session.projectIncarnation);
    if (!project) return { ok: false, failure: sessionProjectUnavailable() };
    return found;
  }

  async function resolve(
    principal: Principal,
    input: { selector: string; projectCanonicalId?: string; requireOpen?: boolean },
  ): Promise<Result<ResolvedSession>> {
    const found = await authorized(principal, input.selector);
    if (!found.ok) return found;
    if (input.projectCanonicalId && input.projectCanonicalId !== found.session.projectCanonicalId) return { ok: false, failure: sessionProjectMismatch() };
    if (input.requireOpen && found.session.state !== "open") return { ok: false, failure: sessionClosed() };
    return found;
  }

  return {
    /** Opens a Session on the Project `projectSelector` resolves to for the caller, with its session_ref. */
    async create(principal: Principal, input: { projectSelector: string; title: string }): Promise<Result<ResolvedSession>> {
      const problem = titleProblem(input.title);
      if (problem) return { ok: false, failure: invalidTitle(problem) };
      const project = await projects.resolve(principal, input.projectSelector);
      if (!project.ok) return project;
      const sessionId = newSessionId();
      return db.transaction(async (tx) => {
        const r = await tx.query<SessionRow>(
          `INSERT INTO ${schema}.sessions (session_id, client_id, subject, project_canonical_id, project_incarnation, title)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING *, NULL::bigint AS ref_code`,
          [sessionId, principal.clientId, principal.subject, project.project.canonicalId, project.project.incarnation, input.title],
        );
        const code = await issuePinnedRef(tx, schema, sessionRefTable, principal, [sessionId]);
        const row = r.rows[0];
        if (!row) throw new Error("session insert returned no row");
        return { ok: true as const, session: toRecord(row), sessionRef: formatRef(RefKind.session, code) };
      });
    },

    /**
     * Canonicalizes a selector for the caller. With `projectCanonicalId`, the Session must
     * belong to that Project; with `requireOpen`, it must be open (business targeting).
     */
    resolve,

    /** Ends the lifecycle. Needs Session authority only: closing never widens access. */
    async close(principal: Principal, selector: string): Promise<Result<ResolvedSession & { closedNow: boolean }>> {
      const found = await lookup(db, principal, selector);
      if (!found.ok) return found;
      const r = await db.query<SessionRow>(
        `UPDATE ${schema}.sessions SET state = 'closed', closed_at = now() WHERE session_id = $1 AND state = 'open' RETURNING *, NULL::bigint AS ref_code`,
        [found.session.sessionId],
      );
      const row = r.rows[0];
      if (!row) {
        const again = await lookup(db, principal, selector);
        return again.ok ? { ...again, closedNow: false } : again;
      }
      return { ok: true, session: toRecord(row), sessionRef: found.sessionRef, closedNow: true };
    },

    /**
     * Records how a Runner's start-up recovery finished interrupted write transactions of a
     * Project (reported at each registration; the first report of a call id is kept). Entries
     * without a call id or with a malformed field are skipped.
     */
    async recordRecoveredWrites(projectCanonicalId: string, writes: readonly RecoveredWriteInput[]): Promise<number> {
      let recorded = 0;
      for (const w of writes.filter((x) => recoveredWriteProblem(x) === undefined)) {
        const r = await db.query(
          `INSERT INTO ${schema}.recovered_writes (project_canonical_id, call_id, tool, outcome) VALUES ($1, $2, $3, $4)
           ON CONFLICT (project_canonical_id, call_id) DO NOTHING`,
          [projectCanonicalId, w.callId, w.tool, w.outcome],
        );
        recorded += r.rowCount;
      }
      return recorded;
    },

    /**
     * Appends one bounded call record. Re-runs authority, Project visibility, the Project
     * match and lifecycle (also under the Session row lock, so a concurrent close wins).
     */
    async record(
      principal: Principal,
      input: { selector: string; projectCanonicalId: string; call: SessionCallInput },
    ): Promise<Result<{ sessionId: string; recorded: boolean; seq: number; duplicate: boolean; dropped: boolean }>> {
      const problem = sessionCallProblem(input.call);
      if (problem) throw new SessionCallRecordError(problem);
      const found = await resolve(principal, { selector: input.selector, projectCanonicalId: input.projectCanonicalId, requireOpen: true });
      if (!found.ok) return found;
      const { call } = input;
      const sessionId = found.session.sessionId;
      return db.transaction(async (tx) => {
        const locked = await tx.query<{ state: string; calls_recorded: string }>(
          `SELECT state, calls_recorded FROM ${schema}.sessions WHERE session_id = $1 FOR UPDATE`,
          [sessionId],
        );
        const row = locked.rows[0];
        if (!row || row.state !== "open") return { ok: false as const, failure: sessionClosed() };
        const seen = await tx.query<{ seq: string }>(`SELECT seq FROM ${schema}.session_calls WHERE session_id = $1 AND call_id = $2`, [
          sessionId,
          call.callId,
        ]);
        if (seen.rows[0]) return { ok: true as const, sessionId, recorded: false, seq: Number(seen.rows[0].seq), duplicate: true, dropped: false };
        if (Number(row.calls_recorded) >= maxCalls) {
          await tx.query(`UPDATE ${schema}.sessions SET calls_dropped = calls_dropped + 1, last_activity_at = now() WHERE session_id = $1`, [sessionId]);
          return { ok: true as const, sessionId, recorded: false, seq: 0, duplicate: false, dropped: true };
        }
        const seq = Number(row.calls_recorded) + 1;
        await tx.query(`UPDATE ${schema}.sessions SET calls_recorded = $2, last_activity_at = now() WHERE session_id = $1`, [sessionId, seq]);
        await tx.query(
          `INSERT INTO ${schema}.session_calls
             (session_id, seq, call_id, tool, effect, outcome, reason_code, detail_code, paths_count, changed_paths_count, job_id, job_state, duration_ms,
              validation_status, validation_tests_passed, validation_tests_failed, validation_tests_skipped, validation_errors, validation_warnings,
              paths, command_summary, exit_code, parent_call_id)
           VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''), $9, $10, NULLIF($11, ''), NULLIF($12, ''), $13, $14, $15, $16, $17, $18, $19, $20::jsonb, NULLIF($21, ''), $22,
                   NULLIF($23, ''))`,
          [
            sessionId,
            seq,
            call.callId,
            call.tool,
            call.effect,
            call.outcome,
            call.reasonCode,
            call.detailCode,
            call.pathsCount,
            call.changedPathsCount,
            call.jobId,
            call.jobState,
            call.durationMs,
            call.validation?.status ?? null,
            call.validation?.testsPassed ?? null,
            call.validation?.testsFailed ?? null,
            call.validation?.testsSkipped ?? null,
            call.validation?.errors ?? null,
            call.validation?.warnings ?? null,
            call.paths && call.paths.length > 0
              ? JSON.stringify(call.paths.map((p) => ({ path: p.path, read_revision: p.readRevision, changed: p.changed })))
              : null,
            call.commandSummary ?? "",
            call.exitCode ?? null,
            call.parentCallId ?? "",
          ],
        );
        return { ok: true as const, sessionId, recorded: true, seq, duplicate: false, dropped: false };
      });
    },

    /** The bounded recap of what the Session did. Needs authority and Project visibility, not an open Session. */
    /**
     * The latest validation result recorded for the caller on a Project: in one Session (the
     * selector, which must be on that Project), or else in any of the caller's Sessions on it.
     */
    async latestValidation(
      principal: Principal,
      input: { projectCanonicalId: string; selector: string },
    ): Promise<Result<{ latest?: ValidationRecapRow & { sessionId: string } }>> {
      let sessionId: string | undefined;
      if (input.selector !== "") {
        const found = await resolve(principal, { selector: input.selector, projectCanonicalId: input.projectCanonicalId });
        if (!found.ok) return found;
        sessionId = found.session.sessionId;
      }
      const r = await db.query<{
        session_id: string;
        seq: string;
        tool: string;
        status: string;
        passed: number;
        failed: number;
        skipped: number;
        errors: number;
        warnings: number;
        recorded_at: Date | string;
      }>(
        `SELECT c.session_id, c.seq, c.tool, c.validation_status AS status, c.validation_tests_passed AS passed, c.validation_tests_failed AS failed,
                c.validation_tests_skipped AS skipped, c.validation_errors AS errors, c.validation_warnings AS warnings, c.recorded_at
         FROM ${schema}.session_calls c JOIN ${schema}.sessions s ON s.session_id = c.session_id
         WHERE s.client_id = $1 AND s.subject = $2 AND s.project_canonical_id = $3 AND ($4::text IS NULL OR c.session_id = $4) AND c.validation_status IS NOT NULL
         ORDER BY c.recorded_at DESC, c.seq DESC LIMIT 1`,
        [principal.clientId, principal.subject, input.projectCanonicalId, sessionId ?? null],
      );
      const v = r.rows[0];
      if (!v) return { ok: true };
      return {
        ok: true,
        latest: {
          sessionId: v.session_id,
          seq: Number(v.seq),
          tool: v.tool,
          atMs: new Date(v.recorded_at).getTime(),
          validation: { status: v.status, testsPassed: v.passed, testsFailed: v.failed, testsSkipped: v.skipped, errors: v.errors, warnings: v.warnings },
        },
      };
    },

    async handoff(
      principal: Principal,
      input: { selector: string; maxRecentCalls?: number },
    ): Promise<Result<ResolvedSession & { recap: HandoffRecap; lists: HandoffLists }>> {
      const found = await authorized(principal, input.selector);
      if (!found.ok) return found;
      const sessionId = found.session.sessionId;
      const recentLimit = Math.min(input.maxRecentCalls || HANDOFF_BOUNDS.recentDefault, HANDOFF_BOUNDS.recentMax);
      const [aggregates, pending, recent, validations, paths, commands] = await Promise.all([
        db.query<{
          tool: string;
          effect: string;
          calls: string;
          failed: string;
          unknown: string;
          paths: string;
          changed_paths: string;
          last_at: Date | string;
        }>(
          `SELECT tool, effect, count(*) AS calls,
                  count(*) FILTER (WHERE outcome = $2) AS failed,
                  count(*) FILTER (WHERE outcome = $3) AS unknown,
                  coalesce(sum(paths_count), 0) AS paths, coalesce(sum(changed_paths_count), 0) AS changed_paths,
                  max(recorded_at) AS last_at
           FROM ${schema}.session_calls WHERE session_id = $1 GROUP BY tool, effect`,
          [sessionId, CallOutcome.failure, CallOutcome.unknown],
        ),
        db.query<{ job_id: string; tool: string; since: Date | string; total: string }>(
          `SELECT job_id, tool, since, count(*) OVER () AS total FROM (
             SELECT DISTINCT ON (job_id) job_id, job_state, seq,
                    first_value(tool) OVER (PARTITION BY job_id ORDER BY seq) AS tool,
                    min(recorded_at) OVER (PARTITION BY job_id) AS since
             FROM ${schema}.session_calls WHERE session_id = $1 AND job_id IS NOT NULL
             ORDER BY job_id, seq DESC
           ) AS latest
           WHERE job_state = 'pending' ORDER BY seq DESC LIMIT $2`,
          [sessionId, HANDOFF_BOUNDS.pendingJobs],
        ),
        // A call cut off inside a write transaction shows how the Runner's recovery finished it.
        db.query<{
          seq: string;
          tool: string;
          outcome: string;
          reason_code: string | null;
          recorded_at: Date | string;
          recovered: string | null;
          parent_call_id: string | null;
        }>(
          `SELECT c.seq, c.tool, c.outcome, c.reason_code, c.recorded_at, w.outcome AS recovered, c.parent_call_id
           FROM ${schema}.session_calls c
           LEFT JOIN ${schema}.recovered_writes w ON w.project_canonical_id = $3 AND w.call_id = c.call_id
           WHERE c.session_id = $1 ORDER BY c.seq DESC LIMIT $2`,
          [sessionId, recentLimit, found.session.projectCanonicalId],
        ),
        db.query<{
          seq: string;
          tool: string;
          status: string;
          passed: number;
          failed: number;
          skipped: number;
          errors: number;
          warnings: number;
          recorded_at: Date | string;
        }>(
          `SELECT seq, tool, validation_status AS status, validation_tests_passed AS passed, validation_tests_failed AS failed, validation_tests_skipped AS skipped,
                  validation_errors AS errors, validation_warnings AS warnings, recorded_at
           FROM ${schema}.session_calls WHERE session_id = $1 AND validation_status IS NOT NULL ORDER BY seq DESC LIMIT $2`,
          [sessionId, HANDOFF_BOUNDS.validations],
        ),
        // Each path once, with its latest revision and whether any call changed it; most recent first.
        db.query<{ path: string; read_revision: string | null; changed: boolean }>(
          `SELECT path, read_revision, changed FROM (
             SELECT DISTINCT ON (p.elem->>'path') p.elem->>'path' AS path, p.elem->>'read_revision' AS read_revision,
                    bool_or((p.elem->>'changed')::boolean) OVER (PARTITION BY p.elem->>'path') AS changed, c.seq, p.ordinality
             FROM ${schema}.session_calls c CROSS JOIN LATERAL jsonb_array_elements(c.paths) WITH ORDINALITY AS p(elem, ordinality)
             WHERE c.session_id = $1 AND c.paths IS NOT NULL
             ORDER BY p.elem->>'path', c.seq DESC
           ) AS latest ORDER BY seq DESC, ordinality LIMIT $2`,
          [sessionId, HANDOFF_BOUNDS.paths + 1],
        ),
        // Each command once, in its latest state (a pending run and the wait that ended it are one Job).
        db.query<{ tool: string; command_summary: string; outcome: string; exit_code: number | null }>(
          `SELECT tool, command_summary, outcome, exit_code FROM (
             SELECT DISTINCT ON (coalesce(job_id, call_id))
                    first_value(tool) OVER w AS tool, first_value(command_summary) OVER w AS command_summary, outcome, exit_code, seq
             FROM ${schema}.session_calls
             WHERE session_id = $1 AND (command_summary IS NOT NULL OR job_id IS NOT NULL)
             WINDOW w AS (PARTITION BY coalesce(job_id, call_id) ORDER BY seq)
             ORDER BY coalesce(job_id, call_id), seq DESC
           ) AS latest WHERE command_summary IS NOT NULL ORDER BY seq DESC LIMIT $2`,
          [sessionId, HANDOFF_BOUNDS.commands + 1],
        ),
      ]);
      const lists: HandoffLists = {
        paths: paths.rows.slice(0, HANDOFF_BOUNDS.paths).map((r) => ({ path: r.path, readRevision: r.read_revision ?? "", changed: r.changed === true })),
        pathsTruncated: paths.rows.length > HANDOFF_BOUNDS.paths,
        commands: commands.rows.slice(0, HANDOFF_BOUNDS.commands).map((r) => ({
          tool: r.tool,
          commandSummary: r.command_summary,
          outcome: callOutcomeOrUnknown(r.outcome),
          ...(r.exit_code !== null ? { exitCode: r.exit_code } : {}),
        })),
        commandsTruncated: commands.rows.length > HANDOFF_BOUNDS.commands,
      };
      const recap = buildHandoffRecap(
        aggregates.rows.map((r) => ({
          tool: r.tool,
          effect: r.effect,
          calls: Number(r.calls),
          failed: Number(r.failed),
          unknown: Number(r.unknown),
          paths: Number(r.paths),
          changedPaths: Number(r.changed_paths),
          lastMs: ms(r.last_at),
        })),
        { rows: pending.rows.map((r) => ({ jobId: r.job_id, tool: r.tool, sinceMs: ms(r.since) })), total: Number(pending.rows[0]?.total ?? 0) },
        recent.rows.map((r) => ({
          seq: Number(r.seq),
          tool: r.tool,
          outcome: callOutcomeOrUnknown(r.outcome),
          reasonCode: r.reason_code ?? "",
          atMs: ms(r.recorded_at),
          recovered: r.recovered ?? "",
          parentCallId: r.parent_call_id ?? "",
        })),
        recentLimit,
        validations.rows.map((r) => ({
          seq: Number(r.seq),
          tool: r.tool,
          atMs: ms(r.recorded_at),
          validation: { status: r.status, testsPassed: r.passed, testsFailed: r.failed, testsSkipped: r.skipped, errors: r.errors, warnings: r.warnings },
        })),
      );
      return { ...found, recap, lists };
    },
  };
}

export type SessionStore = ReturnType<typeof createSessionStore>;
