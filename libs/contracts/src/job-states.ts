/**
 * Job states: the one owner of the words. A Job's record (the broker's) is live while queued,
 * running or recovering and ends in one terminal state. The Runner reports its own process
 * states (`completed`, `failed_to_start`, ...); `jobRecordTerminal` is the one mapping from those
 * to a record's terminal state. Gateways read states from answers as they come: there a Job is
 * still live while any source says it may run (`pending` from a Runner answer still running,
 * `unknown` when its fate is not known yet).
 */

/** A Job record's states while it may still change. */
export const LIVE_JOB_STATES = ["queued", "running", "recovering"] as const;
export type LiveJobState = (typeof LIVE_JOB_STATES)[number];
/** A Job record's terminal states; `lost_after_reconcile` is never a success. */
export const TERMINAL_JOB_STATES = ["succeeded", "failed", "cancelled", "timed_out", "lost_after_reconcile"] as const;
export type TerminalJobState = (typeof TERMINAL_JOB_STATES)[number];
export type JobState = LiveJobState | TerminalJobState;
/** Each record state by name, for code outside this file (lint forbids the bare words there). */
export const JOB_STATE = Object.fromEntries([...LIVE_JOB_STATES, ...TERMINAL_JOB_STATES].map((s) => [s, s])) as { readonly [S in JobState]: S };

/** The Runner's states of a Job process (its answers' `state`). */
export const RUNNER_JOB_STATES = ["running", "completed", "timed_out", "cancelled", "failed_to_start"] as const;
export type RunnerJobState = (typeof RUNNER_JOB_STATES)[number];

/** States a gateway may read that mean the Job may still change: the live record states, a Runner's `pending`, and `unknown`. */
export const OBSERVED_LIVE_JOB_STATES: ReadonlySet<string> = new Set<string>([...LIVE_JOB_STATES, "pending", "unknown"]);

/** Whether a state read from an answer says the Job changes no more. */
export const isTerminalJobState = (state: unknown): state is string => typeof state === "string" && !OBSERVED_LIVE_JOB_STATES.has(state);

/**
 * The record's terminal state for a Runner's terminal process state: `completed` succeeds only
 * with exit code 0; undefined for a Runner state that is not terminal (`running`) or unknown.
 */
export function jobRecordTerminal(runnerState: string, exitCode: unknown): Exclude<TerminalJobState, "lost_after_reconcile"> | undefined {
  switch (runnerState as RunnerJobState) {
    case "completed":
      return exitCode === 0 ? "succeeded" : "failed";
    case "failed_to_start":
      return "failed";
    case "cancelled":
      return "cancelled";
    case "timed_out":
      return "timed_out";
    default:
      return undefined;
  }
}
