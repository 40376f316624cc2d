/**
 * Parser-ready follow-up calls. follow_up_kind is the Host's execution posture:
 * mechanically_followable means the Server already made the semantic choice for this exact
 * call; fallback_recovery means it is only for explicit recovery or detail expansion.
 *
 * Every follow-up the code can build is one of the named builders below, each registered in
 * `followUpBuilders` with sample inputs; all of them go through `buildFollowUp`, which
 * validates the arguments against the target tool's registered input schema. The contract
 * test iterates that table, and a lint rule keeps `follow_up_kind` literals out of other files.
 */
import { toolRoute } from "./admission.js";
import { toolDefinition } from "./catalog.js";
import { validateToolArguments } from "./schema-validator.js";
import type { FollowUp, FollowUpKind } from "./follow-up-shape.js";

export type { FollowUp, FollowUpKind } from "./follow-up-shape.js";

/** The Gateway wrapper a Host that only knows tools/list calls to reach any admitted Gateway tool. */
export const GATEWAY_WRAPPER = "call_runtime_tool";

/**
 * The one way to make a follow-up: the arguments must validate unchanged against the target
 * tool's registered input schema, and the call is generated for the target's current route
 * (its Direct policy in toolDefinitions()): a Direct target is called by its own name, a
 * Gateway target through `call_runtime_tool {tool, arguments}`, so a Host can execute the
 * follow-up exactly as returned. A violation is a programming error and throws. Not exported
 * from the package: add a named builder here.
 */
export function buildFollowUp(kind: FollowUpKind, tool: string, args: Record<string, unknown>): FollowUp {
  const def = toolDefinition(tool);
  if (!def) throw new Error(`follow-up for unknown tool ${tool}`);
  const violation = validateToolArguments(tool, args);
  if (violation) throw new Error(`follow-up for ${tool} does not validate: ${violation.reason_code} at ${violation.field}`);
  if (toolRoute(def).primary === "direct") return { follow_up_kind: kind, tool, arguments: args };
  return { follow_up_kind: kind, tool: GATEWAY_WRAPPER, arguments: { tool, arguments: args } };
}

/** The tool a follow-up finally runs and its arguments, looking through the Gateway wrapper. */
export function followUpTarget(followUp: FollowUp): { tool: string; arguments: Record<string, unknown> } {
  if (followUp.tool !== GATEWAY_WRAPPER) return { tool: followUp.tool, arguments: followUp.arguments };
  return { tool: followUp.arguments["tool"] as string, arguments: followUp.arguments["arguments"] as Record<string, unknown> };
}

/**
 * The one follow-up of a pending execution (gateway): wait for the same Job. A call made with
 * session_id carries it on, so the Job's terminal result is recorded in the same Session.
 */
export function waitForJobFollowUp(project: string, jobId: string, sessionId?: string): FollowUp {
  return buildFollowUp("mechanically_followable", "wait_for_job_terminal", {
    project,
    job_id: jobId,
    ...(sessionId !== undefined ? { session_id: sessionId } : {}),
  });
}

/** Recovery after a stale read_revision or an expected_match_count mismatch (gateway): re-read the file. */
export function rereadFollowUp(project: string, path: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_files", { project, files: [{ path }] });
}

/** Recovery after a stale project_ref or a Session whose Project is gone (ref-resolver): current refs. */
export function listProjectsFollowUp(): FollowUp {
  return buildFollowUp("fallback_recovery", "list_projects", {});
}

/**
 * After a Job lost with its Runner (runner-broker Job desk): its effect is unknown, so inspect
 * the workspace; never a re-run.
 */
export function inspectWorkspaceFollowUp(project: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_workspace_changes", { project });
}

/** The one follow-up of a pending create_project (gateway): wait for the same Project to be ready. */
export function waitForProjectFollowUp(projectId: string): FollowUp {
  return buildFollowUp("mechanically_followable", "wait_for_project_ready", { project: projectId });
}

/** After a stale fence, a held lease or an unknown task id (ref-resolver): read the Task's current state. */
export function readAgentTaskFollowUp(taskId: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_agent_task", { task_id: taskId });
}

/** The list-shaped tools that page with omitted and next_cursor (paging.ts). */
export type PagedTool = "list_projects" | "list_agent_tasks";

/** Recovery after a cursor that cannot continue: the same listing from its first page (its filters, no cursor). */
export function restartListFollowUp(tool: PagedTool, args: Record<string, unknown>): FollowUp {
  return buildFollowUp("fallback_recovery", tool, args);
}

/** Recovery after an unknown task id (ref-resolver): the caller's Tasks. */
export function listAgentTasksFollowUp(): FollowUp {
  return buildFollowUp("fallback_recovery", "list_agent_tasks", {});
}

/**
 * After wait_for_agent_events timed out or returned a bounded page (ref-resolver): the same
 * wait from the returned cursor, with the same selector.
 */
export function waitForAgentEventsFollowUp(selector: { agent_id: string } | { agent_continuation_ref: string }, cursor: string, waitMs?: number): FollowUp {
  return buildFollowUp("mechanically_followable", "wait_for_agent_events", {
    ...selector,
    after_cursor: cursor,
    ...(waitMs !== undefined ? { wait_ms: waitMs } : {}),
  });
}

/**
 * Recovery after a closed or unknown Workflow Session (ref-resolver, gateway): start a fresh
 * Session for the same Project. Only for explicit recovery: the old Session's record is not
 * carried over.
 */
export function createSessionFollowUp(project: string): FollowUp {
  return buildFollowUp("fallback_recovery", "create_session", { project });
}

/**
 * The exact inverse of an applied edit_project_files call (gateway, from the Runner's
 * undo_changes): one call that restores what the edit changed, guarded by the revisions the
 * edit produced, so it fails as stale rather than overwrite a later change. Only for an
 * explicit decision to undo. The same Session and Attempt fence as the edit.
 */
export function undoEditFollowUp(project: string, changes: readonly Record<string, unknown>[], sessionId?: string, attemptRef?: string): FollowUp {
  return buildFollowUp("fallback_recovery", "edit_project_files", {
    project,
    changes,
    // The undo offers its own inverse (a redo), as the edit it reverses did.
    include_undo: true,
    ...(sessionId !== undefined ? { session_id: sessionId } : {}),
    ...(attemptRef !== undefined ? { attempt_ref: attemptRef } : {}),
  });
}

/** The fresh description (input schema and binding) of one upstream MCP tool. */
export function describeUpstreamToolFollowUp(server: string, tool: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_tool_manifest", { namespace: `mcp:${server}`, tool });
}

/** The tools of one upstream MCP server (its namespace's first page). */
export function listUpstreamToolsFollowUp(server: string): FollowUp {
  return buildFollowUp("fallback_recovery", "list_tools", { namespace: `mcp:${server}` });
}

/**
 * Recovery after an unknown or missing argument (gateway): the tool's exact schema. Only for
 * explicit recovery: which field was meant is the caller's choice.
 */
export function readToolManifestFollowUp(tool: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_tool_manifest", { tool });
}

interface FollowUpBuilder<A extends unknown[]> {
  readonly build: (...args: A) => FollowUp;
  /** Inputs the contract test builds it with: each must give arguments that validate. */
  readonly samples: readonly A[];
}

const builder = <A extends unknown[]>(build: (...args: A) => FollowUp, samples: readonly A[]): FollowUpBuilder<A> => ({ build, samples });

/** Every follow-up builder, by name. A new builder is added here, or the contract test fails. */
export const followUpBuilders = {
  waitForJobFollowUp: builder(waitForJobFollowUp, [
    ["~p1", "job_1"],
    ["agent:acme:demo", "job_1", "~s1"],
    ["~p1", "job_1", "wc_sess_0123"],
  ]),
  rereadFollowUp: builder(rereadFollowUp, [
    ["~p1", "src/a.ts"],
    ["agent:acme:demo", "README.md"],
  ]),
  listProjectsFollowUp: builder(listProjectsFollowUp, [[]]),
  waitForProjectFollowUp: builder(waitForProjectFollowUp, [["agent:acme:demo"]]),
  inspectWorkspaceFollowUp: builder(inspectWorkspaceFollowUp, [["agent:acme:demo"], ["~p1"]]),
  readAgentTaskFollowUp: builder(readAgentTaskFollowUp, [["wc_task_0123456789abcdef0123456789abcdef"]]),
  listAgentTasksFollowUp: builder(listAgentTasksFollowUp, [[]]),
  restartListFollowUp: builder(restartListFollowUp, [
    ["list_projects", {}],
    ["list_projects", { name: "api", limit: 5 }],
    ["list_agent_tasks", { state: "open" }],
  ]),
  waitForAgentEventsFollowUp: builder(waitForAgentEventsFollowUp, [
    [{ agent_id: "wc_agent_0123456789abcdef0123456789abcdef" }, "0"],
    [{ agent_continuation_ref: "~a1" }, "12", 30000],
  ]),
  createSessionFollowUp: builder(createSessionFollowUp, [["~p1"], ["agent:acme:demo"]]),
  describeUpstreamToolFollowUp: builder(describeUpstreamToolFollowUp, [["tracker", "search_issues"]]),
  listUpstreamToolsFollowUp: builder(listUpstreamToolsFollowUp, [["tracker"]]),
  readToolManifestFollowUp: builder(readToolManifestFollowUp, [["run_process"], ["edit_project_files"]]),
  undoEditFollowUp: builder(undoEditFollowUp, [
    [
      "~p1",
      [
        {
          kind: "edit",
          path: "src/a.ts",
          expected_read_revision: "r_0123456789abcdef",
          edits: [{ replace_exact: { old_text: "b", new_text: "a" }, occurrence: 2 }],
        },
      ],
    ],
    [
      "agent:acme:demo",
      [
        { kind: "delete", path: "new.txt", expected_read_revision: "r_0123456789abcdef" },
        { kind: "move", path: "b.ts", destination: "a.ts", expected_read_revision: "r_0123456789abcdef" },
      ],
      "~s1",
      "~t1",
    ],
  ]),
} as const;
