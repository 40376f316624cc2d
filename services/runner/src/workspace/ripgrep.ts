/**
 * Runs ripgrep once and streams its stdout line by line, so listing and search cost one
 * process and no per-file stat. Flags shared by list and search live here so both see the
 * same file set: .gitignore honoured even outside a git repo, hidden files included, `.git/`
 * excluded, user config ignored.
 */
import { stat } from "node:fs/promises";
import { PipelineStage, ReasonCode, ToolFailureError, fail, isToolFailureError, toolFailure } from "@webcodex/contracts";
import type { Spawner } from "../exec/spawner.js";
import { errnoCode, type PathResolver } from "./path-policy.js";

/** Flags that define "the project's files" for both list and search. */
export function fileSetArgs(glob: string | undefined): string[] {
  const args = ["--no-config", "--hidden", "--no-require-git", "--color", "never"];
  if (glob !== undefined && glob !== "") args.push("--glob", glob);
  // Later globs win in rg, so this exclusion cannot be overridden by the caller's glob.
  args.push("--glob", "!.git");
  return args;
}

/** How long one rg run may take before it is killed and what it printed counts as a part. */
export const RG_TIMEOUT_MS = 30_000;

/** The rg binary and how it is started. */
export interface RgCommand {
  path: string;
  spawner: Spawner;
  /** Default RG_TIMEOUT_MS. */
  timeoutMs?: number;
}

export interface RgOutcome {
  /** Exit code, or null when killed. */
  code: number | null;
  /** The signal that ended rg, if one did. */
  signal: NodeJS.Signals | null;
  /** Bounded tail of stderr. */
  stderr: string;
  /** We stopped rg early because the consumer asked to. */
  stopped: boolean;
  /** rg ran past its timeout and was killed: it did not finish. */
  timedOut: boolean;
}

const STDERR_LIMIT = 4096;

/**
 * Spawns rg with `args` in `cwd` and calls `onBlock` with runs of whole stdout lines (joined by
 * "\n", final newline removed), so consumers can decode a block at once or walk it with
 * `forEachLine`. Returning false stops rg. A block is only valid during the call.
 */
export function runRg(rg: RgCommand, args: string[], cwd: string, onBlock: (block: Buffer) => boolean | void): Promise<RgOutcome> {
  return new Promise((resolve, reject) => {
    const child = rg.spawner.spawn(rg.path, args, { cwd });
    let stderr = "";
    let stopped = false;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, rg.timeoutMs ?? RG_TIMEOUT_MS);
    // Bytes after the last newline seen, kept as parts so a very long line is copied once.
    let carry: Buffer[] = [];

    const feed = (chunk: Buffer): void => {
      if (stopped) return;
      const last = chunk.lastIndexOf(0x0a);
      if (last === -1) {
        carry.push(Buffer.from(chunk));
        return;
      }
      const data = carry.length === 0 ? chunk : Buffer.concat([...carry, chunk]);
      const end = data.length - (chunk.length - last);
      carry = last < chunk.length - 1 ? [Buffer.from(chunk.subarray(last + 1))] : [];
      if (onBlock(data.subarray(0, end)) === false) {
        stopped = true;
        child.kill();
      }
    };

    child.stdout.on("data", feed);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text: string) => {
      if (stderr.length < STDERR_LIMIT) stderr = (stderr + text).slice(0, STDERR_LIMIT);
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      const code = (error as NodeJS.ErrnoException).code;
      const unavailable = code === "ENOENT" || code === "EACCES";
      reject(
        unavailable ? new ToolFailureError(toolFailure(ReasonCode.dependencyUnavailable, PipelineStage.execution, { detail_code: "rg_unavailable" })) : error,
      );
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (!stopped && carry.length > 0) onBlock(Buffer.concat(carry));
      resolve({ code, signal, stderr, stopped, timedOut });
    });
  });
}

/** Calls `onLine` for each "\n"-separated line of a block; stops early when it returns false. */
export function forEachLine(block: Buffer, onLine: (line: Buffer) => boolean | void): boolean {
  let start = 0;
  for (;;) {
    const end = block.indexOf(0x0a, start);
    if (onLine(block.subarray(start, end === -1 ? block.length : end)) === false) return false;
    if (end === -1) return true;
    start = end + 1;
  }
}

export interface SearchTarget {
  /** Argument to pass to rg after "--". */
  arg: string;
  /** Prefix rg puts on output paths that is not part of the project-relative path. */
  stripPrefix: string;
}

/**
 * Resolves and proves the existence of a list/search path before rg runs, so a missing path is
 * reported as `path_not_found` (a resolution fact) rather than as an rg process failure.
 */
export async function resolveSearchTarget(resolver: PathResolver, input: string | undefined): Promise<SearchTarget> {
  const resolved = await resolver.resolve(input ?? "", { allowRoot: true });
  try {
    const info = await stat(resolved.real);
    // A FIFO, socket or device named directly would hold rg (a FIFO until something writes to it).
    if (!info.isFile() && !info.isDirectory())
      fail(ReasonCode.notAFile, PipelineStage.resolution, { detail_code: "special_file", evidence: { path: resolved.rel } });
  } catch (error) {
    if (isToolFailureError(error)) throw error;
    const code = errnoCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") {
      fail(ReasonCode.pathNotFound, PipelineStage.resolution, { evidence: { path: resolved.rel } });
    }
    throw error;
  }
  return resolved.rel === "" ? { arg: ".", stripPrefix: "./" } : { arg: resolved.rel, stripPrefix: "" };
}
