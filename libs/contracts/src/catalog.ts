/**
 * The canonical tool catalog. `toolDefinitions()` is the one list.
 *
 * One concept over 400 lines: the tool catalog, one table.
 */
import { anyObject, array, bool, int, object, oneOf, str, stringMap } from "./json-schema.js";
import type { JsonSchema, Static } from "./json-schema.js";
import { ToolCategory } from "./tool-definition.js";
import type { ClampRule, ToolDefinition } from "./tool-definition.js";
import { renderLimitText } from "./limit-text.js";
import { compactBatch, compactEdit, compactRun, compactShell, compactValidation, pagedText } from "./compaction.js";

const project = str("~p1 or id from list_projects.");
const path = str("Project-relative path.");
const revision = str("read_revision from read_files.");
const timeoutMs = int("Kill after ms ({{timeout_ms}}).", { minimum: 1 });
const waitMs = int("Pending job_id after ms ({{wait_ms}}).", { minimum: 0 });
const cwd = str("Default: project root.");
const env = stringMap("Added to a scrubbed environment.");
const jobId = str("job_id from a pending result.");
/** Optional on project tools: the Workflow Session this call is recorded into. Never a target. */
const sessionId = str("~s1 to record into.");
/** A paged listing's page size and continuation (paging.ts). */
const pageLimit = int(undefined, { minimum: 1 });
const pageCursor = str("next_cursor of the previous page.");

/** Optional on mutating workspace tools: admitted only while that Attempt holds its fence. */
const attemptRef = str();
const agentId = str("wc_agent_* from create_agent.");
const taskId = str("wc_task_* from create_agent_task.");
const idempotencyKey = str("Caller-chosen key; repeating it returns the first result.", { minLength: 1, maxLength: 128 });
const taskStates = ["open", "in_progress", "completed", "failed", "stopped"] as const;
/** The explicit Attempt tuple that heartbeat, completion and reconcile take. */
function attemptTuple<E extends Record<string, JsonSchema>, const R extends readonly (keyof E & string)[]>(extra: E, required: R) {
  return object(
    {
      task_id: taskId,
      attempt_id: str(),
      assignee_agent_id: agentId,
      attempt_fence: int(undefined, { minimum: 1 }),
      attempt_controller_generation: int(undefined, { minimum: 1 }),
      ...extra,
    },
    ["task_id", "attempt_id", "assignee_agent_id", "attempt_fence", "attempt_controller_generation", ...required],
  );
}

/** edit_project_files' limits: the schema, the Runner and its description read them here. */
const EDIT_LIMITS = { max_changes: 256, max_edits_per_change: 256, max_expected_match_count: 1024, undo_max_bytes: 8 * 1024 } as const;
/** import_host_files' ceilings (decoded bytes; a request body is at most 8 MiB). */
const IMPORT_LIMITS = { max_files: 64, max_file_bytes: 4 * 1024 * 1024, max_call_bytes: 6 * 1024 * 1024 } as const;
/**
 * list_skills' and read_skill's budgets: the catalog page (bytes of the serialized skills), one
 * body or resource slice (bytes), and the resources one read_skill lists.
 */
const SKILL_LIMITS = { catalog_bytes: 8 * 1024, body_bytes: 16 * 1024, max_resources: 64 } as const;
/** What a search proves with read_revisions: at most this many files, each at most this large. */
const SEARCH_LIMITS = { revision_files: 20, revision_file_bytes: 1024 * 1024 } as const;

const replaceExact = object({ old_text: str(undefined, { minLength: 1 }), new_text: str() }, ["old_text", "new_text"]);
const textEdit = object(
  {
    replace_exact: replaceExact,
    expected_match_count: int("Replace all N matches only if exactly N exist.", { minimum: 1, maximum: EDIT_LIMITS.max_expected_match_count }),
    occurrence: int("Only the n-th match (1-based); not with expected_match_count.", { minimum: 1 }),
    line_scope: object({ start_line: int(undefined, { minimum: 1 }), end_line: int(undefined, { minimum: 1 }) }, ["start_line", "end_line"]),
  },
  ["replace_exact"],
);
/** Inside one call's schema the first `path` says what a path is; the rest stay bare. */
const bare = str();
const fileChange = oneOf({
  type: "object",
  discriminator: { propertyName: "kind" },
  required: ["kind"],
  oneOf: [
    object(
      {
        kind: str(undefined, { const: "edit" }),
        path,
        expected_read_revision: revision,
        edits: array(textEdit, undefined, { minItems: 1, maxItems: EDIT_LIMITS.max_edits_per_change }),
      },
      ["kind", "path", "expected_read_revision", "edits"],
    ),
    object({ kind: str(undefined, { const: "create" }), path: bare, content: str() }, ["kind", "path", "content"]),
    object({ kind: str(undefined, { const: "delete" }), path: bare, expected_read_revision: bare }, ["kind", "path", "expected_read_revision"]),
    object({ kind: str(undefined, { const: "move" }), path: bare, destination: bare, expected_read_revision: bare }, [
      "kind",
      "path",
      "destination",
      "expected_read_revision",
    ]),
  ],
});

/** Top-level fields of a run result (completed, failed to start, or pending). */
const runResult = [
  "execution_state",
  "job_id",
  "exit_code",
  "signal",
  "timed_out",
  "stdout",
  "stderr",
  "stdout_bytes",
  "stderr_bytes",
  "truncated",
  "omitted_bytes",
  "duration_ms",
  "started_at",
  "effective",
  "outcome_unknown",
  "limit_exceeded",
  "error_code",
  "program",
  "command_summary",
  "cwd",
  "shell",
] as const;

/** Top-level fields of a StructuredValidation result (completed, or pending like a run). */
const validationResult = [
  "status",
  "detail",
  "checks",
  "failures",
  "truncated",
  "skipped",
  "detected",
  "notes",
  "execution_state",
  "job_id",
  "state",
  "exit_code",
  "signal",
  "timed_out",
  "duration_ms",
  "started_at",
  "effective",
  "outcome_unknown",
] as const;

const execCommon = { project, cwd, env, timeout_ms: timeoutMs, wait_ms: waitMs, session_id: sessionId, attempt_ref: attemptRef };
/**
 * The wait every pending-capable call takes: the one place its default and ceiling are
 * written (descriptions render them; the Runner, the broker's Job desk and the ref-resolver
 * read them through clampRule).
 */
const WAIT_MS = { path: "wait_ms", ceiling: 30_000, minimum: 0, default: 10_000 } as const;
const execClamps = [{ path: "timeout_ms", ceiling: 600_000, minimum: 1, default: 120_000 }, WAIT_MS] as const;

/** A Job continuation card's facts: live state, then dispatch, fresh turn and consume. */
const jobContinuationResult = ["job_id", "project", "state", "terminal", "exit_code", "outcome_unknown", "continuation"];
const agentContinuationResult = ["agent_id", "endpoint_id", "controller_generation", "after_cursor", "pending_events", "pending_count", "continuation"];
/** The explicit Endpoint tuple and the cursor a card's continuation waits after (card helpers keep the tuple, never a ref). */
const agentCardTarget = { agent_id: str(), endpoint_id: str(), expected_controller_generation: int(undefined, { minimum: 1 }), after_cursor: str() };

/** What every validation tool is: one Runner Job per call, with the run tools' clamps and pending contract. */
const validationJob = {
  jobs: "start",
  category: "validation",
  effect: "process_execution",
  risk: "high",
  authority: "project_execute",
  execution: "runner",
  projectSuccess: compactValidation,
  implemented: true,
  resultFields: validationResult,
  clamps: execClamps,
} as const;

/**
 * The catalog. Each entry keeps its own type (its literal name, its input schema's `Schema<T>`):
 * `ToolInput<N>` reads a tool's argument type from here. Names are checked as Lowercase<string>
 * (every tool name is), a type under which each name keeps its literal type.
 */
const definitions = (
  [
    // ── discovery ──
    {
      name: "list_projects",
      category: "discovery",
      description:
        "Your projects, last used first: project_ref (~p1), canonical id (either is `project`; durable). name: substring, any case. limit {{limit}}; a cut page has omitted, next_cursor.",
      inputSchema: object({ name: str(), limit: pageLimit, cursor: str() }),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      direct: { rank: 6, reason: "CoreWorkflow" },
      implemented: true,
      clamps: [{ path: "limit", ceiling: 100, minimum: 1, default: 20 }],
      resultFields: ["projects", "omitted", "next_cursor"],
      textContent: (result) => pagedText(result, "projects", ["project_ref", "project_id", "name", "runner_state"]),
    },
    {
      name: "create_project",
      category: "discovery",
      description:
        "Create a Project in your tenant from a git repository (source.git {url, ref?}; cloned with your operator's credential, never passed here) or empty (source.empty {}). private (default) is visible to you only; tenant shares it. Pending while it starts and clones: follow the returned call to wait.",
      inputSchema: object(
        {
          name: str("Project name, [A-Za-z0-9._-]{1,128}; the id in agent:<tenant>:<name>.", { minLength: 1, maxLength: 128 }),
          source: oneOf({
            type: "object",
            description: "Where the workspace starts from: exactly one of git or empty.",
            oneOf: [
              object(
                {
                  git: object(
                    {
                      url: str("https:// or git:// URL of the repository.", { minLength: 1 }),
                      ref: str("Branch or tag (default: the remote's HEAD).", { minLength: 1 }),
                    },
                    ["url"],
                  ),
                },
                ["git"],
              ),
              object({ empty: object({}) }, ["empty"]),
            ],
          }),
          visibility: str(undefined, { enum: ["private", "tenant"], default: "private" }),
          wait_ms: int("Return pending after this many ms ({{wait_ms}}).", { minimum: 0 }),
        },
        ["name", "source"],
      ),
      effect: "durable_state",
      hints: { openWorld: true },
      risk: "medium",
      authority: "principal",
      execution: "gateway",
      clamps: [WAIT_MS],
      implemented: true,
      resultFields: ["project_ref", "project_id", "project_state"],
    },
    {
      name: "wait_for_project_ready",
      category: "discovery",
      description:
        "Wait until a Project created with create_project is ready (its Runner serves it), up to wait_ms; pending again returns the same call to continue. A failed clone reports its reason; nothing was left behind.",
      inputSchema: object(
        { project: str("agent:<tenant>:<name> from create_project."), wait_ms: int("Wait at most this many ms ({{wait_ms}}).", { minimum: 0 }) },
        ["project"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "gateway",
      clamps: [WAIT_MS],
      implemented: true,
      resultFields: ["project_ref", "project_id", "project_state"],
    },
    {
      name: "update_project",
      category: "discovery",
      description: "Change a Project's visibility: private (its owner only) or tenant (everyone in your tenant). Only its owner or a tenant admin may.",
      inputSchema: object({ project, visibility: str(undefined, { enum: ["private", "tenant"] }) }, ["project", "visibility"]),
      effect: "durable_state",
      hints: { destructive: true, idempotent: true },
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["project_id", "visibility", "unchanged"],
    },
    {
      name: "delete_project",
      category: "discovery",
      description:
        "Delete a Project: its Runner stops, its refs stop working, and its workspace is deleted unless keep_workspace. Only its owner or a tenant admin may.",
      inputSchema: object({ project, keep_workspace: bool("Keep the workspace files.", { default: false }) }, ["project"]),
      effect: "durable_state",
      hints: { destructive: true },
      risk: "high",
      authority: "principal",
      execution: "gateway",
      implemented: true,
      resultFields: ["project_id", "workspace_kept"],
    },
    {
      name: "list_tools",
      category: "discovery",
      description:
        "List the tools admitted for you, grouped by category, and the upstream MCP namespaces (mcp:<server>) you may use. With namespace: that upstream's tools (name, description, annotations) within {{catalog_budget_bytes:KiB}} KiB; omitted and next_cursor say when the page is cut. Use read_tool_manifest for one tool's schema.",
      inputSchema: object({
        category: str("Only this category.", { enum: Object.values(ToolCategory) }),
        namespace: str("mcp:<server> from namespaces.", { pattern: "^mcp:[a-z0-9][a-z0-9_-]{0,62}$" }),
        cursor: str("next_cursor of the previous page (with namespace)."),
      }),
      limits: { catalog_budget_bytes: 16 * 1024 },
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "gateway",
      implemented: true,
      resultFields: ["categories", "namespaces", "namespace", "upstream", "tools", "omitted", "next_cursor"],
    },
    {
      name: "read_tool_manifest",
      category: "discovery",
      description: "Schema, description and route of one admitted tool (namespace mcp:<server>: an upstream's).",
      inputSchema: object({ tool: str(), namespace: str() }, ["tool"]),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "gateway",
      gatewayEntry: true,
      implemented: true,
      resultFields: ["tool", "category", "description", "input_schema", "route", "namespace", "annotations", "read_only", "binding", "declaration"],
    },
    {
      name: "mcp_tool",
      category: "discovery",
      description:
        "Call a tool of an upstream MCP server (namespace mcp:<server>) with the binding from read_tool_manifest, or {server, tool}. arguments are checked against the bound schema before sending; a stale schema_hash or another Project than the binding's fails closed with the fresh description. The result is the upstream's untrusted content, labelled with its server and cut at the server's size cap. A call sent without an answer is outcome_unknown: true and is never re-sent.",
      inputSchema: object(
        {
          binding: object(
            {
              server: str("Upstream server id."),
              tool: str("Upstream tool name."),
              schema_hash: str("schema_hash from read_tool_manifest."),
              project: str("The Project a project-bound server is bound to."),
            },
            ["server", "tool", "schema_hash"],
          ),
          server: str("Upstream server id (without binding)."),
          tool: str("Upstream tool name (without binding)."),
          arguments: anyObject("The upstream tool's arguments (its input_schema)."),
          project,
        },
        ["arguments"],
      ),
      effect: "durable_state",
      effectByTarget: true,
      // Upstream servers are outside the platform, and their tools may change or delete data.
      hints: { openWorld: true, destructive: true },
      risk: "medium",
      authority: "principal",
      execution: "gateway",
      implemented: true,
      resultFields: ["upstream", "content", "structured_content", "is_error", "truncated", "bytes"],
    },
    {
      name: "call_runtime_tool",
      category: "discovery",
      description:
        "Run an admitted tool not listed directly (named in the server instructions; list_tools) exactly as if called directly; `arguments` per read_tool_manifest.",
      inputSchema: object({ tool: str("Canonical tool name."), arguments: anyObject("The tool's arguments.") }, ["tool", "arguments"]),
      effect: "read_only",
      forwards: true,
      risk: "low",
      authority: "principal",
      execution: "gateway",
      gatewayEntry: true,
      implemented: true,
    },
    {
      name: "run_code_cell",
      category: "discovery",
      description:
        'Code Mode: run an async JavaScript body that composes read-only tools in one call. Inside, `await tools.<name>(args)` calls an admitted read-only tool (canonical name and arguments; `project` and `session_id` default to the cell\'s) and returns its result, or throws {reason_code, ...} on failure; `text(value)` is the only output you see (at most {{text_bytes:KiB}}, cut honestly). Independent calls may run together with Promise.all ({{child_concurrency}} at a time); at most {{max_child_calls}} calls per cell. No filesystem, network, timers or imports; {{memory_bytes:MiB}} memory. Result: text, truncated, child_calls, elapsed_ms. A throw fails with its message, line and the text so far; a cell changes nothing. read_tool_manifest {tool:"run_code_cell"} gives the TypeScript API. Never use it to edit, run commands or validate.',
      inputSchema: object(
        {
          project,
          code: str("Async function body; `tools` and `text` are in scope.", { minLength: 1, maxLength: 65_536 }),
          timeout_ms: int("Stop the cell after ms ({{timeout_ms}}).", { minimum: 1 }),
          session_id: sessionId,
        },
        ["project", "code"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "gateway",
      directFor: { hostProfile: "code_mode", policy: { rank: 0, reason: "CoreWorkflow" } },
      implemented: true,
      clamps: [{ path: "timeout_ms", ceiling: 60_000, minimum: 1, default: 10_000 }],
      limits: { text_bytes: 16 * 1024, child_concurrency: 4, max_child_calls: 256, memory_bytes: 64 * 1024 * 1024, child_result_bytes: 4 * 1024 * 1024 },
      resultFields: ["text", "truncated", "child_calls", "elapsed_ms"],
    },
    {
      name: "get_runtime_status",
      category: "status",
      description:
        "Runtime status of your own Runners and Projects: server identity, Runner/Project counts, Job counts, protocol alignment, connection states; recovered_writes: per Project, writes a Runner crash cut off, with the follow-up that lists them. Compact unless compact=false.",
      inputSchema: object({ compact: bool(undefined, { default: true }), summary_only: bool("Alias for sparse status.") }),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "gateway",
      implemented: true,
      resultFields: [
        "server",
        "host_profile",
        "runners",
        "projects",
        "jobs",
        "protocol",
        "build",
        "connection_states",
        "concurrency",
        "baseline_faults",
        "containment",
        "runner_details",
        "catalog_version",
        "audit_backlog",
        "recovered_writes",
      ],
    },
    // ── skills ──
    {
      name: "list_skills",
      category: "skills",
      description:
        "Agent Skills you can use: the project's (.agents/skills, .claude/skills; needs `project`) and your team's catalog. Each: name, description, source (project|tenant), revision, valid (else problem says why). A project skill shadows a tenant one of the same name (shadows). At most {{catalog_bytes}} bytes of skills per page; a cut page says omitted and next_cursor: pass it as `cursor` for the rest. Then read_skill the one a task needs.",
      inputSchema: object({ project, cursor: str("next_cursor from the previous page.") }),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "gateway",
      limits: SKILL_LIMITS,
      implemented: true,
      resultFields: ["skills", "omitted", "next_cursor"],
      requiredCapabilities: () => ["projectSkills"],
    },
    {
      name: "read_skill",
      category: "skills",
      description:
        "One skill's SKILL.md as body (byte-exact), at most {{body_bytes}} bytes per call; complete:false gives next_offset: pass it as `offset` for the rest. revision changes with the file: a complete body you hold with the same revision need not be re-read. resources lists its other files (up to {{max_resources}}): read a project skill's with read_files, a tenant skill's with `resource` (read-only).",
      inputSchema: object(
        {
          skill: str("Skill name from list_skills.", { minLength: 1, maxLength: 128 }),
          project,
          offset: int("Byte offset: next_offset from the previous call.", { minimum: 0 }),
          resource: str("A resources path of this skill, read instead of SKILL.md."),
        },
        ["skill"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "gateway",
      limits: SKILL_LIMITS,
      implemented: true,
      resultFields: ["name", "source", "revision", "body", "complete", "next_offset", "resources", "resources_omitted", "path", "resource"],
      requiredCapabilities: () => ["projectSkills"],
    },
    // ── files ──
    {
      name: "read_files",
      category: "files",
      description:
        "Read files or line ranges, many per call. Each item: content, read_revision (needed to edit), line numbers. A cut item has truncated: continue at next_start_line (and next_start_column as start_column). Binary: binary:true, no content.",
      inputSchema: object(
        {
          project,
          files: array(
            object(
              { path, start_line: int(undefined, { minimum: 1 }), start_column: int(undefined, { minimum: 1 }), end_line: int(undefined, { minimum: 1 }) },
              ["path"],
            ),
            undefined,
            { minItems: 1, maxItems: 64 },
          ),
          max_bytes_per_file: int("Per-file byte budget ({{max_bytes_per_file}}).", { minimum: 1 }),
          session_id: sessionId,
        },
        ["project", "files"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      direct: { rank: 1, reason: "CoreWorkflow" },
      projectSuccess: (r) => compactBatch(r, "items"),
      implemented: true,
      resultFields: ["items"],
      clamps: [{ path: "max_bytes_per_file", ceiling: 1_048_576, minimum: 1, default: 65_536 }],
      requiredCapabilities: () => ["readFiles"],
    },
    {
      name: "list_project_files",
      category: "files",
      description:
        "List project files (.gitignore-aware) under an optional path and glob, bounded by max_results ({{max_results}}); reports total and truncated.",
      inputSchema: object({ project, path, glob: str("Glob such as src/**/*.ts."), max_results: int(undefined, { minimum: 1 }), session_id: sessionId }, [
        "project",
      ]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["paths", "total", "truncated", "total_is_lower_bound"],
      clamps: [{ path: "max_results", ceiling: 10_000, minimum: 1, default: 1000 }],
      requiredCapabilities: () => ["searchTexts"],
    },
    {
      name: "search_project_texts",
      category: "files",
      description:
        'Independent text searches, many per call (.gitignore-aware; schema defaults: literal, case-sensitive). Per query: matches [{path,line,text}] (+before/after with context_lines 0..{{queries.*.context_lines:ceiling}}), total, truncated; output:"files" or "count" for less. max_results {{queries.*.max_results}}.',
      inputSchema: object(
        {
          project,
          queries: array(
            object(
              {
                pattern: str(undefined, { minLength: 1 }),
                regex: bool(undefined, { default: false }),
                path,
                glob: str(),
                case_sensitive: bool(undefined, { default: true }),
                max_results: int(undefined, { minimum: 1 }),
                output: str(undefined, { enum: ["matches", "files", "count"], default: "matches" }),
                context_lines: int(undefined, { minimum: 0 }),
              },
              ["pattern"],
            ),
            undefined,
            { minItems: 1, maxItems: 16 },
          ),
          session_id: sessionId,
        },
        ["project", "queries"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      limits: SEARCH_LIMITS,
      direct: { rank: 2, reason: "CoreWorkflow" },
      projectSuccess: (r) => compactBatch(r, "results"),
      implemented: true,
      resultFields: ["results"],
      clamps: [
        { path: "queries.*.max_results", ceiling: 2_000, minimum: 1, default: 100 },
        { path: "queries.*.context_lines", ceiling: 5, minimum: 0, default: 0 },
      ],
      requiredCapabilities: (args) => {
        const queries = Array.isArray(args["queries"]) ? (args["queries"] as Array<Record<string, unknown>>) : [];
        const lowContext = queries.some(
          (q) => (q["output"] !== undefined && q["output"] !== "matches") || (typeof q["context_lines"] === "number" && q["context_lines"] > 0),
        );
        return lowContext ? ["searchTexts", "searchLowContext"] : ["searchTexts"];
      },
    },
    {
      name: "search_file_context",
      category: "files",
      description:
        "Matches of one pattern in one file with context_lines ({{context_lines}}) around each, plus the file's read_revision so an edit can follow without a read. Literal unless regex:true. max_matches {{max_matches}}.",
      inputSchema: object(
        {
          project,
          path,
          pattern: str(undefined, { minLength: 1 }),
          regex: bool(undefined, { default: false }),
          case_sensitive: bool(undefined, { default: true }),
          context_lines: int(undefined, { minimum: 0 }),
          max_matches: int(undefined, { minimum: 1 }),
          session_id: sessionId,
        },
        ["project", "path", "pattern"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["path", "read_revision", "total_lines", "match_count", "matches", "truncated"],
      clamps: [
        { path: "context_lines", ceiling: 5, minimum: 0, default: 3 },
        { path: "max_matches", ceiling: 200, minimum: 1, default: 20 },
      ],
      requiredCapabilities: () => ["searchLowContext"],
    },
    {
      name: "edit_project_files",
      category: "files",
      description:
        "Guarded atomic file changes. edit: replace_exact old_text matches once, or occurrence:n or expected_match_count:N replaces all N (else no write), line_scope narrows. Also create, delete, move. dry_run:true: match_count, match_ranges, no write. include_undo:true: a guarded undo.",
      inputSchema: object(
        {
          project,
          changes: array(fileChange, undefined, { minItems: 1, maxItems: EDIT_LIMITS.max_changes }),
          dry_run: bool(undefined, { default: false }),
          include_undo: bool(),
          session_id: sessionId,
          attempt_ref: attemptRef,
        },
        ["project", "changes"],
      ),
      effect: "workspace_write",
      risk: "medium",
      authority: "project_write",
      execution: "runner",
      limits: EDIT_LIMITS,
      direct: { rank: 3, reason: "CoreWorkflow" },
      projectSuccess: compactEdit,
      implemented: true,
      resultFields: ["files", "change_summary", "dry_run", "execution_state", "undo"],
      requiredCapabilities: (args) => {
        const changes = Array.isArray(args["changes"]) ? (args["changes"] as Array<Record<string, unknown>>) : [];
        const bulk = changes.some(
          (c) => Array.isArray(c["edits"]) && (c["edits"] as Array<Record<string, unknown>>).some((e) => e["expected_match_count"] !== undefined),
        );
        return bulk ? ["applyTextEdit", "applyTextEditExpectedMatchCount"] : ["applyTextEdit"];
      },
    },
    {
      name: "import_host_files",
      category: "files",
      description:
        "Write Host-held files (uploads, attachments) into the project, all or nothing: content (UTF-8) or content_base64 each. Replaces a file only with overwrite:true + its expected_read_revision. Max {{max_file_bytes:MiB}} a file, {{max_call_bytes:MiB}} a call.",
      inputSchema: object(
        {
          project,
          files: array(
            object({ path: bare, content: str(), content_base64: str(), overwrite: bool(undefined, { default: false }), expected_read_revision: bare }, [
              "path",
            ]),
            undefined,
            { minItems: 1, maxItems: IMPORT_LIMITS.max_files },
          ),
          session_id: sessionId,
          attempt_ref: attemptRef,
        },
        ["project", "files"],
      ),
      effect: "workspace_write",
      risk: "medium",
      authority: "project_write",
      execution: "runner",
      limits: IMPORT_LIMITS,
      direct: { rank: 7, reason: "HostIntegration" },
      implemented: true,
      resultFields: ["files"],
      requiredCapabilities: () => ["hostFileImport"],
    },
    // ── execution ──
    {
      name: "run_process",
      jobs: "start",
      category: "execution",
      description:
        "Run one executable with literal args (no shell). Returns exit_code and output if done within wait_ms, else execution_state pending with a job_id and a wait_for_job_terminal follow-up.",
      inputSchema: object(
        { ...execCommon, args: array(str(), "argv: executable then arguments.", { minItems: 1 }), argv: array(str(), "Alias of args."), stdin: str() },
        ["project", "args"],
      ),
      effect: "process_execution",
      risk: "high",
      authority: "project_execute",
      execution: "runner",
      projectSuccess: compactRun,
      implemented: true,
      resultFields: runResult,
      clamps: execClamps,
      requiredCapabilities: () => ["processExecution"],
    },
    {
      name: "run_shell",
      jobs: "start",
      category: "execution",
      description:
        "Run a shell command or short chain (sh; bash on request; login:true = bash login). Done within wait_ms: output; else pending with job_id and a wait_for_job_terminal follow-up.",
      inputSchema: object(
        {
          ...execCommon,
          command: str(undefined, { minLength: 1 }),
          shell: str(undefined, { enum: ["sh", "bash"], default: "sh" }),
          login: bool(undefined, { default: false }),
        },
        ["project", "command"],
      ),
      effect: "process_execution",
      risk: "high",
      authority: "project_execute",
      execution: "runner",
      direct: { rank: 4, reason: "CoreWorkflow" },
      projectSuccess: compactShell,
      implemented: true,
      resultFields: [...runResult, "output"],
      clamps: execClamps,
      requiredCapabilities: (args) => (args["login"] === true ? ["shellExecution", "bashLogin"] : ["shellExecution"]),
    },
    {
      name: "run_script",
      jobs: "start",
      category: "execution",
      description: "Run a Python program passed as data (language: python). Same result and pending contract as run_process.",
      inputSchema: object({ ...execCommon, language: str(undefined, { enum: ["python"] }), code: str(undefined, { minLength: 1 }), args: array(str()) }, [
        "project",
        "language",
        "code",
      ]),
      effect: "process_execution",
      risk: "high",
      authority: "project_execute",
      execution: "runner",
      projectSuccess: compactRun,
      implemented: true,
      resultFields: runResult,
      clamps: execClamps,
      requiredCapabilities: () => ["pythonScript"],
    },
    {
      name: "run_detached_process",
      jobs: "start",
      category: "execution",
      description: "Start a long-running process (server, watcher) as a Job and return its job_id at once. Observe with observe_jobs.",
      inputSchema: object(
        {
          project,
          args: array(str(), undefined, { minItems: 1 }),
          argv: array(str(), "Alias of args."),
          cwd,
          env,
          session_id: sessionId,
          attempt_ref: attemptRef,
        },
        ["project", "args"],
      ),
      effect: "process_execution",
      risk: "high",
      authority: "project_execute",
      execution: "runner",
      implemented: true,
      resultFields: ["execution_state", "job_id", "started_at", "error_code", "program", "duration_ms", "outcome_unknown"],
      requiredCapabilities: () => ["detachedJobs"],
    },
    // ── jobs ──
    {
      name: "observe_jobs",
      jobs: "observe",
      category: "jobs",
      description: "Current state and output tails of several Jobs in one call. An unknown job_id is reported per item, not as a Job failure.",
      inputSchema: object({ project, job_ids: array(jobId, undefined, { minItems: 1, maxItems: 64 }), session_id: sessionId }, ["project", "job_ids"]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["jobs"],
    },
    {
      name: "wait_for_job_terminal",
      jobs: "observe",
      category: "jobs",
      description:
        "Wait up to wait_ms ({{wait_ms}}) for a Job to finish; returns its terminal result, or pending again with the same follow-up. Repeating after terminal returns the same result.",
      inputSchema: object({ project, job_id: jobId, wait_ms: waitMs, session_id: sessionId }, ["project", "job_id"]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      projectSuccess: compactRun,
      implemented: true,
      resultFields: [...new Set([...runResult, "output", "reason_code", ...validationResult])],
      clamps: [WAIT_MS],
    },
    // ── validation ──
    {
      name: "project_validate",
      description:
        "Run the project's own validators, detected from its files (tsconfig, ESLint config, package.json test script, pytest, go.mod, Cargo.toml), and return parsed results: status passed|failed|error|unparsed, per-check counts, failures with path/line/column/test. Monorepos: each path runs in its nearest package; without paths, the root and its workspace packages (package.json/pnpm workspaces, go.work and nested go.mod, Cargo members, pyproject.toml subprojects) each run in their directory, named by `package` (at most 8 per call; the rest skipped as package_limit). checks narrows (default typecheck, lint, test; build on request); skipped checks say why. Pending with job_id like run_* when still running at wait_ms.",
      inputSchema: object(
        {
          project,
          checks: array(str(undefined, { enum: ["typecheck", "lint", "test", "build"] }), "Only these checks.", { minItems: 1 }),
          paths: array(path, "Narrow lint and tests to these paths.", { minItems: 1 }),
          timeout_ms: timeoutMs,
          wait_ms: waitMs,
          session_id: sessionId,
        },
        ["project"],
      ),
      ...validationJob,
    },
    {
      name: "cargo_check",
      description:
        "cargo check --message-format=json, parsed: compiler errors and warnings with path/line/column/code. Same result shape and pending contract as project_validate.",
      inputSchema: object(
        {
          project,
          package: str("Only this package (-p)."),
          all_targets: bool("Also tests, benches, examples.", { default: false }),
          timeout_ms: timeoutMs,
          wait_ms: waitMs,
          session_id: sessionId,
        },
        ["project"],
      ),
      ...validationJob,
      requiredCapabilities: () => ["validationRust"],
    },
    {
      name: "cargo_test",
      description:
        "cargo test, parsed: test counts, failing tests with their panic location, compile errors. Same result shape and pending contract as project_validate.",
      inputSchema: object(
        {
          project,
          package: str("Only this package (-p)."),
          test_filter: str("Only tests whose name contains this."),
          timeout_ms: timeoutMs,
          wait_ms: waitMs,
          session_id: sessionId,
        },
        ["project"],
      ),
      ...validationJob,
      requiredCapabilities: () => ["validationRust"],
    },
    {
      name: "go_test",
      description:
        "go test -json, parsed: test counts, failing tests with file/line, build errors. Each pattern runs in the Go module holding its directory (nested modules, go.work members); go's usage errors are status error with a detail code. Same result shape and pending contract as project_validate.",
      inputSchema: object(
        {
          project,
          packages: array(str(), 'Package patterns (default ["./..."]).', { minItems: 1 }),
          run: str("Only tests matching this regexp (-run)."),
          timeout_ms: timeoutMs,
          wait_ms: waitMs,
          session_id: sessionId,
        },
        ["project"],
      ),
      ...validationJob,
      requiredCapabilities: () => ["validationGo"],
    },
    // ── git ──
    {
      name: "read_workspace_changes",
      category: "git",
      description:
        "Changed paths in the working tree with status and line counts. After a Runner crash or a lost answer, recovered_writes says how each interrupted write ended (rolled_back or completed), by the call_id its outcome_unknown failure named.",
      inputSchema: object({ project, session_id: sessionId }, ["project"]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["changes", "total_changes", "truncated", "branch", "head", "recovered_writes"],
      requiredCapabilities: () => ["gitReview"],
    },
    {
      name: "read_git_diff_hunks",
      category: "git",
      description:
        "Bounded diff hunks of the working tree (max_hunks {{max_hunks}}; context_lines {{context_lines}}). A hunk cut by the producer says truncated.",
      inputSchema: object(
        { project, paths: array(path), max_hunks: int(undefined, { minimum: 1 }), context_lines: int(undefined, { minimum: 0 }), session_id: sessionId },
        ["project"],
      ),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["hunks", "total_hunks", "truncated", "total_is_lower_bound"],
      clamps: [
        { path: "max_hunks", ceiling: 500, minimum: 1, default: 50 },
        { path: "context_lines", ceiling: 20, minimum: 0, default: 3 },
      ],
      requiredCapabilities: () => ["gitReview"],
    },
    {
      name: "read_git_review_summary",
      category: "git",
      description:
        "Per-file review summary (status, added/removed lines) against base (default HEAD), with totals. A file whose line counts are unknown (binary, or untracked and not counted) says counts_unknown; the line totals are then lower bounds (lines_lower_bound).",
      inputSchema: object({ project, base: str("Commit-ish to compare against."), session_id: sessionId }, ["project"]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "runner",
      implemented: true,
      resultFields: ["base", "base_commit", "files", "truncated", "totals"],
      requiredCapabilities: () => ["gitReview"],
    },
    // ── sessions ──
    {
      name: "create_session",
      category: "sessions",
      description: "Start a Workflow Session for a Project; returns session_ref (~s1) and session_id. Pass either as session_id to record calls into it.",
      inputSchema: object({ project, title: str() }, ["project"]),
      effect: "durable_state",
      risk: "low",
      authority: "project_read",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["session_ref", "session_id"],
    },
    {
      name: "close_session",
      category: "sessions",
      description: "Close a Workflow Session: it records no further calls; read_session_handoff still works. Closing twice is a no-op (closed_now: false).",
      inputSchema: object({ session_id: str("session_ref (~s1) or wc_sess_*.") }, ["session_id"]),
      effect: "durable_state",
      hints: { destructive: true, idempotent: true },
      risk: "low",
      authority: "session",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["session_id", "state", "closed_now"],
    },
    {
      name: "read_session_handoff",
      category: "sessions",
      description:
        "Bounded recap of a Workflow Session to resume from: the paths read and changed with their latest read_revision, the commands run with their outcome, pending Jobs with the exact follow-up that collects each, and counts. A recent call whose outcome was unknown after a Runner crash shows recovered: rolled_back or completed. A cut list says so. Never file contents.",
      inputSchema: object({ session_id: str("session_ref (~s1) or wc_sess_*.") }, ["session_id"]),
      effect: "read_only",
      risk: "low",
      authority: "session",
      execution: "ref_resolver",
      implemented: true,
      resultFields: [
        "session_ref",
        "session_id",
        "project",
        "state",
        "title",
        "created_at",
        "last_activity_at",
        "closed_at",
        "calls",
        "read",
        "changed",
        "run",
        "paths",
        "paths_truncated",
        "commands",
        "commands_truncated",
        "pending_jobs",
        "pending_jobs_total",
        "tools",
        "recent_calls",
        "truncated",
      ],
    },
    // ── agents ──
    {
      name: "create_agent",
      category: "agents",
      description:
        "Create a durable Agent (a worker identity you own) with its continuation Endpoint; returns agent_id, endpoint_id, controller_generation 1 and agent_continuation_ref (~a1).",
      inputSchema: object({ name: str(undefined, { minLength: 1, maxLength: 200 }) }, ["name"]),
      effect: "durable_state",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["agent_id", "endpoint_id", "controller_generation", "agent_continuation_ref"],
    },
    {
      name: "rotate_agent_continuation_endpoint",
      category: "agents",
      description:
        "Rotate an agent's continuation Endpoint to a new controller generation; earlier agent_continuation_refs and that agent's live attempt tuples become stale.",
      inputSchema: object({ agent_id: str(), endpoint_id: str(), expected_controller_generation: int(undefined, { minimum: 1 }) }, [
        "agent_id",
        "endpoint_id",
        "expected_controller_generation",
      ]),
      effect: "durable_state",
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["agent_id", "endpoint_id", "controller_generation", "agent_continuation_ref"],
    },
    {
      name: "create_agent_task",
      category: "agents",
      description:
        "Assign work in a Project to an Agent of your tenant. requester_agent_id (your own Agent) also receives the task's events. The same idempotency_key returns the first result.",
      inputSchema: object(
        {
          project,
          title: str(undefined, { minLength: 1, maxLength: 200 }),
          instructions: str(undefined, { maxLength: 20000 }),
          assignee_agent_id: agentId,
          requester_agent_id: agentId,
          idempotency_key: idempotencyKey,
        },
        ["project", "title", "instructions", "assignee_agent_id", "idempotency_key"],
      ),
      effect: "durable_state",
      risk: "medium",
      authority: "project_read",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["task_id", "state"],
    },
    {
      name: "list_agent_tasks",
      category: "agents",
      description:
        "Tasks you created or that are assigned to your Agents, newest first, optionally filtered. limit: {{limit}}; a cut page gives omitted and next_cursor.",
      inputSchema: object({ project, state: str(undefined, { enum: [...taskStates] }), assignee_agent_id: agentId, limit: pageLimit, cursor: pageCursor }),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      clamps: [{ path: "limit", ceiling: 100, minimum: 1, default: 20 }],
      implemented: true,
      resultFields: ["tasks", "omitted", "next_cursor"],
    },
    {
      name: "read_agent_task",
      category: "agents",
      description: "One Task: state, project, assignee, instructions, summary, and its current attempt (id, fence, state, lease).",
      inputSchema: object({ task_id: taskId }, ["task_id"]),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: [
        "task_id",
        "project_id",
        "title",
        "instructions",
        "state",
        "assignee_agent_id",
        "requester_agent_id",
        "created_at",
        "updated_at",
        "summary",
        "stop_reason",
        "current_attempt",
      ],
    },
    {
      name: "stop_agent_task",
      category: "agents",
      description: "Stop an unfinished Task; its live attempt loses its fence. Stopping a stopped Task returns the same result.",
      inputSchema: object({ task_id: taskId, reason: str(undefined, { minLength: 1, maxLength: 1000 }) }, ["task_id", "reason"]),
      effect: "durable_state",
      hints: { destructive: true, idempotent: true },
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["task_id", "state"],
    },
    {
      name: "start_agent_task_attempt",
      category: "agents",
      description:
        "Start an Attempt on a Task assigned to your Agent: a lease (lease_ms, {{lease_ms}}) and a fence higher than any earlier one. Returns attempt_ref (~t1) for edit_project_files/run_* calls. Keyed replay returns the same Attempt.",
      inputSchema: object({ task_id: taskId, assignee_agent_id: agentId, idempotency_key: idempotencyKey, lease_ms: int(undefined, { minimum: 1000 }) }, [
        "task_id",
        "assignee_agent_id",
        "idempotency_key",
      ]),
      effect: "durable_state",
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["task_id", "attempt_id", "assignee_agent_id", "attempt_fence", "attempt_controller_generation", "attempt_ref", "lease_expires_at"],
      clamps: [{ path: "lease_ms", ceiling: 600_000, minimum: 1000, default: 60_000 }],
    },
    {
      name: "heartbeat_agent_task_attempt",
      category: "agents",
      description: "Renew an Attempt's lease by its lease_ms. Fails closed (fence_stale) once the attempt was taken over, stopped or its lease lapsed.",
      inputSchema: attemptTuple({}, []),
      effect: "durable_state",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["lease_expires_at"],
    },
    {
      name: "complete_agent_task_attempt",
      category: "agents",
      description:
        "Finish an Attempt and its Task with outcome succeeded or failed and a summary. Fails closed (fence_stale) unless the attempt still holds its fence and lease.",
      inputSchema: attemptTuple({ outcome: str(undefined, { enum: ["succeeded", "failed"] }), summary: str(undefined, { maxLength: 4000 }) }, [
        "outcome",
        "summary",
      ]),
      effect: "durable_state",
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["task_id", "attempt_id", "attempt_state", "task_state"],
    },
    {
      name: "reconcile_agent_task_attempt",
      category: "agents",
      description:
        "Report what is known of an Attempt (also a superseded one): its state, whether it still holds the fence, and outcome_unknown when it ended without a completion. Never retries anything.",
      inputSchema: attemptTuple({}, []),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: [
        "attempt_id",
        "attempt_state",
        "holds_fence",
        "attempt_fence",
        "current_fence",
        "task_state",
        "outcome_unknown",
        "lease_expires_at",
        "summary",
      ],
    },
    {
      name: "start_agent_task_endpoint_continuation",
      category: "agents",
      description:
        "Ask for the assignee's Endpoint to be continued on this Attempt. Pass attempt_ref, or the explicit task_id, attempt_id, assignee_agent_id, attempt_fence and attempt_controller_generation; a stale ref fails closed. Reports dispatch, fresh turn and consume separately.",
      inputSchema: object({
        attempt_ref: str(),
        task_id: str(),
        attempt_id: str(),
        assignee_agent_id: str(),
        attempt_fence: int(undefined, { minimum: 0 }),
        attempt_controller_generation: int(undefined, { minimum: 0 }),
      }),
      effect: "durable_state",
      risk: "medium",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["task_id", "attempt_id", "dispatch", "fresh_turn", "consume"],
    },
    {
      name: "wait_for_agent_events",
      category: "agents",
      description:
        "Wait up to wait_ms ({{wait_ms}}) for events of your Agent (pass agent_id or agent_continuation_ref) after after_cursor (default: the start). Returns events, the next cursor and wait_state ready or timeout; the same cursor replays the same events.",
      inputSchema: object({ agent_continuation_ref: str(), agent_id: agentId, after_cursor: str(), wait_ms: int(undefined, { minimum: 0 }) }),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      implemented: true,
      resultFields: ["events", "cursor", "wait_state", "wait_ms", "more"],
      clamps: [WAIT_MS],
    },
    // ── presentation ──
    {
      name: "present_agent_continuation",
      category: "presentation",
      description:
        "Show your Agent's pending events in a card. When events are pending the card asks the Host for a fresh turn carrying the exact wait_for_agent_events call; it never sends twice. Pass agent_continuation_ref, or agent_id, endpoint_id and expected_controller_generation. End your turn normally after presenting.",
      inputSchema: object({
        agent_continuation_ref: str(),
        agent_id: str(),
        endpoint_id: str(),
        expected_controller_generation: int(undefined, { minimum: 0 }),
      }),
      effect: "presentation",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      direct: { rank: 20, reason: "Continuation" },
      appResource: "ui://webcodex/agent-continuation.html",
      resultFields: agentContinuationResult,
      implemented: true,
    },
    {
      name: "present_job_terminal_continuation",
      category: "presentation",
      description:
        "Show a pending Job's live state in a card. When the Job ends the card asks the Host for a fresh turn carrying the exact wait_for_job_terminal call; it never sends twice. End your turn normally after presenting: do not wait in this turn.",
      inputSchema: object({ project, job_id: jobId }, ["project", "job_id"]),
      effect: "presentation",
      risk: "low",
      authority: "project_read",
      execution: "broker",
      direct: { rank: 21, reason: "Continuation" },
      appResource: "ui://webcodex/job-continuation.html",
      resultFields: jobContinuationResult,
      implemented: true,
    },
    {
      name: "present_work_result",
      category: "presentation",
      description:
        "Show a work result card: your summary, the changed files with +/- line counts, the latest validation result and the project's pending Jobs.",
      inputSchema: object({ project, title: str(undefined, { minLength: 1 }), summary: str(), session_id: sessionId }, ["project", "title", "summary"]),
      effect: "presentation",
      risk: "low",
      authority: "project_read",
      execution: "gateway",
      direct: { rank: 22, reason: "Presentation" },
      appResource: "ui://webcodex/work-result.html",
      resultFields: ["changed_files", "total_changed_files", "changes_unavailable", "latest_validation", "pending_jobs", "pending_jobs_truncated"],
      implemented: true,
    },
    {
      name: "present_goal_plan",
      category: "presentation",
      description:
        "Show a goal and its steps with states. Presenting the same goal again updates the same card (a new revision). Display only: it runs nothing.",
      inputSchema: object(
        {
          project,
          goal: str(undefined, { minLength: 1, maxLength: 200 }),
          steps: array(
            object(
              { title: str(undefined, { minLength: 1, maxLength: 200 }), state: str(undefined, { enum: ["pending", "in_progress", "completed", "blocked"] }) },
              ["title", "state"],
            ),
            "Up to {{maxItems}} steps.",
            { minItems: 1, maxItems: 50 },
          ),
        },
        ["goal", "steps"],
      ),
      effect: "presentation",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      direct: { rank: 23, reason: "Presentation" },
      appResource: "ui://webcodex/goal-plan.html",
      resultFields: ["plan_id", "revision", "step_counts"],
      implemented: true,
    },
    // ── app-only helpers (called by a mounted card, never by the model) ──
    {
      name: "read_job_continuation",
      category: "presentation",
      description: "Card helper: the Job's current state and continuation facts.",
      inputSchema: object({ project, job_id: jobId }, ["project", "job_id"]),
      effect: "read_only",
      risk: "low",
      authority: "project_read",
      execution: "broker",
      appOnly: true,
      resultFields: jobContinuationResult,
      implemented: true,
    },
    {
      name: "update_job_continuation",
      category: "presentation",
      description: "Card helper: claim the one continuation message before sending it, then record the Host's answer (accepted, rejected, or uncertain).",
      inputSchema: object({ project, job_id: jobId, step: str(undefined, { enum: ["claim", "accepted", "rejected", "uncertain"] }) }, [
        "project",
        "job_id",
        "step",
      ]),
      effect: "durable_state",
      risk: "low",
      authority: "project_read",
      execution: "broker",
      appOnly: true,
      resultFields: jobContinuationResult,
      implemented: true,
    },
    {
      name: "read_agent_continuation",
      category: "presentation",
      description: "Card helper: the Agent's pending events after the card's cursor and the continuation facts.",
      inputSchema: object(agentCardTarget, ["agent_id", "endpoint_id", "expected_controller_generation", "after_cursor"]),
      effect: "read_only",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      appOnly: true,
      resultFields: agentContinuationResult,
      implemented: true,
    },
    {
      name: "update_agent_continuation",
      category: "presentation",
      description: "Card helper: claim the one continuation message before sending it, then record the Host's answer (accepted, rejected, or uncertain).",
      inputSchema: object({ ...agentCardTarget, step: str(undefined, { enum: ["claim", "accepted", "rejected", "uncertain"] }) }, [
        "agent_id",
        "endpoint_id",
        "expected_controller_generation",
        "after_cursor",
        "step",
      ]),
      effect: "durable_state",
      risk: "low",
      authority: "principal",
      execution: "ref_resolver",
      appOnly: true,
      resultFields: agentContinuationResult,
      implemented: true,
    },
  ] satisfies (ToolDefinition & { readonly name: Lowercase<string> })[]
).map(renderLimitText);

type Entry = (typeof definitions)[number];
/** The name of a catalog tool. */
export type ToolName = Entry["name"];
/** The names of the catalog tools with these fields, e.g. `{ readonly execution: "runner" }` (tool-names.ts). */
export type ToolNameWhere<Fields> = Extract<Entry, Fields>["name"];
/** A tool's input schema as written in the catalog. */
export type ToolInputSchema<N extends ToolName> = Extract<Entry, { readonly name: N }>["inputSchema"];
/** The arguments a tool's input schema admits, as a TypeScript type. */
export type ToolInput<N extends ToolName> = Static<ToolInputSchema<N>>;

const byName = new Map<string, ToolDefinition>(definitions.map((d) => [d.name, d]));

/** Every canonical tool, in catalog order. */
export function toolDefinitions(): readonly ToolDefinition[] {
  return definitions;
}

export function toolDefinition(name: string): ToolDefinition | undefined {
  return byName.get(name);
}

/** A named limit of a tool (ToolDefinition.limits), for the service that enforces it. Throws when absent. */
export function toolLimit(tool: string, name: string): number {
  const limit = byName.get(tool)?.limits?.[name];
  if (limit === undefined) throw new Error(`no limit ${name} for ${tool}`);
  return limit;
}

/**
 * A tool's clamp rule for one argument: the one owner of that limit's ceiling and default,
 * read by the Runner, the broker and the services that apply it. Throws for a rule the
 * catalog does not have (a programming error, caught at startup).
 */
export function clampRule(tool: string, path: string): ClampRule & { readonly default: number } {
  const rule = byName.get(tool)?.clamps?.find((r) => r.path === path);
  if (!rule || rule.default === undefined) throw new Error(`no clamp rule with a default for ${tool} ${path}`);
  return rule as ClampRule & { readonly default: number };
}
