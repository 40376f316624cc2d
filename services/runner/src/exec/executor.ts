import { randomBytes } from "node:crypto";
import { realpathSync } from "node:fs";
import { fail, PipelineStage, ReasonCode } from "@webcodex/contracts";
import { childEnv, scrubbedBaseEnv } from "./child-env.js";
import { Job, type JobSpec } from "./job.js";
import { effectiveLimits, effectiveWaitMs, resolveLimits } from "./limits.js";
import { resolveCwd } from "./resolve-cwd.js";
import { createDirectSpawner, type Spawner } from "./spawner.js";
import type { Containment } from "./containment.js";
import type {
  DetachedResult,
  EffectiveLimits,
  ExecLimits,
  Executor,
  ExecutorOptions,
  JobEvent,
  JobEventListener,
  JobObservation,
  ObserveJobsRequest,
  ObserveJobsResult,
  RunDetachedProcessRequest,
  RunDerivedRequest,
  RunProcessRequest,
  RunResult,
  RunScriptRequest,
  RunShellRequest,
  ShellName,
  TerminalResult,
  UnknownJobObservation,
  WaitForJobTerminalRequest,
  WaitResult,
} from "./types.js";

const COMMAND_SUMMARY_CHARS = 200;
const MAX_OBSERVED_IDS = 256;
const PYTHON = "python3";

function invalid(detail: string, evidence: Record<string, unknown>, message?: string): never {
  return fail(ReasonCode.invalidValue, PipelineStage.preflight, {
    detail_code: detail,
    evidence,
    ...(message === undefined ? {} : { message }),
  });
}

function checkArgs(field: string, args: unknown, requireProgram: boolean): string[] {
  if (!Array.isArray(args) || (requireProgram && args.length === 0)) {
    invalid(requireProgram ? "args_empty" : "args_not_an_array", { field }, `${field} must be a non-empty array of strings.`);
  }
  args.forEach((arg, index) => {
    if (typeof arg !== "string" || arg.includes("\0")) invalid("arg_invalid", { field, index }, "arguments must be strings without NUL.");
  });
  if (requireProgram && args[0] === "") invalid("program_empty", { field, index: 0 });
  return args as string[];
}

function checkText(field: string, value: unknown, maxBytes: number, allowNul: boolean): string {
  if (typeof value !== "string" || (!allowNul && value.includes("\0"))) invalid(`${field}_invalid`, { field });
  if (Buffer.byteLength(value) > maxBytes) invalid(`${field}_too_large`, { field, maximum_bytes: maxBytes });
  return value;
}

/** The command cut to 200 characters (never splitting a surrogate pair). */
export function commandSummary(command: string): string {
  if (command.length <= COMMAND_SUMMARY_CHARS) return command;
  let cut = command.slice(0, COMMAND_SUMMARY_CHARS - 1);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

function newJobId(): string {
  return `job_${randomBytes(10).toString("hex")}`;
}

function unknownJob(jobId: string): UnknownJobObservation {
  return { job_id: jobId, state: "unknown", reason_code: ReasonCode.jobNotFound };
}

/** Callers get copies, so the stored terminal result replays byte-identically. */
function copy(result: TerminalResult): TerminalResult {
  return structuredClone(result);
}

/** Resolves after `ms` or on abort; `cancel` clears the timer. */
function sleep(ms: number, signal?: AbortSignal): { done: Promise<void>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    if (signal) {
      onAbort = () => resolve();
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  return {
    done,
    cancel: () => {
      clearTimeout(timer);
      if (signal && onAbort) signal.removeEventListener("abort", onAbort);
    },
  };
}

/** A JobSpec minus what the executor fills in itself. */
type StartParts = Omit<JobSpec, "id" | "limits" | "emit" | "combineOutput" | "spawner" | "containment"> & { combineOutput?: boolean };

class JobExecutor implements Executor {
  readonly #limits: ExecLimits;
  readonly #realRoot: string;
  readonly #baseEnv: Record<string, string>;
  readonly #spawner: Spawner;
  readonly #containment: Containment | undefined;
  readonly #jobs = new Map<string, Job>();
  readonly #running = new Set<Job>();
  readonly #listeners = new Set<JobEventListener>();
  #closed = false;

  constructor(options: ExecutorOptions) {
    this.#limits = resolveLimits(options.limits);
    this.#realRoot = realpathSync(options.root);
    this.#baseEnv = scrubbedBaseEnv(options.baseEnv);
    this.#spawner = options.spawner ?? createDirectSpawner();
    this.#containment = options.containment;
  }

  async runProcess(request: RunProcessRequest, signal?: AbortSignal): Promise<RunResult> {
    this.#assertOpen();
    const args = checkArgs("args", request.args, true);
    const stdin = request.stdin === undefined ? undefined : checkText("stdin", request.stdin, this.#limits.maxStdinBytes, true);
    const effective = effectiveLimits(this.#limits, request);
    const cwd = await resolveCwd(this.#realRoot, request.cwd);
    const env = childEnv(this.#baseEnv, request.env);
    const [program, ...rest] = args as [string, ...string[]];
    const job = this.#start({
      kind: "process",
      program,
      args: rest,
      cwd: cwd.absolute,
      env,
      ...(stdin === undefined ? {} : { stdin }),
      timeoutMs: effective.timeout_ms,
      effective,
    });
    return this.#awaitWithin(job, effective, signal);
  }

  async runShell(request: RunShellRequest, signal?: AbortSignal): Promise<RunResult> {
    this.#assertOpen();
    const command = checkText("command", request.command, this.#limits.maxStdinBytes, false);
    if (command.trim() === "") invalid("command_empty", { field: "command" });
    const shell: ShellName = request.shell ?? "bash";
    if (shell !== "sh" && shell !== "bash") invalid("shell_unsupported", { field: "shell", allowed: ["sh", "bash"] });
    if (request.login !== undefined && typeof request.login !== "boolean") invalid("login_invalid", { field: "login" });
    const login = request.login === true;
    if (login && shell !== "bash") invalid("login_requires_bash", { field: "login" }, "login shells are bash only.");
    const effective = effectiveLimits(this.#limits, request);
    const cwd = await resolveCwd(this.#realRoot, request.cwd);
    const env = childEnv(this.#baseEnv, request.env);
    const job = this.#start({
      kind: "shell",
      program: shell,
      args: [login ? "-lc" : "-c", command],
      cwd: cwd.absolute,
      env,
      timeoutMs: effective.timeout_ms,
      effective,
      shellFacts: { command_summary: commandSummary(command), cwd: cwd.relative, shell },
      combineOutput: true,
    });
    return this.#awaitWithin(job, effective, signal);
  }

  async runScript(request: RunScriptRequest, signal?: AbortSignal): Promise<RunResult> {
    this.#assertOpen();
    if (request.language !== "python") {
      invalid("language_unsupported", { field: "language", allowed: ["python"] });
    }
    const code = checkText("code", request.code, this.#limits.maxStdinBytes, true);
    const args = request.args === undefined ? [] : checkArgs("args", request.args, false);
    const effective = effectiveLimits(this.#limits, request);
    const cwd = await resolveCwd(this.#realRoot, request.cwd);
    // The code travels as data on stdin (`python3 -`): no shell, no argv size limit, no temp
    // file, and sys.path[0] is the cwd, so project modules import as they would with -c.
    // The caller's env additions are laid over the base like every run_* tool's.
    const env = { ...childEnv(this.#baseEnv, request.env), PYTHONUNBUFFERED: "1" };
    const job = this.#start({
      kind: "script",
      program: PYTHON,
      args: ["-", ...args],
      cwd: cwd.absolute,
      env,
      stdin: code,
      timeoutMs: effective.timeout_ms,
      effective,
    });
    return this.#awaitWithin(job, effective, signal);
  }

  async runDerived(request: RunDerivedRequest, signal?: AbortSignal): Promise<RunResult> {
    this.#assertOpen();
    const args = checkArgs("args", request.args, true);
    const effective = effectiveLimits(this.#limits, request);
    const env = childEnv(this.#baseEnv, request.env);
    const [program, ...rest] = args as [string, ...string[]];
    const job = this.#start({
      kind: request.kind,
      program,
      args: rest,
      cwd: this.#realRoot,
      env,
      ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
      timeoutMs: effective.timeout_ms,
      effective,
      finish: request.finish,
    });
    return this.#awaitWithin(job, effective, signal);
  }

  async runDetachedProcess(request: RunDetachedProcessRequest): Promise<DetachedResult> {
    this.#assertOpen();
    const args = checkArgs("args", request.args, true);
    const cwd = await resolveCwd(this.#realRoot, request.cwd);
    const env = childEnv(this.#baseEnv, request.env);
    const [program, ...rest] = args as [string, ...string[]];
    // No timeout: a detached job runs until it exits, is cancelled or the Runner shuts down.
    const job = this.#start({ kind: "detached", program, args: rest, cwd: cwd.absolute, env, timeoutMs: null });
    await job.spawned;
    const result = job.result;
    if (result?.execution_state === "failed_to_start") return copy(result) as DetachedResult;
    return { execution_state: "running", job_id: job.id, started_at: job.startedAt };
  }

  observeJobs(request: ObserveJobsRequest): ObserveJobsResult {
    const ids: unknown = request.job_ids;
    if (!Array.isArray(ids) || ids.length > MAX_OBSERVED_IDS || ids.some((id) => typeof id !== "string")) {
      invalid("job_ids_invalid", { field: "job_ids", maximum: MAX_OBSERVED_IDS });
    }
    this.#prune();
    return { jobs: (ids as string[]).map((id): JobObservation => this.#jobs.get(id)?.snapshot() ?? unknownJob(id)) };
  }

  async waitForJobTerminal(request: WaitForJobTerminalRequest, signal?: AbortSignal): Promise<WaitResult> {
    if (typeof request.job_id !== "string") invalid("job_id_invalid", { field: "job_id" });
    const waitMs = effectiveWaitMs(this.#limits, request.wait_ms);
    const job = this.#jobs.get(request.job_id);
    if (job === undefined) {
      return { execution_state: "unknown", job_id: request.job_id, reason_code: ReasonCode.jobNotFound };
    }
    const result = await this.#settle(job, waitMs, signal);
    return result ?? { execution_state: "pending", job_id: job.id, effective: { wait_ms: waitMs } };
  }

  async cancelJob(jobId: string): Promise<JobObservation> {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return unknownJob(jobId);
    job.cancel();
    await job.terminal;
    return job.snapshot();
  }

  onJobEvent(listener: JobEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async shutdown(): Promise<void> {
    this.#closed = true;
    const running = [...this.#running];
    for (const job of running) job.cancel();
    await Promise.all(running.map((job) => job.terminal));
    // Nothing a Job started outlives the Runner's shutdown.
    await Promise.all(running.map((job) => job.contained));
  }

  #assertOpen(): void {
    if (this.#closed) {
      fail(ReasonCode.runnerUnavailable, PipelineStage.dispatch, { detail_code: "executor_shut_down" });
    }
  }

  #start(parts: StartParts): Job {
    // Checked synchronously right before spawning, so concurrent calls cannot overshoot.
    this.#assertOpen();
    if (this.#running.size >= this.#limits.maxJobs) {
      fail(ReasonCode.rateLimited, PipelineStage.preflight, {
        detail_code: "max_running_jobs",
        evidence: { max_jobs: this.#limits.maxJobs, running_jobs: this.#running.size },
        message: "Too many jobs are running; wait for or cancel one first.",
      });
    }
    this.#prune();
    const job = new Job({
      id: newJobId(),
      limits: this.#limits,
      combineOutput: false,
      spawner: this.#spawner,
      ...(this.#containment === undefined ? {} : { containment: this.#containment }),
      emit: (event) => this.#emit(event),
      ...parts,
    });
    this.#jobs.set(job.id, job);
    if (job.isRunning) {
      this.#running.add(job);
      void job.terminal.then(() => this.#running.delete(job));
    }
    return job;
  }

  /** The terminal result if the job ends within `waitMs` (or the signal aborts), else undefined. */
  async #settle(job: Job, waitMs: number, signal?: AbortSignal): Promise<TerminalResult | undefined> {
    if (job.result === undefined && waitMs > 0 && !signal?.aborted) {
      const timer = sleep(waitMs, signal);
      try {
        await Promise.race([job.terminal, timer.done]);
      } finally {
        timer.cancel();
      }
    }
    return job.result === undefined ? undefined : copy(job.result);
  }

  /**
   * Waits up to wait_ms for the terminal result. When the caller abandons the call (MCP
   * cancellation) before it returned, the job is cancelled: its process group is stopped and
   * the cancelled terminal result is returned. A call that already returned pending is not
   * affected by later cancellation; its Job stays observable.
   */
  async #awaitWithin(job: Job, effective: EffectiveLimits, signal?: AbortSignal): Promise<RunResult> {
    const result = await this.#settle(job, effective.wait_ms, signal);
    if (result === undefined && signal?.aborted === true && job.isRunning) {
      job.cancel();
      await job.terminal;
      if (job.result !== undefined) return copy(job.result);
    }
    return result ?? { execution_state: "pending", job_id: job.id, effective: { ...effective } };
  }

  #emit(event: JobEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A faulty progress listener must never disturb a job.
      }
    }
  }

  /** Forgets terminal jobs past retention, then the oldest terminal ones beyond the bound. */
  #prune(): void {
    const now = Date.now();
    const { jobRetentionMs, maxRetainedJobs } = this.#limits;
    for (const [id, job] of this.#jobs) {
      if (job.finishedAtMs !== undefined && now - job.finishedAtMs >= jobRetentionMs) this.#jobs.delete(id);
    }
    let excess = this.#jobs.size - maxRetainedJobs;
    for (const [id, job] of this.#jobs) {
      if (excess <= 0) break;
      if (!job.isRunning) {
        this.#jobs.delete(id);
        excess--;
      }
    }
  }
}

/**
 * Creates the execution engine of one workspace. Every run becomes a Job in its own process
 * group with a scrubbed environment and bounded output; calls return the terminal result when
 * it arrives within wait_ms and `execution_state: "pending"` otherwise. Arguments are expected
 * canonical (the Gateway normalizes and clamps) but are re-validated and clamped here, because
 * the Runner is the last line before a real process starts. Validation failures throw
 * ToolFailureError (see @webcodex/contracts).
 */
export function createExecutor(options: ExecutorOptions): Executor {
  return new JobExecutor(options);
}
