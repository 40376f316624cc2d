/**
 * `child_process.execFile` on top of a Spawner, so short commands (git) can go through the
 * spawn host too. Same callback contract for what the Runner relies on: the error's `code` is
 * the exit code (a number), the spawn errno ("ENOENT", ...) or
 * "ERR_CHILD_PROCESS_STDIO_MAXBUFFER" when output passed `maxBuffer` (the child is then
 * killed); `signal` is set when a signal ended the child; stdout and stderr are always passed.
 */
import type { SpawnedChild, Spawner } from "./spawner.js";

export interface ExecFileOptions {
  cwd: string;
  env?: Record<string, string>;
  /** Bytes allowed on each of stdout and stderr; default 1 MiB like execFile. */
  maxBuffer?: number;
  /** Kill the child (SIGKILL) after this many ms; the error's code is then "ETIMEDOUT". Default: no limit. */
  timeoutMs?: number;
}

export interface ExecFileError extends Error {
  code?: number | string | null;
  signal?: NodeJS.Signals | null;
}

export type ExecFileCallback = (error: ExecFileError | null, stdout: string, stderr: string) => void;

const DEFAULT_MAX_BUFFER = 1024 * 1024;

export function execFileVia(spawner: Spawner, file: string, args: readonly string[], options: ExecFileOptions, callback: ExecFileCallback): void {
  const maxBuffer = options.maxBuffer ?? DEFAULT_MAX_BUFFER;
  let child: SpawnedChild;
  try {
    child = spawner.spawn(file, args, { cwd: options.cwd, ...(options.env === undefined ? {} : { env: options.env }) });
  } catch (error) {
    queueMicrotask(() => callback(error as ExecFileError, "", ""));
    return;
  }
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  let failure: ExecFileError | undefined;
  let done = false;

  const collect = (name: "stdout" | "stderr", chunks: Buffer[]) => {
    let length = 0;
    return (chunk: Buffer): void => {
      if (failure !== undefined) return;
      length += chunk.length;
      if (length > maxBuffer) {
        failure = Object.assign(new RangeError(`${name} maxBuffer length exceeded`), { code: "ERR_CHILD_PROCESS_STDIO_MAXBUFFER" });
        child.kill("SIGTERM");
        return;
      }
      chunks.push(chunk);
    };
  };
  const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
    if (done) return;
    done = true;
    const out = Buffer.concat(stdout).toString("utf8");
    const err = Buffer.concat(stderr).toString("utf8");
    if (failure === undefined && code === 0 && signal === null) {
      callback(null, out, err);
      return;
    }
    const error: ExecFileError = failure ?? Object.assign(new Error(`Command failed: ${[file, ...args].join(" ")}\n${err}`), { code, signal });
    callback(error, out, err);
  };

  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          failure ??= Object.assign(new Error(`${file} timed out after ${options.timeoutMs} ms`), { code: "ETIMEDOUT" });
          child.kill("SIGKILL");
        }, options.timeoutMs);
  timer?.unref();
  child.once("close", () => clearTimeout(timer));
  child.stdout.on("data", collect("stdout", stdout));
  child.stderr.on("data", collect("stderr", stderr));
  child.stdout.on("error", () => {});
  child.stderr.on("error", () => {});
  child.on("error", (error) => {
    failure ??= error;
    child.stdout.destroy();
    child.stderr.destroy();
    finish(null, null);
  });
  child.once("close", finish);
}
