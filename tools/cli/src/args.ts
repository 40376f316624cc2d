/** Command-line argument checks: a bad argument is a usage error (exit 2, one line, no stack). */
import { statSync } from "node:fs";

/** A command line that cannot run as given. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Exit status for an error that ends the command: 2 for usage errors (ours or node:util parseArgs's), else 1. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError) return 2;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_") ? 2 : 1;
}

/** `--port` as an integer in [min, max], written in plain decimal digits. */
export function parsePort(raw: string | undefined, range: { min: number; max: number; flag?: string; why?: string }): number {
  const flag = range.flag ?? "--port";
  const n = raw !== undefined && /^\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < range.min || n > range.max) {
    throw new UsageError(`${flag} must be an integer from ${range.min} to ${range.max}${range.why ? ` (${range.why})` : ""}, got ${JSON.stringify(raw ?? "")}`);
  }
  return n;
}

/** `--project DIR` must name an existing directory: a usage error (one line, exit 2) otherwise. */
export function projectDirectory(dir: string): string {
  let info;
  try {
    info = statSync(dir);
  } catch {
    throw new UsageError(`--project ${dir}: no such directory`);
  }
  if (!info.isDirectory()) throw new UsageError(`--project ${dir}: not a directory`);
  return dir;
}
