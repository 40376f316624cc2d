/**
 * Messages between the Runner and its spawn host over the IPC channel (advanced
 * serialization, so output travels as Buffers). Per child id, the host sends them in the
 * order its ChildProcess emitted the events; IPC keeps that order.
 */

/** Runner → host. */
export type HostRequest =
  | {
      t: "spawn";
      id: number;
      program: string;
      args: string[];
      cwd: string;
      env: Record<string, string>;
      detached: boolean;
      stdin: boolean;
      cgroups?: string[];
      uid?: number;
      gid?: number;
    }
  | { t: "stdin"; id: number; data: Buffer }
  | { t: "stdin-end"; id: number };

/** What survives of a spawn error (Error objects lose `code` and friends in serialization). */
export interface SerializedError {
  message: string;
  code?: string;
  errno?: number;
  syscall?: string;
  path?: string;
}

/** Host → Runner. `spawn` carries the pid as soon as the fork succeeded. */
export type HostEvent =
  | { t: "ready" }
  | { t: "spawn"; id: number; pid: number }
  | { t: "error"; id: number; error: SerializedError }
  | { t: "out"; id: number; fd: 1 | 2; data: Buffer }
  | { t: "exit"; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { t: "close"; id: number; code: number | null; signal: NodeJS.Signals | null };
