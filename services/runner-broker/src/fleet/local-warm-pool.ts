/**
 * A warm pool of local Runner processes (`webcodex runner` with WEBCODEX_RUNNER_WARM=1): each has
 * started Node and loaded the Runner's modules, holds no project, no workspace and no credential,
 * and waits for one line on stdin naming what it serves (its environment: workspace, project,
 * broker, credential). A new Project's Runner is one of these, claimed, instead of a cold
 * process start; the pool starts a replacement at once. The credential travels over the pipe,
 * never through the process environment.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import type { Logger } from "@webcodex/platform";

export interface WarmPoolOptions {
  /** Path of tools/cli/bin/webcodex.js. */
  cliPath: string;
  /** How many loaded, unclaimed Runners to keep. */
  size: number;
  /** The environment an unclaimed Runner starts with (no identity, no credential). */
  env: Record<string, string>;
  logger: Logger;
}

export interface WarmRunner {
  proc: ChildProcess;
  /** Hands the Runner what it serves; it starts serving at once. */
  claim(env: Record<string, string>): void;
}

export interface WarmPool {
  /** A loaded, unclaimed Runner, or undefined when none is ready (the caller starts one cold). */
  take(): WarmRunner | undefined;
  /** Loaded, unclaimed Runners now. */
  ready(): number;
  /** Resolves once `n` Runners are loaded (or the timeout passes). */
  filled(n?: number, timeoutMs?: number): Promise<boolean>;
  close(): Promise<void>;
}

/** The line a warm Runner writes on stdout once its modules are loaded. */
export const WARM_READY_LINE = "webcodex-runner-warm";

export function createWarmPool(o: WarmPoolOptions): WarmPool {
  const loading = new Set<ChildProcess>();
  const ready: ChildProcess[] = [];
  let closed = false;

  const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;

  const refill = () => {
    while (!closed && loading.size + ready.length < o.size) {
      const proc = spawn(process.execPath, [o.cliPath, "runner"], {
        env: { ...o.env, WEBCODEX_RUNNER_WARM: "1" },
        stdio: ["pipe", "pipe", "pipe"],
      });
      loading.add(proc);
      let out = "";
      let err = "";
      proc.stdout?.setEncoding("utf8");
      proc.stderr?.setEncoding("utf8");
      proc.stderr?.on("data", (c: string) => (err = (err + c).slice(-2_000)));
      const onData = (c: string) => {
        out += c;
        if (!out.includes(WARM_READY_LINE)) return;
        proc.stdout?.off("data", onData);
        proc.stdout?.resume();
        if (!loading.delete(proc)) return;
        if (closed) proc.kill("SIGTERM");
        else ready.push(proc);
      };
      proc.stdout?.on("data", onData);
      proc.once("exit", (code, signal) => {
        const wasLoading = loading.delete(proc);
        const i = ready.indexOf(proc);
        if (i >= 0) ready.splice(i, 1);
        if (closed || (!wasLoading && i < 0)) return;
        o.logger.warn("warm runner exited before it was claimed", { code, signal, stderr_tail: err.trim().split("\n").slice(-3) });
        // A pool whose Runners die at start would spin: refill later.
        setTimeout(refill, 2_000).unref();
      });
    }
  };
  refill();

  return {
    take() {
      while (ready.length > 0) {
        const proc = ready.shift() as ChildProcess;
        if (!alive(proc)) continue;
        refill();
        return {
          proc,
          claim(env) {
            proc.stdin?.end(`${JSON.stringify(env)}\n`);
          },
        };
      }
      refill();
      return undefined;
    },
    ready: () => ready.filter(alive).length,
    async filled(n = o.size, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (ready.filter(alive).length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      return ready.filter(alive).length >= n;
    },
    async close() {
      closed = true;
      const all = [...loading, ...ready];
      loading.clear();
      ready.length = 0;
      await Promise.all(
        all.map(
          (p) =>
            new Promise<void>((resolve) => {
              if (!alive(p)) return resolve();
              p.once("exit", () => resolve());
              p.kill("SIGTERM");
              setTimeout(() => p.kill("SIGKILL"), 3_000).unref();
            }),
        ),
      );
    },
  };
}
