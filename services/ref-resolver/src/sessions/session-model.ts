/**
 * The pure parts of Workflow Sessions: identities, selector parsing, the bounded call
 * record and its validation, failures, and the handoff recap built from aggregates.
 */
import { randomBytes } from "node:crypto";
import { CallOutcome, callOutcomeFromString, PipelineStage, listProjectsFollowUp, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { RecoveredWrite, SessionCall, SessionPath, SessionValidation } from "@webcodex/proto";
import { parseRef, RefKind } from "../refs/ref-codes.js";

const SESSION_ID = /^wc_sess_[0-9a-f]{32}$/;

/** A new canonical Session id: 128 random bits, never derived from anything guessable. */
export function newSessionId(): string {
  return `wc_sess_${randomBytes(16).toString("hex")}`;
}

export type SessionSelector = { kind: "ref"; code: string } | { kind: "id"; sessionId: string };

/** A session_ref (~s1) or canonical wc_sess_*, exactly; anything else is undefined. */
export function parseSessionSelector(text: string): SessionSelector | undefined {
  const code = parseRef(RefKind.session, text);
  if (code !== undefined) return { kind: "ref", code };
  return SESSION_ID.test(text) ? { kind: "id", sessionId: text } : undefined;
}

export const SESSION_TITLE_MAX = 200;

/** A problem with a title, or undefined. Titles are short labels: no control characters. */
export function titleProblem(title: string): "title_too_long" | "title_control_characters" | undefined {
  if ([...title].length > SESSION_TITLE_MAX) return "title_too_long";
  if (/[\u0000-\u001f\u007f]/.test(title)) return "title_control_characters";
  return undefined;
}

/** A generated message's own fields. */
type ProtoFields<M> = Omit<M, "$typeName" | "$unknown">;

export const SessionEffects = ["read_only", "workspace_write", "process_execution", "durable_state", "presentation"] as const;
export type SessionEffect = (typeof SessionEffects)[number];

/**
 * One bounded record of a call made with session_id: facts only, never arguments or content.
 * The SessionCall message's fields (derived from the generated types, so a proto change
 * breaks the build here); paths and the command summary may be left out.
 */
export type SessionCallInput = Omit<ProtoFields<SessionCall>, "validation" | "paths" | "commandSummary" | "parentCallId"> & {
  /** A validation result's verdict and counts, when the call gave one. */
  validation?: SessionValidationInput;
  /** Paths the call read or changed, with the file's read_revision after the call (never content). */
  paths?: readonly SessionPathInput[];
  /** A run call's command, cut to SESSION_COMMAND_MAX characters. */
  commandSummary?: string;
  /** The call id of the run_code_cell the call was made in ("" or absent: made directly). */
  parentCallId?: string;
};

export type SessionValidationInput = ProtoFields<SessionValidation>;

export const VALIDATION_STATUSES = ["passed", "failed", "error", "unparsed"] as const;

export type SessionPathInput = ProtoFields<SessionPath>;

/** Most paths one call record keeps. */
export const SESSION_CALL_PATHS_MAX = 64;
export const SESSION_PATH_MAX = 1024;
export const SESSION_COMMAND_MAX = 200;

const TOOL = /^[a-z][a-z0-9_]{0,63}$/;
const REASON = /^[a-z][a-z0-9_]{0,63}$/;
const DETAIL = /^[a-z0-9][a-z0-9_.:-]{0,63}$/;
const OPAQUE_ID = /^[\x21-\x7e]{1,128}$/;
const COUNT_MAX = 1_000_000;

/** Why a record is malformed (a caller bug, not a model-facing failure), or undefined. */
export function sessionCallProblem(call: SessionCallInput): string | undefined {
  if (!OPAQUE_ID.test(call.callId)) return "call_id must be 1..128 visible ASCII characters";
  if (call.parentCallId !== undefined && call.parentCallId !== "" && !OPAQUE_ID.test(call.parentCallId))
    return "parent_call_id must be 1..128 visible ASCII characters";
  if (call.parentCallId !== undefined && call.parentCallId === call.callId) return "a call is not its own parent";
  if (!TOOL.test(call.tool)) return "tool must be a tool name";
  if (!(SessionEffects as readonly string[]).includes(call.effect)) return `effect must be one of ${SessionEffects.join(", ")}`;
  if (callOutcomeFromString(call.outcome) === undefined) return `outcome must be one of ${Object.values(CallOutcome).join(", ")}`;
  if (call.reasonCode !== "" && !REASON.test(call.reasonCode)) return "reason_code must be a reason code";
  if (call.detailCode !== "" && !DETAIL.test(call.detailCode)) return "detail_code must be a detail code";
  if (call.outcome === CallOutcome.success && call.reasonCode !== "") return "a successful call has no reason_code";
  for (const [name, value] of [
    ["paths_count", call.pathsCount],
    ["changed_paths_count", call.changedPathsCount],
    ["duration_ms", call.durationMs],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || (name !== "duration_ms" && value > COUNT_MAX)) return `${name} must be a bounded non-negative integer`;
  }
  if (call.durationMs > 2_147_483_647) return "duration_ms is out of range";
  if ((call.jobId === "") !== (call.jobState === "")) return "job_id and job_state go together";
  if (call.jobId !== "" && !OPAQUE_ID.test(call.jobId)) return "job_id must be 1..128 visible ASCII characters";
  if (call.jobState !== "" && call.jobState !== "pending" && call.jobState !== "terminal") return "job_state must be pending or terminal";
  const v = call.validation;
  if (v !== undefined) {
    if (!(VALIDATION_STATUSES as readonly string[]).includes(v.status)) return `validation.status must be one of ${VALIDATION_STATUSES.join(", ")}`;
    for (const value of [v.testsPassed, v.testsFailed, v.testsSkipped, v.errors, v.warnings]) {
      if (!Number.isInteger(value) || value < 0 || value > COUNT_MAX) return "validation counts must be bounded non-negative integers";
    }
  }
  const paths = call.paths ?? [];
  if (paths.length > SESSION_CALL_PATHS_MAX) return `at most ${SESSION_CALL_PATHS_MAX} paths per call`;
  for (const p of paths) {
    if (p.path === "" || p.path.length > SESSION_PATH_MAX || /[\u0000-\u001f\u007f]/.test(p.path))
      return "paths must be 1..1024 characters without control characters";
    if (p.readRevision !== "" && !OPAQUE_ID.test(p.readRevision)) return "read_revision must be 1..128 visible ASCII characters";
  }
  if (call.commandSummary !== undefined && [...call.commandSummary].length > SESSION_COMMAND_MAX)
    return `command_summary must be at most ${SESSION_COMMAND_MAX} characters`;
  if (call.exitCode !== undefined && (!Number.isInteger(call.exitCode) || call.exitCode < -2_147_483_648 || call.exitCode > 2_147_483_647))
    return "exit_code must be an int32";
  return undefined;
}

/** How a Runner's start-up recovery finished an interrupted write transaction. */
export const RecoveredOutcomes = ["rolled_back", "completed"] as const;

/** One interrupted write transaction as a Runner reported it (the RecoveredWrite message's fields). */
export type RecoveredWriteInput = ProtoFields<RecoveredWrite>;

/** Why a reported recovered write cannot be recorded, or undefined. */
export function recoveredWriteProblem(w: RecoveredWriteInput): string | undefined {
  if (!OPAQUE_ID.test(w.callId)) return "call_id must be 1..128 visible ASCII characters";
  if (!TOOL.test(w.tool)) return "tool must be a tool name";
  if (!(RecoveredOutcomes as readonly string[]).includes(w.outcome)) return `outcome must be one of ${RecoveredOutcomes.join(", ")}`;
  return undefined;
}

// ── failures: a foreign Session fails exactly like one that does not exist ──

export function sessionNotFound(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "session_not_found",
    message: "No such session for this caller; create_session starts one.",
  });
}

export function invalidSessionSelector(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "invalid_session_selector",
    message: "session_id must be a session_ref like ~s1 or a wc_sess_* id.",
  });
}

export function sessionProjectUnavailable(): ToolFailure {
  return toolFailure(ReasonCode.projectNotFound, PipelineStage.authorization, {
    detail_code: "session_project_unavailable",
    message: "This session's project is no longer available to you; call list_projects and create a new session.",
    follow_up: listProjectsFollowUp(),
  });
}

export function sessionProjectMismatch(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.authorization, {
    detail_code: "session_project_mismatch",
    message: "This session belongs to another project; pass that project or a session of this one.",
  });
}

export function sessionClosed(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.authorization, {
    detail_code: "session_closed",
    message: "This session is closed; it records no further calls. read_session_handoff still works.",
  });
}

export function invalidTitle(detail: string): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: detail, evidence: { max_chars: SESSION_TITLE_MAX } });
}

// ── handoff ──

export interface CallAggregateRow {
  tool: string;
  effect: string;
  calls: number;
  failed: number;
  unknown: number;
  paths: number;
  changedPaths: number;
  lastMs: number;
}

export interface PendingJobRow {
  jobId: string;
  tool: string;
  sinceMs: number;
}

export interface RecentCallRow {
  seq: number;
  tool: string;
  outcome: CallOutcome;
  reasonCode: string;
  atMs: number;
  /** How the Runner's start-up recovery finished the call's write transaction ("" when it did not). */
  recovered?: string;
  /** The call id of the run_code_cell the call was made in ("" when it was made directly). */
  parentCallId?: string;
}

export interface ValidationRecapRow {
  seq: number;
  tool: string;
  validation: SessionValidationInput;
  atMs: number;
}

export interface HandoffRecap {
  callsTotal: number;
  callsFailed: number;
  callsOutcomeUnknown: number;
  callsByTool: Array<{ tool: string; calls: number; failed: number; lastMs: number }>;
  read: { calls: number; paths: number; failed: number };
  changed: { calls: number; paths: number; failed: number };
  run: { calls: number; paths: number; failed: number };
  pendingJobs: PendingJobRow[];
  pendingJobsTotal: number;
  recentCalls: RecentCallRow[];
  /** The latest validation results, newest first (bounded by the store's query). */
  validations: ValidationRecapRow[];
  truncated: boolean;
}

export const HANDOFF_BOUNDS = { tools: 32, pendingJobs: 20, recentDefault: 10, recentMax: 50, paths: 50, commands: 20, validations: 5 } as const;

/** The handoff's lists of what a fresh turn resumes from: paths with revisions, commands with outcomes. */
export interface HandoffLists {
  paths: SessionPathInput[];
  pathsTruncated: boolean;
  commands: Array<{ tool: string; commandSummary: string; outcome: CallOutcome; exitCode?: number }>;
  commandsTruncated: boolean;
}

/**
 * The bounded recap: per-tool counts (most used first), what was read / changed / run, the
 * Jobs still pending, and the most recent calls in order. Every list is cut to its bound;
 * `truncated` says when the tool or pending-Job list was cut.
 */
export function buildHandoffRecap(
  aggregates: readonly CallAggregateRow[],
  pending: { rows: readonly PendingJobRow[]; total: number },
  recentNewestFirst: readonly RecentCallRow[],
  recentLimit: number,
  validationsNewestFirst: readonly ValidationRecapRow[] = [],
): HandoffRecap {
  const byTool = new Map<string, { tool: string; calls: number; failed: number; lastMs: number }>();
  const bucket = () => ({ calls: 0, paths: 0, failed: 0 });
  const read = bucket();
  const changed = bucket();
  const run = bucket();
  let callsTotal = 0;
  let callsFailed = 0;
  let callsOutcomeUnknown = 0;
  for (const row of aggregates) {
    callsTotal += row.calls;
    callsFailed += row.failed;
    callsOutcomeUnknown += row.unknown;
    const entry = byTool.get(row.tool) ?? { tool: row.tool, calls: 0, failed: 0, lastMs: 0 };
    entry.calls += row.calls;
    entry.failed += row.failed;
    entry.lastMs = Math.max(entry.lastMs, row.lastMs);
    byTool.set(row.tool, entry);
    if (row.effect === "read_only") {
      read.calls += row.calls;
      read.paths += row.paths;
      read.failed += row.failed;
    } else if (row.effect === "workspace_write") {
      changed.calls += row.calls;
      changed.paths += row.changedPaths;
      changed.failed += row.failed;
    } else if (row.effect === "process_execution") {
      run.calls += row.calls;
      run.paths += row.paths;
      run.failed += row.failed;
    }
  }
  const tools = [...byTool.values()].sort((a, b) => b.calls - a.calls || a.tool.localeCompare(b.tool));
  const limit = Math.min(Math.max(recentLimit, 0), HANDOFF_BOUNDS.recentMax);
  const recent = recentNewestFirst.slice(0, limit);
  return {
    callsTotal,
    callsFailed,
    callsOutcomeUnknown,
    callsByTool: tools.slice(0, HANDOFF_BOUNDS.tools),
    read,
    changed,
    run,
    pendingJobs: pending.rows.slice(0, HANDOFF_BOUNDS.pendingJobs),
    pendingJobsTotal: Math.max(pending.total, pending.rows.length),
    recentCalls: [...recent].reverse(),
    validations: validationsNewestFirst.slice(0, HANDOFF_BOUNDS.validations),
    // The recent window is a window by contract (calls_total says how many there are).
    truncated: tools.length > HANDOFF_BOUNDS.tools || Math.max(pending.total, pending.rows.length) > HANDOFF_BOUNDS.pendingJobs,
  };
}
