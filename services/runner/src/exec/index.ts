/**
 * The Runner's execution engine: run_process, run_shell, run_script, detached jobs and their
 * observation. Pure domain code (no RPC, no MCP); the Runner service adapts it to the wire.
 */
export { createExecutor, commandSummary } from "./executor.js";
export { DEFAULT_EXEC_LIMITS } from "./limits.js";
export { DEFAULT_CONTAINMENT, detectContainment, processTreeContainment } from "./containment.js";
export type { Containment, ContainmentConfig, ContainmentMode, LimitExceeded } from "./containment.js";
export type {
  CompletedResult,
  DetachedResult,
  DetachedStartedResult,
  EffectiveLimits,
  ExecLimits,
  Executor,
  ExecutorOptions,
  FailedToStartResult,
  JobEvent,
  JobEventListener,
  JobKind,
  JobObservation,
  JobSnapshot,
  JobState,
  ObserveJobsRequest,
  ObserveJobsResult,
  OmittedBytes,
  PendingResult,
  RunDetachedProcessRequest,
  RunProcessRequest,
  RunResult,
  RunScriptRequest,
  RunShellRequest,
  ShellFacts,
  ShellName,
  StartErrorCode,
  TerminalJobState,
  TerminalResult,
  UnknownJobObservation,
  UnknownJobWaitResult,
  WaitForJobTerminalRequest,
  WaitPendingResult,
  WaitResult,
} from "./types.js";
