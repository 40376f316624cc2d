/**
 * Structured failures. A failure is a business fact the model must decide on, so it carries
 * stable codes rather than prose: reason_code (what), failure_stage (where in the pipeline),
 * detail_code (a bounded refinement), state_changed and outcome_unknown (what it may retry).
 */
import type { FollowUp } from "./follow-up-shape.js";
import type { PipelineStage } from "./pipeline.js";

/** Stable reason codes. Add here; never spell one inline elsewhere. */
export const ReasonCode = {
  // input contract
  unknownTool: "unknown_tool",
  unknownField: "unknown_field",
  invalidValue: "invalid_value",
  missingField: "missing_field",
  conflictingAlias: "conflicting_alias",
  toolNotAdmitted: "tool_not_admitted",
  presentationToolNotCallable: "presentation_tool_not_callable",
  // identity and authority
  projectNotFound: "project_not_found",
  staleRef: "stale_ref",
  unauthenticated: "unauthenticated",
  insufficientScope: "insufficient_scope",
  rateLimited: "rate_limited",
  /** A tenant quota (live Runners) is used up; evidence names the quota, its limit and use. */
  quotaExceeded: "quota_exceeded",
  // project lifecycle
  projectExists: "project_exists",
  notProjectOwner: "not_project_owner",
  cloneFailed: "clone_failed",
  // paths
  pathOutsideProject: "path_outside_project",
  sensitivePath: "sensitive_path",
  pathNotFound: "path_not_found",
  pathExists: "path_exists",
  notAFile: "not_a_file",
  binaryFile: "binary_file",
  /** Too large for the tool to read whole (read_files hashes every byte for read_revision). */
  fileTooLarge: "file_too_large",
  // edits
  staleReadRevision: "stale_read_revision",
  expectedMatchCountMismatch: "expected_match_count_mismatch",
  matchNotFound: "match_not_found",
  matchNotUnique: "match_not_unique",
  occurrenceOutOfRange: "occurrence_out_of_range",
  overlappingEdits: "overlapping_edits",
  applyFailed: "apply_failed",
  // runners and dispatch
  runnerUnavailable: "runner_unavailable",
  runnerLost: "runner_lost",
  capabilityMissing: "capability_missing",
  /** The call's Runner lease fence or Agent controller generation is not the current one (no Attempt involved): nothing ran. */
  fenceRejected: "fence_rejected",
  // agents, tasks and attempts
  /** The Attempt no longer holds its Task's fence (taken over, lease lapsed, ended): nothing was done. */
  fenceStale: "fence_stale",
  /** Another Attempt of the Task holds a live lease: no new Attempt until it ends or lapses. */
  leaseHeld: "lease_held",
  // execution
  executionFailed: "execution_failed",
  jobNotFound: "job_not_found",
  skillNotFound: "skill_not_found",
  // git
  notAGitRepository: "not_a_git_repository",
  gitFailed: "git_failed",
  // upstream MCP servers (mcp_tool)
  /** The upstream tool's schema changed since the binding was described: nothing was sent. */
  upstreamSchemaChanged: "upstream_schema_changed",
  /** A project-bound binding used with another Project: nothing was sent. */
  bindingProjectMismatch: "binding_project_mismatch",
  /** The caller has not authorized WebCodex at this upstream (per-user OAuth), or its authorization was revoked: nothing was sent. */
  upstreamAuthorizationRequired: "upstream_authorization_required",
  /** The upstream MCP server could not be reached or did not answer (outcome_unknown when the call was sent). */
  upstreamUnavailable: "upstream_unavailable",
  // platform
  dependencyUnavailable: "dependency_unavailable",
  internal: "internal",
} as const;
export type ReasonCode = (typeof ReasonCode)[keyof typeof ReasonCode];

const reasonCodes = new Set<string>(Object.values(ReasonCode));
/** The ReasonCode a wire string names, or undefined for one this build does not know. */
export function reasonCodeFromString(value: string): ReasonCode | undefined {
  return reasonCodes.has(value) ? (value as ReasonCode) : undefined;
}

export interface ToolFailure {
  reason_code: ReasonCode;
  failure_stage: PipelineStage;
  detail_code?: string;
  /** True when the workspace or a durable record was changed before the failure. */
  state_changed: boolean;
  /** True when the effect cannot be known (transport lost mid-call): never blindly retry. */
  outcome_unknown: boolean;
  /** Bounded, caller-safe evidence that makes the next call direct. */
  evidence?: Record<string, unknown>;
  /** One short sentence for humans; never the only machine-actionable fact. */
  message?: string;
  follow_up?: FollowUp;
}

export interface FailureOptions {
  detail_code?: string;
  state_changed?: boolean;
  outcome_unknown?: boolean;
  evidence?: Record<string, unknown>;
  message?: string;
  follow_up?: FollowUp;
}

export function toolFailure(reason: ReasonCode, stage: PipelineStage, options: FailureOptions = {}): ToolFailure {
  const failure: ToolFailure = {
    reason_code: reason,
    failure_stage: stage,
    state_changed: options.state_changed ?? false,
    outcome_unknown: options.outcome_unknown ?? false,
  };
  if (options.detail_code !== undefined) failure.detail_code = options.detail_code;
  if (options.evidence !== undefined) failure.evidence = options.evidence;
  if (options.message !== undefined) failure.message = options.message;
  if (options.follow_up !== undefined) failure.follow_up = options.follow_up;
  return failure;
}

/**
 * Thrown by domain code deep in a call; the service boundary turns it into a DomainFailure.
 * Anything else thrown is an internal error and never reaches the model verbatim.
 */
export class ToolFailureError extends Error {
  readonly failure: ToolFailure;
  constructor(failure: ToolFailure) {
    super(failure.message ?? failure.reason_code);
    this.name = "ToolFailureError";
    this.failure = failure;
  }
}

export function fail(reason: ReasonCode, stage: PipelineStage, options: FailureOptions = {}): never {
  throw new ToolFailureError(toolFailure(reason, stage, options));
}

export function isToolFailureError(error: unknown): error is ToolFailureError {
  return error instanceof ToolFailureError;
}
