/**
 * Passive job attention: the Jobs a caller started in a project (pending runs, detached
 * processes) are watched until the caller has seen them end. When one has ended, the next
 * result of a Runner call for that project carries `job_attention: {items}` once, so the
 * model learns of it without a polling call. An item counts as seen only when a result that
 * carried it was delivered to the caller, or when the caller's own call showed the terminal
 * state (wait_for_job_terminal, observe_jobs).
 *
 * The watch list lives in this gateway process, bounded per caller and project and in the
 * number of callers; a caller served by another replica, or after a restart, is not told.
 */
import { isTerminalJobState } from "@webcodex/contracts";

/** One ended Job, as the model sees it. */
export interface JobAttentionItem {
  job_id: string;
  state: string;
  exit_code?: number | null;
  outcome_unknown?: true;
}

/** Most Jobs watched per caller and project (the oldest is dropped beyond it). */
export const MAX_WATCHED_JOBS = 32;
/** Most items one result carries. */
export const MAX_ATTENTION_ITEMS = 8;
/** Most caller×project watch lists kept (least recently used dropped). */
export const MAX_WATCH_LISTS = 10_000;

/** Whether a state read from an answer says the Job changes no more (owned by @webcodex/contracts). */
export { isTerminalJobState };

export function watchKey(clientId: string, subject: string, projectCanonicalId: string): string {
  return `${clientId}\u0000${subject}\u0000${projectCanonicalId}`;
}

export function createJobAttention(options: { maxWatchLists?: number; maxWatchedJobs?: number } = {}) {
  const maxLists = options.maxWatchLists ?? MAX_WATCH_LISTS;
  const maxJobs = options.maxWatchedJobs ?? MAX_WATCHED_JOBS;
  /** key → watched job ids, in start order (a Map keeps insertion order; re-set moves to the end for LRU). */
  const lists = new Map<string, Set<string>>();

  const touch = (key: string): Set<string> => {
    let list = lists.get(key);
    if (list) lists.delete(key);
    else list = new Set();
    lists.set(key, list);
    while (lists.size > maxLists) lists.delete(lists.keys().next().value as string);
    return list;
  };

  return {
    /** A Job this caller started and has not yet seen end. */
    watch(key: string, jobId: string): void {
      const list = touch(key);
      list.add(jobId);
      while (list.size > maxJobs) list.delete(list.values().next().value as string);
    },
    /** The caller saw these Jobs end (its own call showed it, or a delivered result carried it). */
    seen(key: string, jobIds: readonly string[]): void {
      const list = lists.get(key);
      if (!list) return;
      for (const id of jobIds) list.delete(id);
      if (list.size === 0) lists.delete(key);
    },
    /** Watched Jobs of this caller and project, except `exclude` (the ones the call itself is about). */
    watched(key: string, exclude: ReadonlySet<string>): string[] {
      const list = lists.get(key);
      return list ? [...list].filter((id) => !exclude.has(id)) : [];
    },
  };
}

export type JobAttention = ReturnType<typeof createJobAttention>;

/** The attention items in an observe_jobs answer: ended Jobs only, bounded. */
export function attentionItems(observed: unknown): JobAttentionItem[] {
  const jobs = (observed as { jobs?: unknown } | undefined)?.jobs;
  if (!Array.isArray(jobs)) return [];
  const items: JobAttentionItem[] = [];
  for (const job of jobs as Array<Record<string, unknown>>) {
    if (items.length >= MAX_ATTENTION_ITEMS) break;
    if (typeof job["job_id"] !== "string" || !isTerminalJobState(job["state"])) continue;
    items.push({
      job_id: job["job_id"],
      state: job["state"],
      ...(job["exit_code"] !== undefined ? { exit_code: job["exit_code"] as number | null } : {}),
      ...(job["outcome_unknown"] === true ? { outcome_unknown: true as const } : {}),
    });
  }
  return items;
}

/**
 * What a call's own result tells about Jobs: one it started and should be watched, and the
 * ones whose end it showed the caller.
 */
export function jobFactsOf(tool: string, args: Record<string, unknown>, result: Record<string, unknown>): { started?: string; ended: string[] } {
  const jobId = typeof result["job_id"] === "string" ? result["job_id"] : undefined;
  const state = result["execution_state"];
  if (tool === "observe_jobs") {
    const jobs = Array.isArray(result["jobs"]) ? (result["jobs"] as Array<Record<string, unknown>>) : [];
    return { ended: jobs.filter((j) => typeof j["job_id"] === "string" && isTerminalJobState(j["state"])).map((j) => j["job_id"] as string) };
  }
  if (tool === "wait_for_job_terminal") {
    const id = typeof args["job_id"] === "string" ? args["job_id"] : jobId;
    return { ended: id !== undefined && isTerminalJobState(state) ? [id] : [] };
  }
  if (jobId !== undefined && (state === "pending" || state === "running")) return { started: jobId, ended: [] };
  return { ended: [] };
}

/** Job ids a call is itself about: they are answered by the call, not by attention. */
export function jobsOfCall(tool: string, args: Record<string, unknown>): Set<string> {
  if (tool === "wait_for_job_terminal" && typeof args["job_id"] === "string") return new Set([args["job_id"]]);
  if (tool === "observe_jobs" && Array.isArray(args["job_ids"]))
    return new Set((args["job_ids"] as unknown[]).filter((x): x is string => typeof x === "string"));
  return new Set();
}
