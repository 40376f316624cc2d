/**
 * The canonical tool catalog. `toolDefinitions()` is the one list.
 */
import { array, bool, int, object, str, stringMap } from "./json-schema.js";
import type { JsonSchema } from "./json-schema.js";
import { ToolCategory } from "./tool-definition.js";
import type { ToolDefinition } from "./tool-definition.js";
import { compactBatch, compactEdit, compactShell } from "./projection.js";

const project = str("project_ref (~p1, from list_projects) or agent:<client_id>:<project_id>.");
const path = str("Project-relative POSIX path.");
const revision = str("read_revision from read_files; fails if the file changed since.");
const timeoutMs = int("Kill after this many ms (default 120000, clamped to 600000).", { minimum: 1 });
const waitMs = int("Return a pending job_id after this many ms (default 10000, clamped to 30000).", { minimum: 0 });
const cwd = str("Project-relative working directory (default: root).");
const env = stringMap("Environment additions; the base environment is scrubbed.");
const jobId = str("job_id from a pending result.");
/** Optional on project tools: the Workflow Session this call is recorded into. Never a target. */
const sessionId = str("session_ref (~s1) or wc_sess_*; records the call there.");

const replaceExact = object({ old_text: str(undefined, { minLength: 1 }), new_text: str() }, ["old_text", "new_text"]);
const textEdit = object(
  {
    replace_exact: replaceExact,
    expected_match_count: int("Replace all N matches only if exactly N exist (1..1024).", { minimum: 1, maximum: 1024 }),
    occurrence: int("Replace only the n-th match (1-based). Not with expected_match_count.", { minimum: 1 }),
    line_scope: object({ start_line: int(undefined, { minimum: 1 }), end_line: int(undefined, { minimum: 1 }) }, ["start_line", "end_line"]),
  },
  ["replace_exact"],
);
const fileChange: JsonSchema = {
  type: "object",
  discriminator: { propertyName: "kind" },
  required: ["kind"],
  oneOf: [
    object({ kind: str(undefined, { const: "edit" }), path, expected_read_revision: revision, edits: array(textEdit, undefined, { minItems: 1 }) }, ["kind", "path", "expected_read_revision", "edits"]),
    object({ kind: str(undefined, { const: "create" }), path, content: str() }, ["kind", "path", "content"]),
    object({ kind: str(undefined, { const: "delete" }), path, expected_read_revision: revision }, ["kind", "path", "expected_read_revision"]),
    object({ kind: str(undefined, { const: "move" }), path, destination: path, expected_read_revision: revision }, ["kind", "path", "destination", "expected_read_revision"]),
  ],
};

const execCommon = { project, cwd, env, timeout_ms: timeoutMs, wait_ms: waitMs, session_id: sessionId };
const execClamps = [
  { path: "timeout_ms", ceiling: 600_000, minimum: 1 },
  { path: "wait_ms", ceiling: 30_000, minimum: 0 },
] as const;

const definitions: readonly ToolDefinition[] = [
  // ── discovery ──
  {
    name: "list_projects",
    category: "discovery",
    description: "List the Projects you can work in, each with its short project_ref (~p1) and canonical id. Pass either as `project` to other tools; refs are durable for you.",
    inputSchema: object({}),
    effect: "read_only", risk: "low", authority: "principal", execution: "ref_resolver",
    direct: { rank: 6, reason: "CoreWorkflow" },
    implemented: true,
  },
  {
    name: "create_project",
    category: "discovery",
    description: "Create a Project in your tenant from a git repository (source.git {url, ref?}; cloned with your operator's credential, never passed here) or empty (source.empty {}). private (default) is visible to you only; tenant shares it. Pending while it starts and clones: follow the returned call to wait.",
    inputSchema: object(
      {
        name: str("Project name, [A-Za-z0-9._-]{1,128}; the id in agent:<tenant>:<name>.", { minLength: 1, maxLength: 128 }),
        source: {
          type: "object",
          description: "Where the workspace starts from: exactly one of git or empty.",
          oneOf: [
            object({ git: object({ url: str("https:// or git:// URL of the repository.", { minLength: 1 }), ref: str("Branch or tag (default: the remote's HEAD).", { minLength: 1 }) }, ["url"]) }, ["git"]),
            object({ empty: object({}) }, ["empty"]),
          ],
        },
        visibility: str(undefined, { enum: ["private", "tenant"], default: "private" }),
        wait_ms: int("Return pending after this many ms (default 10000, clamped to 30000).", { minimum: 0 }),
      },
      ["name", "source"],
    ),
    effect: "durable_state", risk: "medium", authority: "principal", execution: "gateway",
    clamps: [{ path: "wait_ms", ceiling: 30_000, minimum: 0 }],
    implemented: true,
  },
  {
    name: "wait_for_project_ready",
    category: "discovery",
    description: "Wait until a Project created with create_project is ready (its Runner serves it), up to wait_ms; pending again returns the same call to continue. A failed clone reports its reason; nothing was left behind.",
    inputSchema: object({ project: str("agent:<tenant>:<name> from create_project."), wait_ms: int("Wait at most this many ms (default 10000, clamped to 30000).", { minimum: 0 }) }, ["project"]),
    effect: "read_only", risk: "low", authority: "principal", execution: "gateway",
    clamps: [{ path: "wait_ms", ceiling: 30_000, minimum: 0 }],
    implemented: true,
  },
  {
    name: "update_project",
    category: "discovery",
    description: "Change a Project's visibility: private (its owner only) or tenant (everyone in your tenant). Only its owner or a tenant admin may.",
    inputSchema: object({ project, visibility: str(undefined, { enum: ["private", "tenant"] }) }, ["project", "visibility"]),
    effect: "durable_state", risk: "medium", authority: "principal", execution: "ref_resolver",
    implemented: true,
  },
  {
    name: "delete_project",
    category: "discovery",
    description: "Delete a Project: its Runner stops, its refs stop working, and its workspace is deleted unless keep_workspace. Only its owner or a tenant admin may.",
    inputSchema: object({ project, keep_workspace: bool("Keep the workspace files.", { default: false }) }, ["project"]),
    effect: "durable_state", risk: "high", authority: "principal", execution: "gateway",
    implemented: true,
  },
  {
    name: "list_tools",
    category: "discovery",
    description: "List the tools admitted for you, grouped by category. Use read_tool_manifest for one tool's schema.",
    inputSchema: object({ category: str("Only this category.", { enum: Object.values(ToolCategory) }) }),
    effect: "read_only", risk: "low", authority: "principal", execution: "gateway",
    implemented: true,
  },
  {
    name: "read_tool_manifest",
    category: "discovery",
    description: "Exact input schema, description and route {primary, fallback} of one admitted tool. Tools not listed directly are called through call_runtime_tool.",
    inputSchema: object({ tool: str("Canonical tool name.") }, ["tool"]),
    effect: "read_only", risk: "low", authority: "principal", execution: "gateway",
    gatewayEntry: true,
    implemented: true,
  },
  {
    name: "call_runtime_tool",
    category: "discovery",
    description: "Run an admitted tool that is not listed directly, exactly as if called directly (same validation, authorization, audit). `arguments` must match the tool's schema from read_tool_manifest.",
    inputSchema: object({ tool: str("Canonical tool name."), arguments: { type: "object", description: "The tool's arguments." } }, ["tool", "arguments"]),
    effect: "read_only", risk: "low", authority: "principal", execution: "gateway",
    gatewayEntry: true,
    implemented: true,
  },
  {
    name: "get_runtime_status",
    category: "status",
    description: "Runtime status: server identity, Runner/Project counts, Job counts, protocol alignment, connection states. Compact unless compact=false; client_id focuses one Runner.",
    inputSchema: object({ compact: bool(undefined, { default: true }), summary_only: bool("Alias for sparse status."), client_id: str("Focus one caller-visible Runner.") }),
    effect: "read_only", risk: "low", authority: "principal", execution: "gateway",
    implemented: true,
  },
  // ── files ──
  {
    name: "read_files",
    category: "files",
    description: "Read several files or line ranges in one call. Each item has content, read_revision (needed to edit), start_line/end_line/total_lines. A cut item says truncated: continue at next_start_line (+ next_start_column as start_column if a line was cut). Binary files report binary:true without content.",
    inputSchema: object(
      {
        project,
        files: array(
          object({ path, start_line: int(undefined, { minimum: 1 }), start_column: int(undefined, { minimum: 1 }), end_line: int(undefined, { minimum: 1 }) }, ["path"]),
          "Up to 64 files or ranges.",
          { minItems: 1, maxItems: 64 },
        ),
        max_bytes_per_file: int("Per-file byte budget (default 65536, clamped to 1048576).", { minimum: 1 }),
        session_id: sessionId,
      },
      ["project", "files"],
    ),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    direct: { rank: 1, reason: "CoreWorkflow" },
    projectSuccess: (r) => compactBatch(r, "items"),
    implemented: true,
    clamps: [{ path: "max_bytes_per_file", ceiling: 1_048_576, minimum: 1 }],
    requiredCapabilities: () => ["readFiles"],
  },
  {
    name: "list_project_files",
    category: "files",
    description: "List project files (.gitignore-aware) under an optional path and glob, bounded by max_results (default 1000, clamped to 10000); reports total and truncated.",
    inputSchema: object({ project, path, glob: str("Glob such as src/**/*.ts."), max_results: int(undefined, { minimum: 1 }), session_id: sessionId }, ["project"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
    clamps: [{ path: "max_results", ceiling: 10_000, minimum: 1 }],
    requiredCapabilities: () => ["searchTexts"],
  },
  {
    name: "search_project_texts",
    category: "files",
    description: "Run several independent text searches in one call (.gitignore-aware). Literal unless regex:true; case-sensitive unless case_sensitive:false. Per query: matches [{path,line,text}], total, truncated. max_results default 100, clamped to 2000. A missing path is path_not_found.",
    inputSchema: object(
      {
        project,
        queries: array(
          object({ pattern: str(undefined, { minLength: 1 }), regex: bool(undefined, { default: false }), path, glob: str(), case_sensitive: bool(undefined, { default: true }), max_results: int(undefined, { minimum: 1 }) }, ["pattern"]),
          "Up to 16 independent queries.",
          { minItems: 1, maxItems: 16 },
        ),
        session_id: sessionId,
      },
      ["project", "queries"],
    ),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    direct: { rank: 2, reason: "CoreWorkflow" },
    projectSuccess: (r) => compactBatch(r, "results"),
    implemented: true,
    clamps: [{ path: "queries.*.max_results", ceiling: 2_000, minimum: 1 }],
    requiredCapabilities: () => ["searchTexts"],
  },
  {
    name: "edit_project_files",
    category: "files",
    description: "Guarded, all-or-nothing change to one or more files. kind edit: replace_exact old_text must match once, or pick occurrence:n, or expected_match_count:N replaces all N (nothing written if the count differs). line_scope narrows matches. Also create, delete, move. Every file passes preflight before any write. dry_run:true returns match_count and match_ranges, writes nothing. Failures carry evidence for the next call (match lines, current read_revision).",
    inputSchema: object({ project, changes: array(fileChange, undefined, { minItems: 1 }), dry_run: bool(undefined, { default: false }), session_id: sessionId }, ["project", "changes"]),
    effect: "workspace_write", risk: "medium", authority: "project_write", execution: "runner",
    direct: { rank: 3, reason: "CoreWorkflow" },
    projectSuccess: compactEdit,
    implemented: true,
    requiredCapabilities: (args) => {
      const changes = Array.isArray(args["changes"]) ? (args["changes"] as Array<Record<string, unknown>>) : [];
      const bulk = changes.some((c) => Array.isArray(c["edits"]) && (c["edits"] as Array<Record<string, unknown>>).some((e) => e["expected_match_count"] !== undefined));
      return bulk ? ["applyTextEdit", "applyTextEditExpectedMatchCount"] : ["applyTextEdit"];
    },
  },
  {
    name: "import_host_files",
    category: "files",
    description: "Write files the Host holds (uploads, attachments) into the project. Each file: path plus content (UTF-8) or content_base64. Fails if a path exists.",
    inputSchema: object(
      { project, files: array(object({ path, content: str(), content_base64: str() }, ["path"]), undefined, { minItems: 1 }), session_id: sessionId },
      ["project", "files"],
    ),
    effect: "workspace_write", risk: "medium", authority: "project_write", execution: "runner",
    direct: { rank: 7, reason: "HostIntegration" },
    implemented: false,
    requiredCapabilities: () => ["hostFileImport"],
  },
  // ── execution ──
  {
    name: "run_process",
    category: "execution",
    description: "Run one executable with literal args (no shell). Returns exit_code and output if done within wait_ms, else execution_state pending with a job_id and a wait_for_job_terminal follow-up.",
    inputSchema: object({ ...execCommon, args: array(str(), "argv: executable then arguments.", { minItems: 1 }), argv: array(str(), "Alias of args."), stdin: str() }, ["project"]),
    effect: "process_execution", risk: "high", authority: "project_execute", execution: "runner",
    implemented: true,
    clamps: execClamps,
    requiredCapabilities: () => ["processExecution"],
  },
  {
    name: "run_shell",
    category: "execution",
    description: "Run a shell command or a short related chain (sh by default, bash on request, login:true for a bash login shell). Done within wait_ms: output; else pending with job_id and a wait_for_job_terminal follow-up. Timeouts are clamped, never rejected.",
    inputSchema: object({ ...execCommon, command: str(undefined, { minLength: 1 }), shell: str(undefined, { enum: ["sh", "bash"], default: "sh" }), login: bool(undefined, { default: false }) }, ["project", "command"]),
    effect: "process_execution", risk: "high", authority: "project_execute", execution: "runner",
    direct: { rank: 4, reason: "CoreWorkflow" },
    projectSuccess: compactShell,
    implemented: true,
    clamps: execClamps,
    requiredCapabilities: (args) => (args["login"] === true ? ["shellExecution", "bashLogin"] : ["shellExecution"]),
  },
  {
    name: "run_script",
    category: "execution",
    description: "Run a Python program passed as data (language: python). Same result and pending contract as run_process.",
    inputSchema: object({ ...execCommon, language: str(undefined, { enum: ["python"] }), code: str(undefined, { minLength: 1 }), args: array(str()) }, ["project", "language", "code"]),
    effect: "process_execution", risk: "high", authority: "project_execute", execution: "runner",
    implemented: true,
    clamps: execClamps,
    requiredCapabilities: () => ["pythonScript"],
  },
  {
    name: "run_detached_process",
    category: "execution",
    description: "Start a long-running process (server, watcher) as a Job and return its job_id at once. Observe with observe_jobs.",
    inputSchema: object({ project, args: array(str(), undefined, { minItems: 1 }), argv: array(str(), "Alias of args."), cwd, env, session_id: sessionId }, ["project"]),
    effect: "process_execution", risk: "high", authority: "project_execute", execution: "runner",
    implemented: true,
    requiredCapabilities: () => ["detachedJobs"],
  },
  // ── jobs ──
  {
    name: "observe_jobs",
    category: "jobs",
    description: "Current state and output tails of several Jobs in one call. An unknown job_id is reported per item, not as a Job failure.",
    inputSchema: object({ project, job_ids: array(jobId, undefined, { minItems: 1, maxItems: 64 }) }, ["project", "job_ids"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
  },
  {
    name: "wait_for_job_terminal",
    category: "jobs",
    description: "Wait up to wait_ms (clamped to 30000) for a Job to finish; returns its terminal result, or pending again with the same follow-up. Repeating after terminal returns the same result.",
    inputSchema: object({ project, job_id: jobId, wait_ms: waitMs, session_id: sessionId }, ["project", "job_id"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
    clamps: [{ path: "wait_ms", ceiling: 30_000, minimum: 0 }],
  },
  // ── git ──
  {
    name: "read_workspace_changes",
    category: "git",
    description: "Changed paths in the working tree with status and line counts.",
    inputSchema: object({ project }, ["project"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
    requiredCapabilities: () => ["gitReview"],
  },
  {
    name: "read_git_diff_hunks",
    category: "git",
    description: "Bounded diff hunks of the working tree (max_hunks default 50, clamped to 500). A hunk cut by the producer says truncated.",
    inputSchema: object({ project, paths: array(path), max_hunks: int(undefined, { minimum: 1 }), context_lines: int(undefined, { minimum: 0 }) }, ["project"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
    clamps: [{ path: "max_hunks", ceiling: 500, minimum: 1 }, { path: "context_lines", ceiling: 20, minimum: 0 }],
    requiredCapabilities: () => ["gitReview"],
  },
  {
    name: "read_git_review_summary",
    category: "git",
    description: "Per-file review summary (status, added/removed lines) against base (default HEAD), with totals. A file whose line counts are unknown (binary, or untracked and not counted) says counts_unknown; the line totals are then lower bounds (lines_lower_bound).",
    inputSchema: object({ project, base: str("Commit-ish to compare against.") }, ["project"]),
    effect: "read_only", risk: "low", authority: "project_read", execution: "runner",
    implemented: true,
    requiredCapabilities: () => ["gitReview"],
  },
  // ── sessions ──
  {
    name: "create_session",
    category: "sessions",
    description: "Start a Workflow Session for a Project; returns session_ref (~s1) and session_id. Pass either as session_id to record calls into it.",
    inputSchema: object({ project, title: str() }, ["project"]),
    effect: "durable_state", risk: "low", authority: "project_read", execution: "ref_resolver",
    implemented: true,
  },
  {
    name: "read_session_handoff",
    category: "sessions",
    description: "Bounded recap of a Workflow Session: what was read, changed and run, and what is pending. Use it to recover missing task context.",
    inputSchema: object({ session_id: str("session_ref (~s1) or wc_sess_*.") }, ["session_id"]),
    effect: "read_only", risk: "low", authority: "session", execution: "ref_resolver",
    implemented: true,
  },
  // ── agents ──
  {
    name: "start_agent_task_attempt",
    category: "agents",
    description: "Start an Attempt on an agent Task; returns attempt_ref pinned to its fence and controller generation. Keyed replay returns the same Attempt.",
    inputSchema: object({ task_id: str(), assignee_agent_id: str(), idempotency_key: str() }, ["task_id", "assignee_agent_id", "idempotency_key"]),
    effect: "durable_state", risk: "medium", authority: "principal", execution: "ref_resolver",
    implemented: false,
  },
  {
    name: "start_agent_task_endpoint_continuation",
    category: "agents",
    description: "Continue an Attempt on its Endpoint. Pass attempt_ref, or the explicit task_id, attempt_id, assignee_agent_id, attempt_fence and attempt_controller_generation; a stale ref fails closed.",
    inputSchema: object({ attempt_ref: str(), task_id: str(), attempt_id: str(), assignee_agent_id: str(), attempt_fence: int(undefined, { minimum: 0 }), attempt_controller_generation: int(undefined, { minimum: 0 }) }),
    effect: "durable_state", risk: "medium", authority: "principal", execution: "ref_resolver",
    implemented: false,
  },
  {
    name: "rotate_agent_continuation_endpoint",
    category: "agents",
    description: "Rotate an agent's continuation Endpoint to a new controller generation; earlier agent_continuation_refs become stale.",
    inputSchema: object({ agent_id: str(), endpoint_id: str(), expected_controller_generation: int(undefined, { minimum: 0 }) }, ["agent_id", "endpoint_id", "expected_controller_generation"]),
    effect: "durable_state", risk: "medium", authority: "principal", execution: "ref_resolver",
    implemented: false,
  },
  {
    name: "wait_for_agent_events",
    category: "agents",
    description: "Wait for events of an agent continuation with an owned deadline; keyed replay returns the same events.",
    inputSchema: object({ agent_continuation_ref: str(), agent_id: str(), wait_ms: waitMs }),
    effect: "read_only", risk: "low", authority: "principal", execution: "ref_resolver",
    implemented: false,
  },
  // ── presentation ──
  {
    name: "present_agent_continuation",
    category: "presentation",
    description: "Mount the agent continuation card in the Host. Pass agent_continuation_ref, or agent_id, endpoint_id and expected_controller_generation. Finish your turn normally afterwards.",
    inputSchema: object({ agent_continuation_ref: str(), agent_id: str(), endpoint_id: str(), expected_controller_generation: int(undefined, { minimum: 0 }) }),
    effect: "presentation", risk: "low", authority: "principal", execution: "gateway",
    direct: { rank: 20, reason: "Continuation" },
    implemented: false,
  },
  {
    name: "present_job_terminal_continuation",
    category: "presentation",
    description: "Mount the Job continuation card for a pending Job. Finish your turn normally afterwards.",
    inputSchema: object({ project, job_id: jobId }, ["project", "job_id"]),
    effect: "presentation", risk: "low", authority: "project_read", execution: "gateway",
    direct: { rank: 21, reason: "Continuation" },
    implemented: false,
  },
  {
    name: "present_work_result",
    category: "presentation",
    description: "Present a finished work result card in the Host.",
    inputSchema: object({ project, title: str(), summary: str() }, ["project", "title"]),
    effect: "presentation", risk: "low", authority: "project_read", execution: "gateway",
    direct: { rank: 22, reason: "Presentation" },
    implemented: false,
  },
  {
    name: "present_goal_plan",
    category: "presentation",
    description: "Present a Goal plan card in the Host.",
    inputSchema: object({ project, title: str(), steps: array(str()) }, ["project", "title"]),
    effect: "presentation", risk: "low", authority: "project_read", execution: "gateway",
    direct: { rank: 23, reason: "Presentation" },
    implemented: false,
  },
];

const byName = new Map(definitions.map((d) => [d.name, d]));

/** Every canonical tool, in catalog order. */
export function toolDefinitions(): readonly ToolDefinition[] {
  return definitions;
}

export function toolDefinition(name: string): ToolDefinition | undefined {
  return byName.get(name);
}
