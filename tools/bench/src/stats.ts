/** Small helpers for benchmark statistics and child processes. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

export const median = (samples: number[]) => percentile(samples, 50);
export const round = (n: number, digits = 3) => Number(n.toFixed(digits));

export interface BenchResult {
  name: string;
  metrics: Record<string, number>;
  /** What the ratio compares, in words. */
  notes?: string;
}

/** Results as a Markdown table, one row per result, its metrics as `key=value`. */
export function resultTable(heading: string, results: BenchResult[]): string {
  const rows = results.map(
    (r) =>
      `| ${r.name} | ${Object.entries(r.metrics)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ")} |\n`,
  );
  return `| ${heading} | metrics |\n|---|---|\n${rows.join("")}`;
}

/** Starts a child process and resolves when a stdout line matches `ready`. */
export async function startChild(
  command: string,
  args: string[],
  ready: RegExp,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(" ")} did not start\n${out}\n${err}`)), 60_000);
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(" ")} exited ${code}\n${out}\n${err}`));
    });
  });
  return { child, match };
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
  });
}

/** Resident memory (VmRSS) of a live process now, in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** CPU time (user plus system, all threads) a live process has used so far, in microseconds; NaN once it is gone. */
export function cpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    // utime and stime, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return Number.NaN;
  }
}

/** Peak resident memory (VmHWM) of a live process, in MiB. */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
