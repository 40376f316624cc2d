/**
 * The broker's side of Jobs, so any gateway replica can answer for a Job whatever happened to
 * the Runner that runs it:
 * - a run_* call that returns pending (or a detached start) opens a Job record owned by the
 *   Runner that ran it, under the Project fence it ran with;
 * - while the owner heartbeats, the broker asks it about its open Jobs and renews their live
 *   lease only for Jobs it still runs; terminal ones are closed with a bounded summary, and a
 *   Job the owner does not know (it restarted) is closed as lost_after_reconcile;
 * - observe_jobs / wait_for_job_terminal go to the owner while it is alive, and are answered
 *   from the records when it is gone: once the live lease lapses the Job is reconciled as
 *   lost_after_reconcile with outcome_unknown (never re-run, never reported as failed).
 * Ids without a record (or of another tenant) take the ordinary path to the lease holder, so
 * another tenant's Job id fails exactly like a nonexistent one.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { JOB_STATE, clampRule, inspectWorkspaceFollowUp, jobRecordTerminal, parseCanonicalProjectId, toolDefinitions } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import type { RunnerRegistry, RunnerState } from "../runner-registry.js";
import type { JobKey, JobRecord, JobStore, JobTerminal } from "./job-store.js";

/** Tools whose answer can start a Job (the catalog's `jobs: "start"`). */
export const JOB_START_TOOLS: ReadonlySet<string> = new Set(
  toolDefinitions()
    .filter((d) => d.jobs === "start")
    .map((d) => d.name),
);
/** Tools answered through the Job records (the catalog's `jobs: "observe"`). */
export const JOB_OBSERVE_TOOLS: ReadonlySet<string> = new Set(
  toolDefinitions()
    .filter((d) => d.jobs === "observe")
    .map((d) => d.name),
);

/** wait_for_job_terminal's wait: its ToolDefinition owns the default and ceiling. */
const { default: DEFAULT_WAIT_MS, ceiling: MAX_WAIT_MS } = clampRule("wait_for_job_terminal", "wait_ms");
const RECORD_POLL_MS = 250;
const OBSERVE_BATCH = 256;
/** Exit facts kept in the terminal summary: bounded, no command text, args, paths or output. */
const SUMMARY_FACTS = ["kind", "exit_code", "signal", "timed_out", "stdout_bytes", "stderr_bytes", "duration_ms", "error_code"] as const;

export interface RunnerAnswer<F> {
  resultJson: string;
  failure?: F;
}

export interface JobDeskDeps<F> {
  jobs: JobStore;
  registry: RunnerRegistry;
  /** How long a live Job stays live without its owner confirming it (longer than a heartbeat). */
  jobLeaseTtlMs: number;
  logger: Logger;
  /**
   * One call on one Runner; `reached` is false when the Runner could not be reached.
   * `bookkeeping` calls (the broker's own Job sync) bypass per-Project concurrency admission:
   * a busy Project must not starve the sync and so lose Jobs that are still running.
   */
  call(
    runner: RunnerState,
    tool: string,
    args: Record<string, unknown>,
    fence: number,
    signal?: AbortSignal,
    bookkeeping?: boolean,
  ): Promise<{ answer: RunnerAnswer<F>; reached: boolean }>;
}

type Json = Record<string, unknown>;

function parse(json: string): Json | undefined {
  try {
    const v = JSON.parse(json) as unknown;
    return typeof v === "object" && v !== null ? (v as Json) : undefined;
  } catch {
    return undefined;
  }
}

/** The Runner's state word for one answer: running, unknown, or a terminal state. */
function stateOf(result: Json): string | undefined {
  if (result["execution_state"] === "pending") return "running";
  if (result["execution_state"] === "unknown" || result["state"] === "unknown") return "unknown";
  return typeof result["state"] === "string" ? result["state"] : undefined;
}

function terminalOf(state: string, facts: Json): JobTerminal | undefined {
  const summary: Json = { runner_state: state };
  for (const k of SUMMARY_FACTS) if (facts[k] !== undefined) summary[k] = facts[k];
  const exit = typeof facts["exit_code"] === "number" ? { exitCode: facts["exit_code"] } : {};
  const terminal = jobRecordTerminal(state, facts["exit_code"]);
  if (terminal === undefined) return undefined;
  // A process that never started has no exit code to report.
  return state === "failed_to_start" ? { state: terminal, summary } : { state: terminal, ...exit, summary };
}

const lostFacts = {
  state: JOB_STATE.lost_after_reconcile,
  outcome_unknown: true,
  detail_code: "owner_runner_gone",
  message:
    "The Runner that ran this Job stopped or restarted before it finished; whether the command completed and what it changed is unknown. Inspect the workspace before running it again.",
} as const;

/** What an observation says about a Job known only from its record. */
function observationFromRecord(rec: JobRecord): Json {
  if (rec.state === JOB_STATE.lost_after_reconcile) return { job_id: rec.jobId, ...lostFacts };
  if (rec.terminal) {
    const { runner_state: runnerState, ...facts } = rec.terminal.summary ?? {};
    return { job_id: rec.jobId, state: runnerState ?? rec.state, ...facts, output_retained: false };
  }
  // Live state still held, owner unreachable: neither finished nor lost yet.
  return { job_id: rec.jobId, state: JOB_STATE.recovering, outcome_unknown: true };
}

/**
 * What wait_for_job_terminal says about a terminal Job known only from its record. A lost
 * Job's effect is uncertain: the one follow-up inspects the workspace (never a re-run).
 */
function waitResultFromRecord(rec: JobRecord): Json {
  const o = observationFromRecord(rec);
  if (rec.state === JOB_STATE.lost_after_reconcile) {
    return { execution_state: JOB_STATE.lost_after_reconcile, ...o, follow_up: inspectWorkspaceFollowUp(rec.projectCanonicalId) };
  }
  return { execution_state: o["state"] === "failed_to_start" ? "failed_to_start" : "completed", ...o };
}

export type JobDesk<F> = ReturnType<typeof createJobDesk<F>>;

export function createJobDesk<F>(d: JobDeskDeps<F>) {
  const syncing = new Set<string>();
  const answer = (result: Json): RunnerAnswer<F> => ({ resultJson: JSON.stringify(result) });

  /** The Job's owner if it is connected and still serves the Job's Project. */
  const liveOwner = async (rec: JobRecord) => {
    const r = await d.registry.get(rec.runnerId);
    return r && r.connectionState === "connected" && r.canonicalId === rec.projectCanonicalId ? r : undefined;
  };

  /** Applies what the owner said about an open Job: renew, close, or lose it. */
  const apply = async (rec: JobRecord, state: string | undefined, facts: Json) => {
    if (rec.terminal || state === undefined) return;
    const key: JobKey = { projectCanonicalId: rec.projectCanonicalId, jobId: rec.jobId };
    if (state === "running") {
      const w = await d.jobs.update(key, rec.fence, {}, d.jobLeaseTtlMs);
      // Live state gone (Redis lost it) while the owner still runs the Job: restore it, unless
      // reconciliation already closed the record.
      if (!w.ok && w.reason === "not_found") {
        await d.jobs.start(
          {
            ...key,
            clientId: rec.clientId,
            runnerId: rec.runnerId,
            tool: rec.tool,
            fence: rec.fence,
            state: "running",
            ...(rec.callId ? { callId: rec.callId } : {}),
          },
          d.jobLeaseTtlMs,
        );
      }
    } else if (state === "unknown") {
      const w = await d.jobs.lose(key, rec.fence);
      if (w.ok) d.logger.warn("job lost: its Runner no longer has it", { job_id: rec.jobId, runner_id: rec.runnerId, project: rec.projectCanonicalId });
    } else {
      const terminal = terminalOf(state, facts);
      if (terminal) await d.jobs.finish(key, rec.fence, terminal);
    }
  };

  const lookup = async (projectCanonicalId: string, jobId: string) => {
    const rec = await d.jobs.get({ projectCanonicalId, jobId });
    return rec && rec.clientId === parseCanonicalProjectId(projectCanonicalId)?.clientId ? rec : undefined;
  };

  /** Reconciles a Job whose owner is gone; its record after that. */
  const fromRecords = (rec: JobRecord) => d.jobs.reconcileJob({ projectCanonicalId: rec.projectCanonicalId, jobId: rec.jobId }, { graceMs: 0 });

  return {
    /** Opens the Job record when a run_* answer says the Job outlived its wait. Never fails the call. */
    async recordStarted(o: { projectCanonicalId: string; runner: RunnerState; callId: string; tool: string; fence: number; resultJson: string }) {
      const r = parse(o.resultJson);
      const started = r?.["execution_state"] === "pending" || (o.tool === "run_detached_process" && r?.["execution_state"] === "running");
      if (!r || !started || typeof r["job_id"] !== "string") return;
      try {
        const w = await d.jobs.start(
          {
            projectCanonicalId: o.projectCanonicalId,
            jobId: r["job_id"],
            clientId: o.runner.clientId,
            runnerId: o.runner.runnerId,
            tool: o.tool,
            callId: o.callId,
            fence: o.fence,
            state: "running",
          },
          d.jobLeaseTtlMs,
        );
        if (!w.ok) d.logger.warn("job record not opened", { job_id: r["job_id"], reason: w.reason });
      } catch (error) {
        d.logger.warn("job record not opened", { job_id: r["job_id"], error });
      }
    },

    /**
     * Asks a Runner about the open Jobs it owns (after each heartbeat and registration): only
     * Jobs it still runs keep their live lease. One sync per Runner at a time.
     */
    async sync(runner: RunnerState) {
      if (syncing.has(runner.runnerId)) return;
      syncing.add(runner.runnerId);
      try {
        const open = await d.jobs.openJobs({ clientId: runner.clientId, runnerId: runner.runnerId });
        for (let i = 0; i < open.length; i += OBSERVE_BATCH) {
          const batch = open.slice(i, i + OBSERVE_BATCH);
          const { answer: a, reached } = await d.call(
            runner,
            "observe_jobs",
            { job_ids: batch.map((j) => j.jobId) },
            0,
            AbortSignal.timeout(d.jobLeaseTtlMs),
            true,
          );
          if (!reached || a.failure) return;
          const seen = new Map(((parse(a.resultJson)?.["jobs"] ?? []) as Json[]).map((j) => [j["job_id"], j]));
          for (const rec of batch) {
            const obs = seen.get(rec.jobId);
            if (obs) await apply(rec, stateOf(obs), obs);
          }
        }
      } catch (error) {
        d.logger.warn("job sync failed", { runner_id: runner.runnerId, error });
      } finally {
        syncing.delete(runner.runnerId);
      }
    },

    /** wait_for_job_terminal: the owner while it lives, else the records (a real wait until the deadline). */
    async wait(projectCanonicalId: string, args: Json, signal: AbortSignal, viaHolder: () => Promise<RunnerAnswer<F>>): Promise<RunnerAnswer<F>> {
      const jobId = args["job_id"];
      const rec = typeof jobId === "string" ? await lookup(projectCanonicalId, jobId) : undefined;
      if (!rec) return viaHolder();
      const requested = typeof args["wait_ms"] === "number" && Number.isFinite(args["wait_ms"]) ? args["wait_ms"] : DEFAULT_WAIT_MS;
      const waitMs = Math.max(0, Math.min(MAX_WAIT_MS, requested));
      const deadline = Date.now() + waitMs;
      const owner = await liveOwner(rec);
      if (owner) {
        const { answer: a, reached } = await d.call(owner, "wait_for_job_terminal", args, rec.fence, signal);
        if (reached && a.failure) return a;
        const result = reached ? parse(a.resultJson) : undefined;
        if (result) {
          const state = stateOf(result);
          await apply(rec, state, result);
          if (state !== "unknown") return a;
          const after = await d.jobs.get(rec);
          if (after?.terminal) return answer(waitResultFromRecord(after));
        }
      }
      for (;;) {
        const now = await fromRecords(rec);
        if (!now) return viaHolder();
        if (now.terminal) return answer(waitResultFromRecord(now));
        const remaining = deadline - Date.now();
        if (remaining <= 0 || signal.aborted)
          return answer({ execution_state: "pending", job_id: rec.jobId, state: JOB_STATE.recovering, effective: { wait_ms: waitMs } });
        // An abort ends the sleep early; the loop then answers pending.
        await sleep(Math.min(RECORD_POLL_MS, remaining), undefined, { signal }).catch(() => undefined);
      }
    },

    /** observe_jobs: per id the owner, the records, or (no record) the lease holder; request order kept. */
    async observe(
      projectCanonicalId: string,
      args: Json,
      signal: AbortSignal,
      viaHolder: (jobIds: string[]) => Promise<RunnerAnswer<F>>,
    ): Promise<RunnerAnswer<F>> {
      const ids = Array.isArray(args["job_ids"]) && args["job_ids"].every((x) => typeof x === "string") ? (args["job_ids"] as string[]) : undefined;
      if (!ids) return viaHolder([]);
      const recs = await Promise.all(ids.map((id) => lookup(projectCanonicalId, id)));
      if (recs.every((r) => r === undefined)) return viaHolder(ids);
      const out = new Map<string, Json>();
      const byOwner = new Map<string, { owner: RunnerState; recs: JobRecord[] }>();
      const orphaned: JobRecord[] = [];
      const unrecorded: string[] = [];
      for (const [i, rec] of recs.entries()) {
        if (!rec) {
          unrecorded.push(ids[i]!);
          continue;
        }
        // Even for a closed record the live owner still has the full snapshot (output tails).
        const owner = await liveOwner(rec);
        if (!owner) {
          orphaned.push(rec);
          continue;
        }
        const group = byOwner.get(owner.runnerId) ?? { owner, recs: [] };
        group.recs.push(rec);
        byOwner.set(owner.runnerId, group);
      }
      for (const { owner, recs: owned } of byOwner.values()) {
        const { answer: a, reached } = await d.call(owner, "observe_jobs", { job_ids: owned.map((r) => r.jobId) }, 0, signal);
        // A refusal by a live owner (admission, validation) is the answer; only silence means gone.
        if (reached && a.failure) return a;
        const seen = reached ? new Map(((parse(a.resultJson)?.["jobs"] ?? []) as Json[]).map((j) => [j["job_id"], j])) : undefined;
        for (const rec of owned) {
          const obs = seen?.get(rec.jobId);
          const state = obs ? stateOf(obs) : undefined;
          if (!obs || state === undefined) {
            orphaned.push(rec);
            continue;
          }
          await apply(rec, state, obs);
          if (state === "unknown") orphaned.push(rec);
          else out.set(rec.jobId, obs);
        }
      }
      for (const rec of orphaned) {
        const now = await fromRecords(rec);
        out.set(rec.jobId, now ? observationFromRecord(now) : { job_id: rec.jobId, state: "unknown", reason_code: "job_not_found" });
      }
      if (unrecorded.length > 0) {
        const a = await viaHolder(unrecorded);
        const seen = a.failure ? undefined : ((parse(a.resultJson)?.["jobs"] ?? []) as Json[]);
        for (const id of unrecorded) {
          // An unreachable holder proves nothing about these Jobs: unknown, not job_not_found.
          out.set(id, seen?.find((j) => j["job_id"] === id) ?? { job_id: id, state: "unknown", reason_code: "runner_unavailable" });
        }
      }
      return answer({ jobs: ids.map((id) => out.get(id) ?? { job_id: id, state: "unknown", reason_code: "job_not_found" }) });
    },
  };
}
