/**
 * Public types of the Runner's execution engine. Field spellings of results are the wire
 * spellings of TOOL-CONTRACT.md ("Processes and jobs"), so the RPC layer can serialize them
 * without renaming; the Gateway projects (and compacts) them later.
 */
import type { RunnerArguments } from "@webcodex/contracts";
import type { Containment, LimitExceeded } from "./containment.js";
import type { Spawner } from "./spawner.js";

/** Bounds of the engine. Every request value is clamped to these ceilings defensively. */
export interface ExecLimits {
  /** timeout_ms when the request gives none. */
  timeoutMsDefault: number;
  /** Largest timeout_ms honoured; larger requests are clamped. */
  timeoutMsCeiling: number;
  /** wait_ms when the request gives none: how long a call waits for a synchronous result. */
  waitMsDefault: number;
  /** Largest wait_ms honoured; larger requests are clamped. */
  waitMsCeiling: number;
  /** Bytes kept from the start of each captured stream. */
  outputHeadBytes: number;
  /** Bytes kept from the end of each captured stream. */
  outputTailBytes: number;
  /** Bytes of each stream's tail shown by observeJobs while (or after) a job runs. */
  observeTailBytes: number;
  /** Most jobs running at once; further starts fail closed instead of queueing silently. */
  maxJobs: number;
  /** Grace between SIGTERM and SIGKILL to a job's process group. */
  killGraceMs: number;
  /** How long a terminal job stays observable (keyed replay window). */
  jobRetentionMs: number;
  /** Hard bound on remembered terminal jobs; the oldest are forgotten first when exceeded. */
  maxRetainedJobs: number;
  /** Largest stdin accepted by runProcess, in UTF-8 bytes. */
  maxStdinBytes: number;
}

/** Options of {@link createExecutor}. */
export interface ExecutorOptions {
  /** Workspace root; every cwd must resolve (through symlinks) inside it. */
  root: string;
  limits?: Partial<ExecLimits>;
  /**
   * Source of the few variables children inherit (PATH, HOME, LANG, TMPDIR). Any other key is
   * ignored: the Runner's own environment never reaches a child.
   */
  baseEnv?: Record<string, string>;
  /** How programs are started; default: directly from this process. */
  spawner?: Spawner;
  /** A cgroup per Job (detectContainment); default: process-tree tracking only. */
  containment?: Containment;
}

export type ShellName = NonNullable<RunShellRequest["shell"]>;

/** Which tool created a job; decides the extra fields of its results. */
export type JobKind = "process" | "shell" | "script" | "detached" | "validation";

export type JobState = "running" | "completed" | "timed_out" | "cancelled" | "failed_to_start";
export type TerminalJobState = Exclude<JobState, "running">;

/** Why a spawn failed; a proven fact (the program never ran), not an unknown outcome. */
export type StartErrorCode = "command_not_found" | "permission_denied" | "spawn_failed";

// Requests are the catalog's input schemas as the gateway dispatches them (RunnerArguments).
export type RunProcessRequest = RunnerArguments<"run_process">;
/** login is bash -lc, only valid with bash (the gateway refuses it otherwise). */
export type RunShellRequest = RunnerArguments<"run_shell">;
export type RunScriptRequest = RunnerArguments<"run_script">;
export type RunDetachedProcessRequest = RunnerArguments<"run_detached_process">;
export type ObserveJobsRequest = RunnerArguments<"observe_jobs">;
export type WaitForJobTerminalRequest = RunnerArguments<"wait_for_job_terminal">;

/** The values actually used after defaults and clamping. */
export interface EffectiveLimits {
  timeout_ms: number;
  wait_ms: number;
}

/** Facts run_shell results always carry (the parts kept by success compaction). */
export interface ShellFacts {
  /** The command, cut to 200 characters. */
  command_summary?: string;
  /** Project-relative working directory, "." for the root. */
  cwd?: string;
  shell?: ShellName;
}

/** Bytes dropped from the middle of each stream; present only when `truncated`. */
export interface OmittedBytes {
  stdout: number;
  stderr: number;
  output?: number;
}

/** A process that ran and ended (by itself, by timeout or by cancellation). */
export interface CompletedResult extends ShellFacts {
  execution_state: "completed";
  job_id: string;
  state: "completed" | "timed_out" | "cancelled";
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  stdout: string;
  stderr: string;
  /** stdout and stderr in order of arrival; run_shell only. */
  output?: string;
  stdout_bytes: number;
  stderr_bytes: number;
  truncated: boolean;
  omitted_bytes?: OmittedBytes;
  duration_ms: number;
  started_at: string;
  /** Absent for detached jobs, which have no timeout. */
  effective?: EffectiveLimits;
  /**
   * Present (true) when the program's end was not observed: the Runner's spawn host died and
   * the program's process group was killed. It may have done part or all of its work.
   */
  outcome_unknown?: true;
  /**
   * Present when the Job ran into a limit of its cgroup: `pids_max` (a fork failed) or
   * `memory_max_bytes` (a process was killed for memory), with the limit's value.
   */
  limit_exceeded?: LimitExceeded;
}

/** The program never started: nothing ran, so retrying with a fixed program is safe. */
export interface FailedToStartResult extends ShellFacts {
  execution_state: "failed_to_start";
  job_id: string;
  state: "failed_to_start";
  error_code: StartErrorCode;
  /** The program that could not be started (args[0], the shell or the interpreter). */
  program: string;
  duration_ms: number;
  started_at: string;
  effective?: EffectiveLimits;
  /**
   * Present (true) when the start was not proven to have failed: the spawn host died before
   * confirming it, so the program may have started.
   */
  outcome_unknown?: true;
}

export type TerminalResult = CompletedResult | FailedToStartResult;

/** Still running at wait_ms; continue with waitForJobTerminal(job_id). */
export interface PendingResult {
  execution_state: "pending";
  job_id: string;
  effective: EffectiveLimits;
}

export type RunResult = TerminalResult | PendingResult;

/** runDetachedProcess started the program and returned at once. */
export interface DetachedStartedResult {
  execution_state: "running";
  job_id: string;
  started_at: string;
}

export type DetachedResult = DetachedStartedResult | FailedToStartResult;

/** The job id is not (or no longer) known here; says nothing about the job's outcome. */
export interface UnknownJobObservation {
  job_id: string;
  state: "unknown";
  reason_code: "job_not_found";
}

/** What observeJobs reports for a known job, running or terminal. */
export interface JobSnapshot {
  job_id: string;
  kind: JobKind;
  state: JobState;
  started_at: string;
  /** So far while running; final once terminal. */
  duration_ms: number;
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  /** Last bytes of each stream (see ExecLimits.observeTailBytes). */
  stdout_tail: string;
  stderr_tail: string;
  stdout_bytes: number;
  stderr_bytes: number;
  error_code?: StartErrorCode;
}

export type JobObservation = JobSnapshot | UnknownJobObservation;

export interface ObserveJobsResult {
  jobs: JobObservation[];
}

/** waitForJobTerminal on an unknown id: a re-observation fact, not a job failure. */
export interface UnknownJobWaitResult {
  execution_state: "unknown";
  job_id: string;
  reason_code: "job_not_found";
}

/** Pending again: the job is still running after this wait. */
export interface WaitPendingResult {
  execution_state: "pending";
  job_id: string;
  effective: { wait_ms: number };
}

export type WaitResult = TerminalResult | WaitPendingResult | UnknownJobWaitResult;

/** Progress signal for MCP progress notifications. */
export interface JobEvent {
  job_id: string;
  kind: "output" | "terminal";
  /** stdout + stderr bytes produced so far. */
  bytes_so_far: number;
  /** Set on "terminal" events. */
  state?: TerminalJobState;
}

export type JobEventListener = (event: JobEvent) => void;

/**
 * A Job whose terminal result is derived from its process's result by `finish` (computed once,
 * stored and replayed like any terminal result). Same wait_ms/timeout_ms rules as run_process.
 */
export interface RunDerivedRequest {
  kind: "validation";
  /** Literal argv. */
  args: string[];
  stdin?: string;
  env?: Record<string, string>;
  timeout_ms?: number;
  wait_ms?: number;
  finish: (result: TerminalResult) => TerminalResult;
}

/** The execution engine of one workspace. Create with {@link createExecutor}. */
export interface Executor {
  /** Literal argv, no shell. Terminal result within wait_ms, else pending. */
  runProcess(request: RunProcessRequest, signal?: AbortSignal): Promise<RunResult>;
  /** `bash -c` (default), `sh -c` or `bash -lc`; results carry command_summary, cwd, shell, output. */
  runShell(request: RunShellRequest, signal?: AbortSignal): Promise<RunResult>;
  /** `python3 -` with the code on stdin: data, never shell text. */
  runScript(request: RunScriptRequest, signal?: AbortSignal): Promise<RunResult>;
  /** A Job run like run_process whose terminal result is `finish` of the process's result. */
  runDerived(request: RunDerivedRequest, signal?: AbortSignal): Promise<RunResult>;
  /** Starts a job without timeout and returns once the spawn succeeded or failed. */
  runDetachedProcess(request: RunDetachedProcessRequest): Promise<DetachedResult>;
  /** Snapshot per id, in request order; unknown ids are job_not_found observations. */
  observeJobs(request: ObserveJobsRequest): ObserveJobsResult;
  /**
   * Waits up to wait_ms for the terminal result, which is replayed identically on every later
   * call. The signal aborts only this wait (resolving pending), never the job.
   */
  waitForJobTerminal(request: WaitForJobTerminalRequest, signal?: AbortSignal): Promise<WaitResult>;
  /** Terminates the job's process group and resolves with its terminal snapshot. */
  cancelJob(jobId: string): Promise<JobObservation>;
  /** Subscribes to progress events; returns the unsubscribe function. */
  onJobEvent(listener: JobEventListener): () => void;
  /** Cancels every running job, waits for them to end and refuses further runs. */
  shutdown(): Promise<void>;
}
