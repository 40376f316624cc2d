import { performance } from "node:perf_hooks";
import { OutputCapture } from "./output-capture.js";
import { randomBytes } from "node:crypto";
import { JOB_TAG_ENV, terminateJob } from "./process-group.js";
import type { Containment, JobCgroup, LimitExceeded } from "./containment.js";
import type { SpawnedChild, Spawner } from "./spawner.js";
import type {
  CompletedResult,
  EffectiveLimits,
  ExecLimits,
  FailedToStartResult,
  JobEvent,
  JobKind,
  JobSnapshot,
  JobState,
  ShellFacts,
  StartErrorCode,
  TerminalResult,
} from "./types.js";

/** Everything needed to start one job; all of it already validated by the executor. */
export interface JobSpec {
  id: string;
  kind: JobKind;
  program: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Written to the child's stdin, which is then closed; without it stdin is /dev/null. */
  stdin?: string;
  /** null: no timeout (detached jobs). */
  timeoutMs: number | null;
  effective?: EffectiveLimits;
  shellFacts?: ShellFacts;
  /** Also capture stdout+stderr interleaved in order of arrival (run_shell). */
  combineOutput: boolean;
  limits: ExecLimits;
  /** Starts the program (directly, or through the spawn host). */
  spawner: Spawner;
  /** A cgroup per Job where available; absent: process-tree tracking only. */
  containment?: Containment;
  emit: (event: JobEvent) => void;
  /** Derives the stored terminal result from the process's (a Job kind with its own result shape). */
  finish?: (result: TerminalResult) => TerminalResult;
}

/** The spawn host died before confirming a spawn (spawn-host.ts): the program may have started. */
const SPAWN_UNCONFIRMED = "ESPAWNHOST";

function startErrorCode(error: unknown): StartErrorCode {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return "command_not_found";
  if (code === "EACCES" || code === "EPERM") return "permission_denied";
  return "spawn_failed";
}

/**
 * One spawned program and its lifecycle. The job is terminal when its group leader has
 * exited and its output pipes are closed (or a drain deadline passed); the terminal result is
 * computed exactly once and then replayed unchanged (keyed replay).
 */
export class Job {
  readonly id: string;
  readonly kind: JobKind;
  readonly startedAt: string;
  /** Wall-clock end, for retention; undefined while running. */
  finishedAtMs: number | undefined;
  /** Resolves once the spawn succeeded or failed. */
  readonly spawned: Promise<void>;
  /** Resolves with the terminal result; never rejects. */
  readonly terminal: Promise<TerminalResult>;

  readonly #spec: JobSpec;
  readonly #startMono = performance.now();
  readonly #stdout: OutputCapture;
  readonly #stderr: OutputCapture;
  readonly #output: OutputCapture | undefined;
  #child: SpawnedChild | undefined;
  #cgroup: JobCgroup | undefined;
  #cgroupEnded: Promise<void> | undefined;
  #pgid: number | undefined;
  #exitCode: number | null = null;
  #signal: string | null = null;
  #exited = false;
  #timedOut = false;
  #cancelled = false;
  #killing = false;
  #startError: StartErrorCode | undefined;
  #startUnconfirmed = false;
  #result: TerminalResult | undefined;
  #durationMs: number | undefined;
  #timeoutTimer: NodeJS.Timeout | undefined;
  readonly #tag = randomBytes(12).toString("hex");
  #drainTimer: NodeJS.Timeout | undefined;
  #resolveSpawned!: () => void;
  #resolveTerminal!: (result: TerminalResult) => void;

  constructor(spec: JobSpec) {
    this.#spec = spec;
    this.id = spec.id;
    this.kind = spec.kind;
    this.startedAt = new Date().toISOString();
    const { outputHeadBytes, outputTailBytes } = spec.limits;
    this.#stdout = new OutputCapture(outputHeadBytes, outputTailBytes);
    this.#stderr = new OutputCapture(outputHeadBytes, outputTailBytes);
    this.#output = spec.combineOutput ? new OutputCapture(outputHeadBytes, outputTailBytes) : undefined;
    this.spawned = new Promise((resolve) => (this.#resolveSpawned = resolve));
    this.terminal = new Promise((resolve) => (this.#resolveTerminal = resolve));
    this.#start();
  }

  get state(): JobState {
    if (this.#result === undefined) return "running";
    return this.#result.state;
  }

  get isRunning(): boolean {
    return this.#result === undefined;
  }

  /** The stored terminal result, if terminal. */
  get result(): TerminalResult | undefined {
    return this.#result;
  }

  #start(): void {
    const spec = this.#spec;
    let child: SpawnedChild;
    try {
      // Made before the spawn, so the Job's first process is born inside it (fails closed).
      this.#cgroup = spec.containment?.create(this.id);
      child = spec.spawner.spawn(spec.program, spec.args, {
        cwd: spec.cwd,
        // The tag finds the Job's processes even after they leave its group (setsid).
        env: { ...spec.env, [JOB_TAG_ENV]: this.#tag },
        // Own session and process group: the whole tree can be signalled as one.
        detached: true,
        stdin: spec.stdin === undefined ? "ignore" : "pipe",
        ...(this.#cgroup === undefined ? {} : { cgroups: this.#cgroup.dirs }),
      });
    } catch (error) {
      this.#cgroup?.remove();
      this.#failStart(error);
      return;
    }
    this.#child = child;

    child.once("spawn", () => {
      this.#pgid = child.pid;
      this.#resolveSpawned();
      if (spec.timeoutMs !== null) {
        this.#timeoutTimer = setTimeout(() => {
          if (this.#exited) return;
          this.#timedOut = true;
          this.#kill();
        }, spec.timeoutMs);
      }
      // A cancel that arrived before the spawn completed is honoured now.
      if (this.#cancelled) this.#kill();
    });
    child.on("error", (error) => {
      // Before "spawn" this is a start failure; later errors (e.g. kill races) change nothing.
      if (this.#pgid === undefined) this.#failStart(error);
    });

    child.stdout.on("data", (chunk: Buffer) => this.#onData(this.#stdout, chunk));
    child.stderr.on("data", (chunk: Buffer) => this.#onData(this.#stderr, chunk));
    // A pipe error must never crash the Runner; the exit facts still come from "exit".
    child.stdout.on("error", () => {});
    child.stderr.on("error", () => {});
    if (child.stdin) {
      // The child may exit without reading its input (EPIPE); that is not a job failure.
      child.stdin.on("error", () => {});
      child.stdin.end(spec.stdin);
    }
    child.once("exit", (code, signal) => this.#onExit(code, signal));
    child.once("close", () => this.#finalize());
  }

  #onData(capture: OutputCapture, chunk: Buffer): void {
    capture.write(chunk);
    this.#output?.write(chunk);
    this.#spec.emit({ job_id: this.id, kind: "output", bytes_so_far: this.#bytesSoFar() });
  }

  #bytesSoFar(): number {
    return this.#stdout.totalBytes + this.#stderr.totalBytes;
  }

  #failStart(error: unknown): void {
    if (this.#result !== undefined || this.#startError !== undefined) return;
    this.#startError = startErrorCode(error);
    this.#startUnconfirmed = (error as NodeJS.ErrnoException | undefined)?.code === SPAWN_UNCONFIRMED;
    // An unconfirmed start may have left a process in the cgroup: end it like any Job's.
    if (this.#cgroup !== undefined && this.#cgroupEnded === undefined) this.#cgroupEnded = this.#endCgroup(this.#cgroup);
    this.#child?.stdout?.destroy();
    this.#child?.stderr?.destroy();
    this.#child?.stdin?.destroy();
    this.#resolveSpawned();
    this.#finalize();
  }

  #onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.#exited = true;
    this.#exitCode = code;
    this.#signal = signal;
    clearTimeout(this.#timeoutTimer);
    // The job ends with its leader: background leftovers of the group are terminated too,
    // so nothing is orphaned and the output pipes they hold get closed.
    this.#kill();
    // A process outside the group (setsid) could keep a pipe open forever; stop waiting.
    this.#drainTimer = setTimeout(() => {
      this.#child?.stdout?.destroy();
      this.#child?.stderr?.destroy();
      this.#finalize();
    }, this.#spec.limits.killGraceMs + 1_000);
  }

  #kill(): void {
    if (this.#killing || this.#pgid === undefined) return;
    this.#killing = true;
    // The escalation is deliberately left running past finalize: it must reach stragglers.
    void terminateJob(this.#pgid, this.#tag, this.#spec.limits.killGraceMs);
    if (this.#cgroup !== undefined) this.#cgroupEnded = this.#endCgroup(this.#cgroup);
  }

  /**
   * SIGTERM to every process of the Job's cgroup, then (after the grace, or at once when none
   * is left) the cgroup's kill, which reaches processes however they detached; then removal.
   */
  async #endCgroup(cgroup: JobCgroup): Promise<void> {
    const grace = this.#spec.limits.killGraceMs;
    const first = cgroup.pids();
    for (const pid of first) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // Gone.
      }
    }
    const deadline = Date.now() + grace;
    while (first.length > 0 && cgroup.pids().length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await cgroup.kill();
    for (let attempt = 0; attempt < 50; attempt++) {
      cgroup.remove();
      if (cgroup.pids().length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    cgroup.remove();
  }

  /** Resolves once the Job's cgroup is gone (at once without one): tests and shutdown. */
  get contained(): Promise<void> {
    return this.#cgroupEnded ?? Promise.resolve();
  }

  /** Requests cancellation; false when the job had already ended (nothing changes then). */
  cancel(): boolean {
    if (this.#result !== undefined || this.#exited || this.#startError !== undefined) return false;
    this.#cancelled = true;
    this.#kill();
    return true;
  }

  #finalize(): void {
    if (this.#result !== undefined) return;
    if (this.#startError === undefined && !this.#exited) return;
    clearTimeout(this.#timeoutTimer);
    clearTimeout(this.#drainTimer);
    this.#durationMs = Math.round(performance.now() - this.#startMono);
    this.finishedAtMs = Date.now();
    const raw = this.#startError === undefined ? this.#completedResult() : this.#failedToStartResult(this.#startError);
    const result = this.#derive(raw);
    this.#result = Object.freeze(result);
    this.#resolveTerminal(this.#result);
    this.#spec.emit({ job_id: this.id, kind: "terminal", bytes_so_far: this.#bytesSoFar(), state: result.state });
  }

  #derive(raw: TerminalResult): TerminalResult {
    if (this.#spec.finish === undefined) return raw;
    try {
      return this.#spec.finish(raw);
    } catch {
      // A faulty derivation must not lose the Job's end: the process's own result stands.
      return raw;
    }
  }

  #failedToStartResult(errorCode: StartErrorCode): FailedToStartResult {
    const result: FailedToStartResult = {
      execution_state: "failed_to_start",
      job_id: this.id,
      state: "failed_to_start",
      error_code: errorCode,
      program: this.#spec.program,
      ...(this.#startUnconfirmed ? { outcome_unknown: true as const } : {}),
      ...this.#spec.shellFacts,
      duration_ms: this.#durationMs ?? 0,
      started_at: this.startedAt,
    };
    if (this.#spec.effective) result.effective = this.#spec.effective;
    return result;
  }

  #completedResult(): CompletedResult {
    const stdout = this.#stdout.render();
    const stderr = this.#stderr.render();
    const output = this.#output?.render();
    const truncated = stdout.omittedBytes > 0 || stderr.omittedBytes > 0 || (output?.omittedBytes ?? 0) > 0;
    const result: CompletedResult = {
      execution_state: "completed",
      job_id: this.id,
      state: this.#timedOut ? "timed_out" : this.#cancelled ? "cancelled" : "completed",
      ...this.#spec.shellFacts,
      exit_code: this.#exitCode,
      signal: this.#signal,
      timed_out: this.#timedOut,
      ...(this.#child?.lostWithHost === true ? { outcome_unknown: true as const } : {}),
      ...this.#limitFacts(),
      stdout: stdout.text,
      stderr: stderr.text,
      ...(output ? { output: output.text } : {}),
      stdout_bytes: this.#stdout.totalBytes,
      stderr_bytes: this.#stderr.totalBytes,
      truncated,
      ...(truncated
        ? {
            omitted_bytes: {
              stdout: stdout.omittedBytes,
              stderr: stderr.omittedBytes,
              ...(output ? { output: output.omittedBytes } : {}),
            },
          }
        : {}),
      duration_ms: this.#durationMs ?? 0,
      started_at: this.startedAt,
    };
    if (this.#spec.effective) result.effective = this.#spec.effective;
    return result;
  }

  #limitFacts(): { limit_exceeded?: LimitExceeded } {
    const exceeded = this.#cgroup?.exceeded();
    return exceeded === undefined ? {} : { limit_exceeded: exceeded };
  }

  /** What observeJobs shows: state, exit facts so far, stream tails and exact byte counts. */
  snapshot(): JobSnapshot {
    const tailBytes = this.#spec.limits.observeTailBytes;
    const snapshot: JobSnapshot = {
      job_id: this.id,
      kind: this.kind,
      state: this.state,
      started_at: this.startedAt,
      duration_ms: this.#durationMs ?? Math.round(performance.now() - this.#startMono),
      exit_code: this.#exitCode,
      signal: this.#signal,
      timed_out: this.#timedOut,
      stdout_tail: this.#stdout.tail(tailBytes),
      stderr_tail: this.#stderr.tail(tailBytes),
      stdout_bytes: this.#stdout.totalBytes,
      stderr_bytes: this.#stderr.totalBytes,
    };
    if (this.#startError !== undefined) snapshot.error_code = this.#startError;
    return snapshot;
  }
}
