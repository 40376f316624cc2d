/**
 * Every reason code the runtime emits, with what a caller can do about it: whether the same
 * call may be retried, and the follow-up the failure carries (by builder name), or the
 * recorded reason it carries none. Keyed by ReasonCode, so a new code does not compile until
 * it has a row here; the contract test iterates this table and the results-and-failures
 * reference (docs/results.md) is generated from it.
 */
import type { ReasonCode } from "./failure.js";
import type { PipelineStage } from "./pipeline.js";
import type { followUpBuilders } from "./follow-up.js";

/**
 * Whether to call again: `same_call` — nothing ran and the condition is transient, so the same
 * call may succeed later; `change_first` — the same call fails the same way, change the input
 * (or the workspace) first; `inspect_first` — the effect may have happened: inspect before any
 * retry; `no` — retrying cannot help this caller.
 */
export type RetryPosture = "same_call" | "change_first" | "inspect_first" | "no";

export type FollowUpBuilderName = keyof typeof followUpBuilders;

export interface ReasonCodeRow {
  /** The stages at which the runtime decides this code. */
  stages: readonly PipelineStage[];
  retry: RetryPosture;
  /** One line: what it means to the caller. */
  meaning: string;
  /** The follow-up every failure with this code carries (detail-specific ones in `detail_follow_ups`). */
  follow_up?: FollowUpBuilderName;
  /** detail_code → the follow-up a failure with that detail carries. */
  detail_follow_ups?: Readonly<Record<string, FollowUpBuilderName>>;
  /** Why a failure with this code (or with other details) carries no follow-up. */
  no_follow_up?: string;
}

const NEEDS_INPUT = "The repair needs a choice only the caller can make (a different value); the evidence names the field.";

export const reasonCodeTable: Readonly<Record<ReasonCode, ReasonCodeRow>> = {
  unknown_tool: {
    stages: ["admission"],
    retry: "change_first",
    meaning: "No tool has this name.",
    no_follow_up: "The intended tool is a guess only the caller can make; list_tools names every admitted tool.",
  },
  unknown_field: {
    stages: ["normalization"],
    retry: "change_first",
    meaning: "An argument the tool's schema does not have; never fuzzy-corrected. The evidence names the fields accepted there (accepted_fields).",
    follow_up: "readToolManifestFollowUp",
  },
  invalid_value: {
    stages: ["admission", "normalization", "resolution", "authorization", "preflight", "execution"],
    retry: "change_first",
    meaning: "An argument has a value the tool does not accept (detail_code says which rule).",
    detail_follow_ups: {
      session_not_found: "createSessionFollowUp",
      session_closed: "createSessionFollowUp",
      session_project_mismatch: "createSessionFollowUp",
      cursor_invalid: "restartListFollowUp",
      cursor_expired: "restartListFollowUp",
    },
    no_follow_up: `${NEEDS_INPUT} A session_id that names no open Session of this project carries create_session (fallback_recovery) when the call named a project.`,
  },
  missing_field: {
    stages: ["normalization", "preflight"],
    retry: "change_first",
    meaning: "A required argument is absent. The evidence names the fields accepted there (accepted_fields, required_fields).",
    follow_up: "readToolManifestFollowUp",
  },
  conflicting_alias: {
    stages: ["normalization"],
    retry: "change_first",
    meaning: "An alias and its canonical field were both given with different values.",
    no_follow_up: "Which of the two values was meant is the caller's choice.",
  },
  tool_not_admitted: {
    stages: ["admission"],
    retry: "no",
    meaning: "The tool exists but is not admitted for this caller.",
    no_follow_up: "No call grants admission; list_tools shows what is admitted.",
  },
  upstream_schema_changed: {
    stages: ["authorization"],
    retry: "change_first",
    meaning: "The upstream tool's input schema changed since the binding was described (schema_hash differs); nothing was sent.",
    follow_up: "describeUpstreamToolFollowUp",
  },
  binding_project_mismatch: {
    stages: ["authorization"],
    retry: "change_first",
    meaning: "The binding is bound to one Project and the call named another (or none); nothing was sent.",
    follow_up: "describeUpstreamToolFollowUp",
  },
  upstream_authorization_required: {
    stages: ["authorization"],
    retry: "change_first",
    meaning:
      "The upstream MCP server needs the user's own authorization (per-user OAuth), never given or revoked; nothing was sent. The user opens evidence.authorization_url once; then the follow-up works.",
    follow_up: "describeUpstreamToolFollowUp",
    detail_follow_ups: { listing: "listUpstreamToolsFollowUp" },
  },
  upstream_unavailable: {
    stages: ["dispatch"],
    retry: "inspect_first",
    meaning:
      "The upstream MCP server was not reached or gave no answer in time; with outcome_unknown the call was sent and its effect is unknown (WebCodex never re-sends it).",
    no_follow_up: "Whether the upstream acted is known only to the upstream; with outcome_unknown false the same call is the repair.",
  },
  presentation_tool_not_callable: {
    stages: ["admission"],
    retry: "change_first",
    meaning: "A presentation tool was sent through call_runtime_tool.",
    no_follow_up: "Presentation tools are called directly by the Host, and only App-enabled Hosts list them.",
  },
  project_not_found: {
    stages: ["resolution", "authorization"],
    retry: "change_first",
    meaning: "No such project for this caller (identical for missing and not yours).",
    follow_up: "listProjectsFollowUp",
  },
  stale_ref: { stages: ["resolution"], retry: "change_first", meaning: "The project_ref no longer names a live project.", follow_up: "listProjectsFollowUp" },
  unauthenticated: {
    stages: ["admission"],
    retry: "no",
    meaning: "No valid credentials (answered at the transport as HTTP 401).",
    no_follow_up: "Credentials come from the Host's authorization flow, not from a tool call.",
  },
  insufficient_scope: {
    stages: ["admission"],
    retry: "no",
    meaning: "The token lacks the scope this tool needs.",
    no_follow_up: "Scopes come from the Host's authorization flow, not from a tool call.",
  },
  rate_limited: {
    stages: ["admission", "preflight", "dispatch"],
    retry: "same_call",
    meaning: "Too many calls or Jobs right now; nothing was run (evidence says when to retry).",
    no_follow_up: "The same call is the repair, after the wait the evidence names.",
  },
  quota_exceeded: {
    stages: ["dispatch"],
    retry: "same_call",
    meaning: "A tenant quota is used up (evidence: quota, limit, use); nothing was run.",
    follow_up: "waitForProjectFollowUp",
  },
  project_exists: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "A project with this name already exists in the caller's tenant; nothing was created.",
    no_follow_up: "Another name, or using the existing project, is the caller's choice.",
  },
  not_project_owner: {
    stages: ["authorization"],
    retry: "no",
    meaning: "Only the project's owner or a tenant admin may change or delete it; nothing was changed.",
    no_follow_up: "No call grants ownership; the owner or a tenant admin makes the change.",
  },
  clone_failed: {
    stages: ["execution"],
    retry: "change_first",
    meaning: "The repository could not be cloned (detail_code: bad URL, missing ref, refused credential); no project was left behind.",
    no_follow_up: "The evidence shows why; a different URL or ref, or the operator's credential, is the repair.",
  },
  path_outside_project: {
    stages: ["resolution", "preflight"],
    retry: "change_first",
    meaning: "The path leaves the project (absolute, .., or a symlink out). An absolute path inside the project carries project_path, the path to retry with.",
    no_follow_up: NEEDS_INPUT,
  },
  sensitive_path: { stages: ["resolution"], retry: "no", meaning: "The path is protected from writes by policy.", no_follow_up: "No call lifts the policy." },
  path_not_found: {
    stages: ["resolution", "preflight"],
    retry: "change_first",
    meaning:
      "The path does not exist. A file an edit, delete, move or guarded import names carries existing_parent (its nearest existing directory) and similar_paths (that directory's entries most like it).",
    no_follow_up: "Which path was meant is the caller's choice; similar_paths, list_project_files or search_project_texts give candidates.",
  },
  path_exists: {
    stages: ["preflight"],
    retry: "change_first",
    meaning:
      "A create, move or import target already exists; a regular file there carries its current_read_revision (to edit, delete or overwrite it without a read).",
    no_follow_up: "Whether to edit, overwrite or pick another path is the caller's choice.",
  },
  not_a_file: { stages: ["resolution", "preflight"], retry: "change_first", meaning: "The path is a directory or special file.", no_follow_up: NEEDS_INPUT },
  binary_file: { stages: ["preflight"], retry: "no", meaning: "The file is binary; text tools do not change it.", no_follow_up: "No text call repairs it." },
  file_too_large: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "The file is too large for the tool to handle whole.",
    no_follow_up: "A narrower range or another tool is the caller's choice.",
  },
  stale_read_revision: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "The file changed since it was read; nothing was written.",
    follow_up: "rereadFollowUp",
    no_follow_up: "A failure whose evidence names no single file (a batch-level check) carries none.",
  },
  expected_match_count_mismatch: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "The observed match count differs from expected_match_count; nothing was written.",
    follow_up: "rereadFollowUp",
  },
  match_not_found: {
    stages: ["preflight"],
    retry: "change_first",
    meaning:
      "old_text does not occur in the file. The evidence carries the file's current_read_revision and the nearest lines (nearest: the current lines most like old_text).",
    follow_up: "rereadFollowUp",
  },
  match_not_unique: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "old_text occurs more than once and no occurrence or count was given.",
    no_follow_up: "The evidence lists the match lines; which one is meant is the caller's choice.",
  },
  occurrence_out_of_range: {
    stages: ["preflight"],
    retry: "change_first",
    meaning: "occurrence is larger than the number of matches.",
    no_follow_up: NEEDS_INPUT,
  },
  overlapping_edits: { stages: ["preflight"], retry: "change_first", meaning: "Two edits of one file overlap.", no_follow_up: NEEDS_INPUT },
  apply_failed: {
    stages: ["apply"],
    retry: "inspect_first",
    meaning: "A write failed after preflight; state_changed says whether anything was written.",
    no_follow_up: "Which files to inspect is in the evidence; a re-read of the named file is one read_files call.",
  },
  runner_unavailable: {
    stages: ["dispatch"],
    retry: "same_call",
    meaning:
      "No Runner serves the project right now; nothing was run (detail runner_starting: one is on its way, after retry_after_ms; runner_unschedulable: its pod cannot start, with the pod's condition; runner_crash_loop, runner_image_pull, runner_config_error, runner_create_forbidden: that condition, with its message).",
    detail_follow_ups: {
      runner_starting: "waitForProjectFollowUp",
      runner_unschedulable: "waitForProjectFollowUp",
      runner_crash_loop: "waitForProjectFollowUp",
      runner_image_pull: "waitForProjectFollowUp",
      runner_config_error: "waitForProjectFollowUp",
      runner_create_forbidden: "waitForProjectFollowUp",
    },
    no_follow_up: "Otherwise (no_live_runner, runner_lost) the same call is the repair once a Runner serves the project.",
  },
  runner_lost: {
    stages: ["dispatch", "execution"],
    retry: "inspect_first",
    meaning: "The Runner's connection broke during the call; with outcome_unknown the effect is unknown.",
    follow_up: "inspectWorkspaceFollowUp",
    no_follow_up: "A read-only call that was cut carries none: nothing can have changed, the same call is the repair.",
  },
  capability_missing: {
    stages: ["dispatch"],
    retry: "no",
    meaning: "The project's Runner lacks a capability this call needs; nothing was run.",
    no_follow_up: "The evidence names the missing capability; no call adds it.",
  },
  fence_rejected: {
    stages: ["dispatch", "authorization"],
    retry: "no",
    meaning:
      "The call carried a Runner lease fence or an Agent controller generation that is no longer the current one (stale_fence, route_stale, controller_generation_mismatch); no Attempt is involved and nothing was run.",
    no_follow_up:
      "A stale lease fence or route is the dispatch's own (the gateway re-routes a route_stale call once); a controller generation mismatch needs the caller's current generation, which only it can re-read.",
  },
  fence_stale: {
    stages: ["authorization"],
    retry: "no",
    meaning:
      "The Attempt the call names (its tuple or attempt_ref) no longer holds its Task's fence, or the tuple is not that Attempt's: taken over, lapsed, ended or rotated; nothing was done.",
    follow_up: "readAgentTaskFollowUp",
  },
  lease_held: {
    stages: ["preflight"],
    retry: "same_call",
    meaning: "Another Attempt holds this Task's live lease; nothing was started (evidence says until when).",
    follow_up: "readAgentTaskFollowUp",
  },
  execution_failed: {
    stages: ["execution"],
    retry: "change_first",
    meaning: "A helper process the tool runs failed (evidence carries its stderr tail).",
    no_follow_up: "The evidence shows why; the repair depends on it.",
  },
  job_not_found: {
    stages: ["observation"],
    retry: "no",
    meaning: "No Job with this id in this project.",
    no_follow_up: "Job ids come from pending results; none can be recovered by a call.",
  },
  skill_not_found: {
    stages: ["resolution"],
    retry: "change_first",
    meaning: "No readable skill with this name in the project's skills or your tenant's catalog (detail_code says which), or no such resource in it.",
    no_follow_up: "Which skill to read is the caller's choice; list_skills names every skill it can read.",
  },
  not_a_git_repository: {
    stages: ["resolution"],
    retry: "no",
    meaning: "The project is not a git repository, so git review tools have nothing to compare.",
    no_follow_up: "No call makes it one.",
  },
  git_failed: {
    stages: ["observation"],
    retry: "change_first",
    meaning: "git itself failed (evidence carries its stderr tail).",
    no_follow_up: "The evidence shows why; the repair depends on it.",
  },
  dependency_unavailable: {
    stages: ["admission", "resolution", "dispatch", "execution", "observation", "record"],
    retry: "same_call",
    meaning: "A platform service did not answer; outcome_unknown says whether the effect may have happened.",
    follow_up: "inspectWorkspaceFollowUp",
    no_follow_up:
      "Only a workspace effect (an edit or a process) that may have happened (outcome_unknown) carries the inspection; otherwise nothing in the workspace can have changed and the same call is the repair.",
  },
  internal: {
    stages: ["dispatch", "execution"],
    retry: "inspect_first",
    meaning: "An unexpected runtime error; outcome_unknown says whether the effect may have happened.",
    follow_up: "inspectWorkspaceFollowUp",
    no_follow_up: "Only a workspace effect (an edit or a process) that may have happened (outcome_unknown) carries the inspection; no other repair is known.",
  },
};

/** The follow-up builders a failure with this code and detail carries (none when the row records why). */
export function failureFollowUpBuilder(reason: ReasonCode, detail?: string): FollowUpBuilderName | undefined {
  const row = reasonCodeTable[reason];
  return (detail !== undefined ? row.detail_follow_ups?.[detail] : undefined) ?? row.follow_up;
}
