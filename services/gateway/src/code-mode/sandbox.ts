/**
 * The gateway side of the Code Mode sandbox: a small pool of worker threads, each running one
 * cell at a time in a fresh QuickJS runtime (./sandbox-worker.ts). The parent owns every
 * limit the VM must not be trusted with: the number of child calls, how many run at once, and
 * a hard deadline past which the worker is terminated whatever the VM is doing.
 */
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { CellDone, WorkerMessage } from "./protocol.js";

export interface CellLimits {
  timeoutMs: number;
  memoryBytes: number;
  textBytes: number;
  maxChildCalls: number;
  childConcurrency: number;
}

/** A child call's answer as the cell receives it. */
export type ChildOutcome = { ok: true; result: unknown } | { ok: false; failure: Record<string, unknown> };

export interface CellRun {
  kind: CellDone["kind"] | "child_call_limit";
  text: string;
  truncated: boolean;
  message?: string;
  line?: number;
  reasonCode?: string;
  childCalls: number;
  elapsedMs: number;
}

/** Past the cell's own deadline, how long the VM's interrupt handler gets before the worker is terminated. */
const HARD_KILL_GRACE_MS = 1_000;
/** How long a cold worker may take to load the QuickJS module before its cell counts as timed out. */
const WORKER_START_ALLOWANCE_MS = 10_000;
const WORKER_URL = new URL("./sandbox-worker.js", import.meta.url);

export interface SandboxPool {
  run(code: string, limits: CellLimits, callTool: (name: string, argsJson: string) => Promise<ChildOutcome>, signal?: AbortSignal): Promise<CellRun>;
  close(): Promise<void>;
}

/**
 * A pool keeping at most `maxIdle` warm workers (each has the WASM module loaded). At most
 * `maxRunning` cells run at once (default: one per core but one, which is left to the gateway); a cell waits for a slot within its
 * own deadline, so a burst of runaway cells cannot take every core from the gateway.
 */
export function createSandboxPool(options: { maxIdle?: number; maxRunning?: number } = {}): SandboxPool {
  const maxIdle = options.maxIdle ?? 2;
  const maxRunning = options.maxRunning ?? Math.max(1, availableParallelism() - 1);
  const idle: Worker[] = [];
  const live = new Set<Worker>();
  let running = 0;
  const waiting: Array<() => void> = [];

  /** Takes a run slot, or gives up at `deadline` (false). */
  const acquire = (deadline: number) =>
    new Promise<boolean>((resolve) => {
      if (running < maxRunning) {
        running++;
        return resolve(true);
      }
      const grant = () => {
        clearTimeout(timer);
        running++;
        resolve(true);
      };
      const timer = setTimeout(
        () => {
          const at = waiting.indexOf(grant);
          if (at >= 0) waiting.splice(at, 1);
          resolve(false);
        },
        Math.max(0, deadline - Date.now()),
      );
      waiting.push(grant);
    });
  const release = () => {
    running--;
    waiting.shift()?.();
  };

  const spawn = () => {
    // The worker's own heap is bounded too; the VM's memory is capped inside it.
    const worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 } });
    worker.unref();
    live.add(worker);
    worker.once("exit", () => {
      live.delete(worker);
      const at = idle.indexOf(worker);
      if (at >= 0) idle.splice(at, 1);
    });
    return worker;
  };

  async function run(
    code: string,
    limits: CellLimits,
    callTool: (name: string, argsJson: string) => Promise<ChildOutcome>,
    signal?: AbortSignal,
  ): Promise<CellRun> {
    const started = performance.now();
    const deadline = Date.now() + limits.timeoutMs;
    if (!(await acquire(deadline)))
      return {
        kind: "timeout",
        text: "",
        truncated: false,
        message: `no sandbox was free within ${limits.timeoutMs} ms (at most ${maxRunning} cells run at once)`,
        childCalls: 0,
        elapsedMs: Math.round(performance.now() - started),
      };
    try {
      return await runInWorker(code, limits, callTool, signal, started, deadline);
    } finally {
      release();
    }
  }

  function runInWorker(
    code: string,
    limits: CellLimits,
    callTool: (name: string, argsJson: string) => Promise<ChildOutcome>,
    signal: AbortSignal | undefined,
    started: number,
    deadline: number,
  ): Promise<CellRun> {
    const worker = idle.pop() ?? spawn();
    let childCalls = 0;
    let inFlight = 0;
    const queue: Array<() => void> = [];
    return new Promise<CellRun>((resolve) => {
      let settled = false;
      const elapsed = () => Math.round(performance.now() - started);
      const end = (run: Omit<CellRun, "childCalls" | "elapsedMs">, reusable: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(hardKill);
        signal?.removeEventListener("abort", onAbort);
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
        if (reusable && idle.length < maxIdle) idle.push(worker);
        else void worker.terminate();
        resolve({ ...run, childCalls, elapsedMs: elapsed() });
      };
      const onAbort = () => end({ kind: "timeout", text: "", truncated: false, message: "the call was cancelled" }, false);
      const onError = (error: Error) => end({ kind: "crashed", text: "", truncated: false, message: error.message }, false);
      const onExit = () => end({ kind: "crashed", text: "", truncated: false, message: "the sandbox ended unexpectedly" }, false);
      // The cell's budget runs from when its VM starts (what it waited for a slot is taken off it);
      // until then a worker that never starts is ended after the budget plus a start allowance.
      const budget = Math.max(1, deadline - Date.now());
      const kill = () => end({ kind: "timeout", text: "", truncated: false, message: `the cell did not stop within ${limits.timeoutMs} ms` }, false);
      let hardKill = setTimeout(kill, budget + WORKER_START_ALLOWANCE_MS + HARD_KILL_GRACE_MS);

      const answer = (id: number, outcome: ChildOutcome) => {
        if (!settled) worker.postMessage({ type: "answer", id, envelope: JSON.stringify(outcome) });
      };
      const dispatch = (id: number, name: string, args: string) => {
        inFlight++;
        void callTool(name, args)
          .catch((error: unknown): ChildOutcome => ({ ok: false, failure: { reason_code: "internal", failure_stage: "dispatch", message: String(error) } }))
          .then((outcome) => {
            inFlight--;
            answer(id, outcome);
            queue.shift()?.();
          });
      };
      const onMessage = (message: WorkerMessage) => {
        if (message.type === "started") {
          clearTimeout(hardKill);
          hardKill = setTimeout(kill, budget + HARD_KILL_GRACE_MS);
          return;
        }
        if (message.type === "done") {
          const { type: _type, reusable, ...rest } = message;
          return end(rest, reusable !== false);
        }
        childCalls++;
        if (childCalls > limits.maxChildCalls)
          return end({ kind: "child_call_limit", text: "", truncated: false, message: `the cell made more than ${limits.maxChildCalls} child calls` }, false);
        if (inFlight < limits.childConcurrency) dispatch(message.id, message.name, message.args);
        else queue.push(() => dispatch(message.id, message.name, message.args));
      };
      worker.on("message", onMessage);
      worker.once("error", onError);
      worker.once("exit", onExit);
      signal?.addEventListener("abort", onAbort, { once: true });
      worker.postMessage({ type: "run", code, timeoutMs: budget, memoryBytes: limits.memoryBytes, textBytes: limits.textBytes });
    });
  }

  return {
    run,
    async close() {
      await Promise.all([...live].map((w) => w.terminate()));
      idle.length = 0;
    },
  };
}
