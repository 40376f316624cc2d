/**
 * The validation tools on the Runner: project_validate, cargo_check, cargo_test, go_test.
 * Each call is one Job (the validation process, cli.js, in its own process group) with the
 * run_* wait_ms/timeout_ms rules: done within wait_ms → the StructuredValidation result, else
 * pending with its job_id; wait_for_job_terminal then returns the same structured result.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fail, PipelineStage, ReasonCode, runnerCapabilityWire } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import type { Executor, RunResult, TerminalResult } from "../exec/index.js";
import { CHECK_KINDS, isCheckKind } from "./types.js";
import type { StructuredValidation } from "./types.js";
import type { ValidationRequest } from "./cli.js";

const CLI = fileURLToPath(new URL("./cli.js", import.meta.url));

/**
 * What the validation process must see, read-only, when it runs in the Job sandbox (where only
 * system directories and the workspace are visible): its own modules, the package.json that
 * makes them ES modules, the node_modules its one dependency (fast-xml-parser) resolves
 * from, and the Node binary's directory when it is not a system one. Code only: nothing of the Runner's state, data or credentials.
 */
export function validationProcessPaths(): string[] {
  const dir = path.dirname(CLI);
  const packageJson = path.resolve(dir, "../../package.json");
  const parser = fileURLToPath(import.meta.resolve("fast-xml-parser"));
  const marker = `${path.sep}node_modules${path.sep}`;
  const nodeModules = parser.slice(0, parser.lastIndexOf(marker) + marker.length - 1);
  // The Node binary running the Runner: a system one is already visible; another (an nvm or
  // npm-installed Node) is shown read-only with its directory, where the validators find `node`.
  const nodeBin = path.dirname(process.execPath);
  const system = ["/usr/", "/bin/", "/lib/", "/opt/"].some((d) => nodeBin.startsWith(d) || `${nodeBin}/` === d);
  return system ? [dir, packageJson, nodeModules] : [dir, packageJson, nodeModules, nodeBin];
}
const RAW_TAIL_CHARS = 1_500;

type Args = Record<string, unknown>;
export type ValidationTool = ValidationRequest["tool"];

function invalid(field: string, detail: string, message: string): never {
  return fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: detail, evidence: { field }, message });
}

/** A project-relative path: no absolute path, no `..` escape (the Runner's last check). */
function checkPaths(field: string, value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((p) => typeof p !== "string" || p === "" || p.includes("\0")))
    invalid(field, `${field}_invalid`, `${field} must be project-relative paths.`);
  for (const p of value as string[]) {
    if (p.startsWith("/") || p.split("/").includes("..")) {
      fail(ReasonCode.pathOutsideProject, PipelineStage.preflight, { detail_code: "path_outside_project", evidence: { field, path: p.slice(0, 200) } });
    }
    if (p.startsWith("-")) invalid(field, `${field}_invalid`, `${field} entries are paths, not options.`);
  }
  return value as string[];
}

/** A value passed to a validator as an argument must never read as one of its options. */
function checkArgument(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "" || value.startsWith("-") || value.includes("\0"))
    invalid(field, `${field}_invalid`, `${field} must be a non-empty value that does not start with '-'.`);
  return value;
}

/** The canonical arguments the validation process gets (checked here, the last line before a process). */
export function validationArgs(tool: ValidationTool, a: Args): Args {
  switch (tool) {
    case "project_validate": {
      const checks = a["checks"];
      if (checks !== undefined && (!Array.isArray(checks) || checks.some((c) => !isCheckKind(c))))
        invalid("checks", "checks_invalid", `checks are among ${CHECK_KINDS.join(", ")}.`);
      const paths = checkPaths("paths", a["paths"]);
      return { ...(checks ? { checks } : {}), ...(paths ? { paths } : {}) };
    }
    case "cargo_check": {
      const pkg = checkArgument("package", a["package"]);
      if (a["all_targets"] !== undefined && typeof a["all_targets"] !== "boolean") invalid("all_targets", "all_targets_invalid", "all_targets is a boolean.");
      return { ...(pkg ? { package: pkg } : {}), ...(a["all_targets"] === true ? { all_targets: true } : {}) };
    }
    case "cargo_test": {
      const pkg = checkArgument("package", a["package"]);
      const filter = checkArgument("test_filter", a["test_filter"]);
      return { ...(pkg ? { package: pkg } : {}), ...(filter ? { test_filter: filter } : {}) };
    }
    case "go_test": {
      const packages = a["packages"];
      if (
        packages !== undefined &&
        (!Array.isArray(packages) ||
          packages.some((p) => typeof p !== "string" || p === "" || p.startsWith("-") || p.startsWith("/") || p.split("/").includes("..")))
      ) {
        invalid("packages", "packages_invalid", "packages are package patterns inside the module such as ./... or ./pkg/...");
      }
      const run = checkArgument("run", a["run"]);
      return { ...(packages ? { packages } : {}), ...(run ? { run } : {}) };
    }
  }
}

function rawTail(text: string): string {
  const t = text.trimEnd();
  return t.length <= RAW_TAIL_CHARS ? t : `…${t.slice(t.length - RAW_TAIL_CHARS + 1)}`;
}

function isValidation(v: unknown): v is StructuredValidation {
  const r = v as StructuredValidation | undefined;
  return (
    typeof r === "object" &&
    r !== null &&
    typeof r.status === "string" &&
    Array.isArray(r.checks) &&
    Array.isArray(r.failures) &&
    typeof r.truncated === "boolean"
  );
}

/**
 * The validation Job's terminal result from its process's: the structured result the process
 * printed, or, when it did not finish (killed, timed out, cancelled, crashed, output cut), a
 * truthful `error` saying why. Never `passed` without the process's own complete answer.
 */
export function validationTerminal(r: TerminalResult): TerminalResult {
  const life = {
    execution_state: r.execution_state,
    job_id: r.job_id,
    state: r.state,
    duration_ms: r.duration_ms,
    started_at: r.started_at,
    ...(r.effective ? { effective: r.effective } : {}),
    ...(r.outcome_unknown ? { outcome_unknown: true as const } : {}),
  };
  if (r.execution_state === "failed_to_start") {
    return {
      ...life,
      error_code: r.error_code,
      status: "error",
      checks: [],
      failures: [{ check: "test", message: "The validation process could not be started; nothing ran." }],
      truncated: false,
    } as unknown as TerminalResult;
  }
  const exit = { exit_code: r.exit_code, signal: r.signal, timed_out: r.timed_out };
  let parsed: unknown;
  if (r.state === "completed" && (r.exit_code === 0 || r.exit_code === 1) && r.omitted_bytes?.stdout === undefined) {
    try {
      parsed = JSON.parse(r.stdout);
    } catch {
      parsed = undefined;
    }
  }
  // The process's exit code only mirrors the verdict it printed (`status`), so it is not repeated;
  // a run where nothing was detected has no exit code of any validator to report.
  if (isValidation(parsed)) return { ...life, ...parsed } as unknown as TerminalResult;
  const detail = r.timed_out ? "timed_out" : r.state === "cancelled" ? "cancelled" : r.signal !== null ? "killed" : "validator_crashed";
  return {
    ...life,
    ...exit,
    status: "error",
    detail,
    checks: [],
    failures: [],
    truncated: false,
    ...(r.stderr.trim() !== "" ? { raw_tail: rawTail(r.stderr) } : {}),
  } as unknown as TerminalResult;
}

/** Validation capability rows this Runner advertises, as the validation process needs them (wire names). */
export interface ValidationToolsDeps {
  executor: Executor;
  /** Awaited per call: the Runner's list is complete once its toolchain probes answered. */
  capabilities: () => readonly RunnerCapabilityId[] | Promise<readonly RunnerCapabilityId[]>;
}

export async function runValidation(deps: ValidationToolsDeps, tool: ValidationTool, a: Args, signal: AbortSignal): Promise<RunResult> {
  const request: ValidationRequest = { tool, args: validationArgs(tool, a), capabilities: (await deps.capabilities()).map(runnerCapabilityWire) };
  return deps.executor.runDerived(
    {
      kind: "validation",
      args: [process.execPath, CLI],
      stdin: JSON.stringify(request),
      env: { RUST_BACKTRACE: "0", CARGO_TERM_COLOR: "never", NO_COLOR: "1", FORCE_COLOR: "0", CI: "1" },
      ...(typeof a["timeout_ms"] === "number" ? { timeout_ms: a["timeout_ms"] } : {}),
      ...(typeof a["wait_ms"] === "number" ? { wait_ms: a["wait_ms"] } : {}),
      finish: validationTerminal,
    },
    signal,
  );
}
