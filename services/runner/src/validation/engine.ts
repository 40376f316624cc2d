/**
 * Runs validator steps one after another and folds their parsed results into one bounded
 * StructuredValidation. Each step's output is captured up to a bound; a cut output is marked,
 * so its parser can never call it passed.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { clip } from "./parsers.js";
import { REPORT } from "./detect.js";
import type { Plan, Step } from "./detect.js";
import type { CheckResult, ParsedRun, StructuredValidation, ValidationFailure, ValidationStatus } from "./types.js";

/** Bytes of each stream kept for parsing. */
export const CAPTURE_BYTES = 8 * 1024 * 1024;
export const MAX_FAILURES = 20;
const RAW_TAIL_CHARS = 1_500;

interface Captured {
  text: string;
  truncated: boolean;
}

function capture(stream: NodeJS.ReadableStream): Promise<Captured> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    stream.on("data", (chunk: Buffer) => {
      if (size >= CAPTURE_BYTES) {
        truncated = true;
        return;
      }
      const room = CAPTURE_BYTES - size;
      if (chunk.length > room) truncated = true;
      const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
      chunks.push(kept);
      size += kept.length;
    });
    stream.on("error", () => resolve({ text: Buffer.concat(chunks).toString("utf8"), truncated: true }));
    stream.on("end", () => resolve({ text: Buffer.concat(chunks).toString("utf8"), truncated }));
  });
}

function tail(text: string): string {
  const t = text.trimEnd();
  return t.length <= RAW_TAIL_CHARS ? t : `…${t.slice(t.length - RAW_TAIL_CHARS + 1)}`;
}

export interface StepOutcome {
  result: CheckResult;
  failures: ValidationFailure[];
}

/** Runs one step in its package directory under `root` and parses its output. */
export async function runStep(root: string, s: Step): Promise<StepOutcome> {
  const cwd = path.resolve(root, s.dir ?? ".");
  const pkg = s.package === undefined ? {} : { package: s.package };
  const started = performance.now();
  const tmp = s.reportFile ? await mkdtemp(path.join(os.tmpdir(), "wc-validate-")) : undefined;
  const reportPath = tmp ? path.join(tmp, "report") : undefined;
  const argv = s.argv.map((a) => (reportPath ? a.replace(REPORT, reportPath) : a));
  const [program, ...args] = argv as [string, ...string[]];
  let parsed: ParsedRun;
  let rawTail: string | undefined;
  try {
    // A node:test context inherited from a parent test run would make `node --test` skip its files.
    const { NODE_TEST_CONTEXT: _ctx, ...env } = process.env;
    const child = spawn(program, args, { cwd, env: { ...env, ...s.env }, stdio: ["ignore", "pipe", "pipe"] });
    const spawnError = new Promise<NodeJS.ErrnoException>((resolve) => child.once("error", resolve));
    const outputs = Promise.all([capture(child.stdout), capture(child.stderr)]);
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.once("close", (code, signal) => resolve({ code, signal })));
    const first = await Promise.race([exited, spawnError.then((e) => ({ error: e }))]);
    if ("error" in first) {
      const missing = first.error.code === "ENOENT";
      return {
        result: {
          check: s.check,
          ...pkg,
          provider: s.provider,
          command_summary: s.command_summary,
          status: "error",
          detail: missing ? "command_not_found" : "spawn_failed",
          duration_ms: Math.round(performance.now() - started),
        },
        failures: [
          { check: s.check, ...pkg, message: clip(missing ? `${program} was not found on PATH` : `${program} could not be started: ${first.error.message}`) },
        ],
      };
    }
    const [stdout, stderr] = await outputs;
    let report: string | undefined;
    if (reportPath) report = await readFile(reportPath, "utf8").catch(() => undefined);
    const out = {
      stdout: stdout.text,
      stderr: stderr.text,
      ...(report === undefined ? {} : { report }),
      exitCode: first.code,
      signal: first.signal,
      truncated: stdout.truncated || stderr.truncated,
      root,
      cwd,
    };
    try {
      parsed = s.parser(out);
    } catch {
      parsed = { status: "unparsed", failures: [], detail: "parser_error" };
    }
    if (parsed.status === "unparsed" || (parsed.status !== "passed" && parsed.failures.length === 0)) rawTail = tail(`${stdout.text}\n${stderr.text}`);
  } finally {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }
  const result: CheckResult = {
    check: s.check,
    ...pkg,
    provider: s.provider,
    command_summary: s.command_summary,
    status: parsed.status,
    ...(parsed.tests ? { tests: parsed.tests } : {}),
    ...(parsed.diagnostics ? { diagnostics: parsed.diagnostics } : {}),
    ...(parsed.format ? { format: parsed.format } : {}),
    ...(parsed.detail ? { detail: parsed.detail } : {}),
    duration_ms: Math.round(performance.now() - started),
    ...(rawTail ? { raw_tail: rawTail } : {}),
  };
  return { result, failures: s.package === undefined ? parsed.failures : parsed.failures.map(({ check, ...f }) => ({ check, ...pkg, ...f })) };
}

/** One status for the whole run: a failure decides first, then an error, then unreadable output. */
export function overallStatus(checks: readonly { status: ValidationStatus }[]): ValidationStatus {
  if (checks.length === 0) return "error";
  for (const s of ["failed", "error", "unparsed"] as const) if (checks.some((c) => c.status === s)) return s;
  return "passed";
}

/** Bounded failures: errors before warnings, then check order, then the order the tools reported. */
export function orderFailures(outcomes: readonly StepOutcome[]): { failures: ValidationFailure[]; truncated: boolean } {
  const all = outcomes.flatMap((o) => o.failures);
  const ordered = [...all.filter((f) => f.severity !== "warning"), ...all.filter((f) => f.severity === "warning")];
  return { failures: ordered.slice(0, MAX_FAILURES), truncated: ordered.length > MAX_FAILURES };
}

/** Runs a plan's steps in order and folds the results. */
export async function runPlan(root: string, plan: Plan): Promise<StructuredValidation> {
  const outcomes: StepOutcome[] = [];
  for (const s of plan.steps) outcomes.push(await runStep(root, s));
  const checks = outcomes.map((o) => o.result);
  const { failures, truncated } = orderFailures(outcomes);
  const outputCut = checks.some((c) => c.detail === "output_truncated");
  // Nothing ran: say why (a code, not a verdict of validators) rather than leave a bare error.
  const nothing = plan.steps.length === 0 ? (plan.skipped.length === 0 ? "nothing_detected" : "all_checks_skipped") : undefined;
  if (nothing === "nothing_detected")
    plan.notes.push("no validator is defined by the files of this project (or of the requested paths' packages) for the requested checks");
  return {
    status: overallStatus(checks),
    ...(nothing ? { detail: nothing } : {}),
    checks,
    failures,
    truncated: truncated || outputCut,
    ...(plan.skipped.length > 0 ? { skipped: plan.skipped } : {}),
    ...(plan.detected.length > 0 ? { detected: plan.detected } : {}),
    ...(plan.notes.length > 0 ? { notes: plan.notes } : {}),
  };
}
