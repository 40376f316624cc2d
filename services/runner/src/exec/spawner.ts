/**
 * The one seam through which the Runner starts programs (jobs, ripgrep, git). Direct spawning
 * forks the Runner itself, which costs time in proportion to its resident memory; the spawn
 * host (spawn-host.ts) implements the same contract from a small helper process.
 */
import { spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { spawnWithin } from "./cgroup-enter.js";
import { minimalProcessEnv } from "./child-env.js";

export interface SpawnOptions {
  cwd: string;
  /** Complete environment of the child; a minimal one (PATH, HOME, LANG, TMPDIR) when absent. */
  env?: Record<string, string>;
  /** Own session and process group (setsid), so the whole tree can be signalled as one. */
  detached?: boolean;
  /** "pipe" gives a writable `stdin`; default "ignore" (/dev/null). stdout and stderr are always piped. */
  stdin?: "ignore" | "pipe";
  /** Cgroup directories the child is born in (a Job's; see cgroup-enter.ts). */
  cgroups?: readonly string[];
  /** Run the child as this user and group (a Runner running as root drops Jobs to an unprivileged uid). */
  uid?: number;
  gid?: number;
}

/**
 * The part of `ChildProcess` the Runner relies on, with its event order: "spawn" (pid known)
 * or "error" (never started), then "exit", then "close" once stdout and stderr have ended.
 * A `ChildProcess` started with piped stdout/stderr satisfies it.
 */
export interface SpawnedChild {
  readonly pid: number | undefined;
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly stdin: Writable | null;
  /**
   * True when the program was killed because the process that relayed its pipes (the spawn
   * host) died: its real exit was never observed, so its outcome is unknown.
   */
  readonly lostWithHost?: boolean;
  kill(signal?: NodeJS.Signals): boolean;
  on(event: "spawn", listener: () => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  on(event: "exit" | "close", listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  once(event: "spawn", listener: () => void): this;
  once(event: "error", listener: (error: Error) => void): this;
  once(event: "exit" | "close", listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
}

export interface Spawner {
  /**
   * Like `child_process.spawn`: a program that cannot start reports "error"; only invalid
   * arguments may throw synchronously (direct spawning).
   */
  spawn(program: string, args: readonly string[], options: SpawnOptions): SpawnedChild;
  /** Releases helper resources; call it once children are done (a spawn host's running children are lost with it). */
  close(): Promise<void>;
}

/** The Runner forks itself for every program: `child_process.spawn`. */
export function spawnDirect(program: string, args: readonly string[], options: SpawnOptions): SpawnedChild {
  return spawnWithin(options.cgroups, () =>
    spawn(program, args, {
      cwd: options.cwd,
      env: options.env ?? minimalProcessEnv(),
      detached: options.detached === true,
      stdio: [options.stdin ?? "ignore", "pipe", "pipe"],
      windowsHide: true,
      ...(options.uid === undefined ? {} : { uid: options.uid }),
      ...(options.gid === undefined ? {} : { gid: options.gid }),
    }),
  ) as SpawnedChild;
}

/** A Spawner that forks the calling process (WEBCODEX_RUNNER_SPAWN_HOST=off, and the fallback). */
export function createDirectSpawner(): Spawner {
  return { spawn: spawnDirect, close: () => Promise.resolve() };
}
