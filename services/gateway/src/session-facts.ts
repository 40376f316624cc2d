/**
 * Workflow Session facts at the gateway: what a call made with session_id leaves in its
 * Session (counts, Job state, outcome, the paths read or changed with their read_revision, a
 * run's command summary and exit code — never contents), and the model-facing projection of
 * a handoff. Both are pure.
 */
import type { SessionHandoff, SessionPath, SessionValidation, ValidationRecap } from "@webcodex/proto";
import { CallOutcome, callOutcomeOrUnknown, waitForJobFollowUp } from "@webcodex/contracts";
import type { ToolDefinition } from "@webcodex/contracts";
import type { Outcome } from "./call-context.js";

/** The SessionCall fields the gateway derives from a canonical outcome. */
export interface SessionCallFacts {
  outcome: CallOutcome;
  reasonCode: string;
  detailCode: string;
  pathsCount: number;
  changedPathsCount: number;
  jobId: string;
  jobState: "" | "pending" | "terminal";
  /** Set when the result is a validation verdict (status and counts only). */
  validation?: SessionValidationFacts;
  /** The SessionPath message's fields. */
  paths: Array<Omit<SessionPath, "$typeName" | "$unknown">>;
  commandSummary: string;
  exitCode?: number;
}

/** A validation result's verdict and counts (the Session's and the audit row's view of it): the SessionValidation message's fields. */
export type SessionValidationFacts = Omit<SessionValidation, "$typeName" | "$unknown">;

const VALIDATION_STATUSES = new Set(["passed", "failed", "error", "unparsed"]);

/**
 * The verdict of a StructuredValidation result (project_validate, cargo_check, cargo_test,
 * go_test, or the wait that returned such a Job's end): status, providers and summed counts.
 * Undefined for any other result. Never messages, paths or commands.
 */
export function validationVerdict(result: Record<string, unknown>): (SessionValidationFacts & { providers: string[] }) | undefined {
  const status = result["status"];
  if (typeof status !== "string" || !VALIDATION_STATUSES.has(status) || !Array.isArray(result["checks"]) || !Array.isArray(result["failures"]))
    return undefined;
  const v = { status, providers: [] as string[], testsPassed: 0, testsFailed: 0, testsSkipped: 0, errors: 0, warnings: 0 };
  const providers = new Set<string>();
  const num = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? count(x) : 0);
  for (const c of result["checks"]) {
    const check = record(c);
    if (typeof check["provider"] === "string" && /^[a-z]{1,16}$/u.test(check["provider"])) providers.add(check["provider"]);
    const tests = record(check["tests"]);
    const diagnostics = record(check["diagnostics"]);
    v.testsPassed += num(tests["passed"]);
    v.testsFailed += num(tests["failed"]);
    v.testsSkipped += num(tests["skipped"]);
    v.errors += num(diagnostics["errors"]);
    v.warnings += num(diagnostics["warnings"]);
  }
  v.providers = [...providers].sort();
  return v;
}

/** Most paths one call record carries (the resolver's bound). */
const PATHS_PER_CALL = 64;
const COMMAND_MAX = 200;

/** The paths a canonical success read or changed, with the revision each file has after the call. */
function pathFacts(def: ToolDefinition, r: Record<string, unknown>): SessionCallFacts["paths"] {
  const out: SessionCallFacts["paths"] = [];
  const add = (path: unknown, revision: unknown, changed: boolean) => {
    if (typeof path === "string" && path !== "" && out.length < PATHS_PER_CALL)
      out.push({ path, readRevision: typeof revision === "string" ? revision : "", changed });
  };
  if (def.name === "read_files")
    for (const item of list(r["items"])) if (record(item)["success"] !== false) add(record(item)["path"], record(item)["read_revision"], false);
  if (def.name === "search_file_context") add(r["path"], r["read_revision"], false);
  if (def.name === "edit_project_files" && r["dry_run"] === false) {
    for (const f of list(r["files"])) {
      const file = record(f);
      if (file["kind"] === "move") add(file["path"], "", true);
      add(file["destination"] ?? file["path"], file["read_revision"], file["changed"] === true);
    }
  }
  return out;
}

/** A run call's command as the model would recognise it, cut to COMMAND_MAX characters. */
function commandOf(def: ToolDefinition, args: Record<string, unknown>, r: Record<string, unknown>): string {
  if (def.effect !== "process_execution") return "";
  const summary =
    typeof r["command_summary"] === "string"
      ? r["command_summary"]
      : typeof args["command"] === "string"
        ? args["command"]
        : Array.isArray(args["args"])
          ? (args["args"] as unknown[]).map(String).join(" ")
          : typeof args["language"] === "string"
            ? `${args["language"]} script`
            : "";
  return [...summary].slice(0, COMMAND_MAX).join("");
}

const COUNT_MAX = 1_000_000;
const count = (n: number) => Math.min(COUNT_MAX, Math.max(0, n));
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const record = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {});

/** Paths a canonical result read or touched: read items, listed/changed paths, or distinct search hits. */
function pathsOf(result: Record<string, unknown>): number {
  if (Array.isArray(result["items"])) return result["items"].length;
  if (Array.isArray(result["paths"])) return result["paths"].length;
  if (Array.isArray(result["results"])) {
    const hits = new Set<string>();
    for (const query of result["results"]) for (const m of list(record(query)["matches"])) hits.add(String(record(m)["path"]));
    return hits.size;
  }
  return 0;
}

/** Paths a workspace write actually changed; a dry run changes none. */
function changedPathsOf(def: ToolDefinition, result: Record<string, unknown>): number {
  if (def.effect !== "workspace_write" || result["dry_run"] === true || result["changed"] === false) return 0;
  if (Array.isArray(result["files"])) return result["files"].filter((f) => record(f)["changed"] === true).length;
  return list(result["paths"]).length;
}

const JOB_STATE: Record<string, SessionCallFacts["jobState"]> = { pending: "pending", running: "pending", completed: "terminal", failed_to_start: "terminal" };

export function sessionCallFacts(def: ToolDefinition, outcome: Outcome, args: Record<string, unknown> = {}): SessionCallFacts {
  if (!outcome.ok) {
    const f = outcome.failure;
    return {
      outcome: f.outcome_unknown ? CallOutcome.unknown : CallOutcome.failure,
      reasonCode: f.reason_code,
      detailCode: f.detail_code ?? "",
      pathsCount: 0,
      changedPathsCount: 0,
      jobId: "",
      jobState: "",
      paths: [],
      commandSummary: commandOf(def, args, {}),
    };
  }
  const r = outcome.result;
  const state = typeof r["execution_state"] === "string" ? r["execution_state"] : "";
  const jobState = JOB_STATE[state] ?? "";
  const jobId = jobState !== "" && typeof r["job_id"] === "string" ? r["job_id"] : "";
  const verdict = validationVerdict(r);
  // A wait on a Job the Runner no longer knows: its fate is unknown, not failed.
  const unknown = state === "unknown";
  return {
    outcome: unknown ? CallOutcome.unknown : state === "pending" ? CallOutcome.pending : CallOutcome.success,
    reasonCode: unknown && typeof r["reason_code"] === "string" ? r["reason_code"] : "",
    detailCode: "",
    pathsCount: count(pathsOf(r)),
    changedPathsCount: count(changedPathsOf(def, r)),
    jobId,
    jobState: jobId === "" ? "" : jobState,
    ...(verdict
      ? {
          validation: {
            status: verdict.status,
            testsPassed: verdict.testsPassed,
            testsFailed: verdict.testsFailed,
            testsSkipped: verdict.testsSkipped,
            errors: verdict.errors,
            warnings: verdict.warnings,
          },
        }
      : {}),
    paths: pathFacts(def, r),
    commandSummary: commandOf(def, args, r),
    ...(typeof r["exit_code"] === "number" ? { exitCode: r["exit_code"] } : {}),
  };
}

const iso = (ms: bigint) => new Date(Number(ms)).toISOString();

/** One recorded validation result: tool, verdict and the non-zero counts (never messages or paths). */
export function validationView(v: ValidationRecap): Record<string, unknown> {
  const x = v.validation;
  const tests =
    x && x.testsPassed + x.testsFailed + x.testsSkipped > 0 ? { tests: { passed: x.testsPassed, failed: x.testsFailed, skipped: x.testsSkipped } } : {};
  const diagnostics = x && x.errors + x.warnings > 0 ? { diagnostics: { errors: x.errors, warnings: x.warnings } } : {};
  return { seq: Number(v.seq), tool: v.tool, status: x?.status ?? "", ...tests, ...diagnostics, at: iso(v.atUnixMs) };
}

/**
 * The model-facing recap of a Session: what was read, changed and run, what is still
 * pending, and the latest calls, each list already bounded by the resolver. Both Session
 * identities appear here (bootstrap/handoff may show both); zero-valued extras are omitted.
 */
export function handoffView(h: SessionHandoff): Record<string, unknown> {
  const s = h.session;
  const n = Number;
  const view: Record<string, unknown> = {
    session_ref: h.sessionRef,
    session_id: s?.sessionId ?? "",
    project: s?.projectCanonicalId ?? "",
    state: s?.state ?? "",
  };
  if (s?.title) view["title"] = s.title;
  if (s) {
    view["created_at"] = iso(s.createdUnixMs);
    view["last_activity_at"] = iso(s.lastActivityUnixMs);
    if (s.closedUnixMs > 0n) view["closed_at"] = iso(s.closedUnixMs);
  }
  view["calls"] = {
    total: n(h.callsTotal),
    failed: n(h.callsFailed),
    ...(h.callsOutcomeUnknown > 0n ? { outcome_unknown: n(h.callsOutcomeUnknown) } : {}),
    ...(h.callsDropped > 0n ? { dropped: n(h.callsDropped) } : {}),
  };
  view["read"] = { calls: n(h.read?.calls ?? 0n), paths: n(h.read?.paths ?? 0n), failed: n(h.read?.failed ?? 0n) };
  view["changed"] = { calls: n(h.changed?.calls ?? 0n), paths: n(h.changed?.paths ?? 0n), failed: n(h.changed?.failed ?? 0n) };
  view["run"] = { calls: n(h.run?.calls ?? 0n), failed: n(h.run?.failed ?? 0n) };
  if (h.paths.length > 0) {
    view["paths"] = h.paths.map((p) => ({
      path: p.path,
      ...(p.readRevision ? { read_revision: p.readRevision } : {}),
      ...(p.changed ? { changed: true } : {}),
    }));
    if (h.pathsTruncated) view["paths_truncated"] = true;
  }
  if (h.commands.length > 0) {
    view["commands"] = h.commands.map((c) => ({
      tool: c.tool,
      command: c.commandSummary,
      outcome: callOutcomeOrUnknown(c.outcome),
      ...(c.exitCode !== undefined ? { exit_code: c.exitCode } : {}),
    }));
    if (h.commandsTruncated) view["commands_truncated"] = true;
  }
  // Each pending Job with the exact call that collects it, recorded into the same Session.
  view["pending_jobs"] = h.pendingJobs.map((j) => ({
    job_id: j.jobId,
    tool: j.tool,
    since: iso(j.sinceUnixMs),
    ...(s ? { follow_up: waitForJobFollowUp(s.projectCanonicalId, j.jobId, h.sessionRef || s.sessionId) } : {}),
  }));
  if (h.pendingJobsTotal > BigInt(h.pendingJobs.length)) view["pending_jobs_total"] = n(h.pendingJobsTotal);
  view["tools"] = h.callsByTool.map((t) => ({ tool: t.tool, calls: n(t.calls), ...(t.failed > 0n ? { failed: n(t.failed) } : {}) }));
  view["recent_calls"] = h.recentCalls.map((c) => ({
    seq: n(c.seq),
    tool: c.tool,
    outcome: callOutcomeOrUnknown(c.outcome),
    ...(c.reasonCode ? { reason_code: c.reasonCode } : {}),
    // An outcome-unknown write cut off by a Runner crash: how the Runner's recovery finished it.
    ...(c.recovered ? { recovered: c.recovered } : {}),
    // A call a run_code_cell made: that cell's call_id (the parent_call_id of its audit row too).
    ...(c.parentCallId ? { parent_call_id: c.parentCallId } : {}),
    at: iso(c.atUnixMs),
  }));
  if (h.validations.length > 0) {
    view["validations"] = h.validations.map(validationView);
  }
  if (h.truncated) view["truncated"] = true;
  return view;
}
