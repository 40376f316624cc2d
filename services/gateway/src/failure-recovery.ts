/** The recovery follow-up a failure carries, as the reason-code table names it. */
import {
  createSessionFollowUp,
  describeUpstreamToolFollowUp,
  failureFollowUpBuilder,
  listUpstreamToolsFollowUp,
  inspectWorkspaceFollowUp,
  listProjectsFollowUp,
  readAgentTaskFollowUp,
  readToolManifestFollowUp,
  rereadFollowUp,
  restartListFollowUp,
  toolDefinition,
  waitForProjectFollowUp,
} from "@webcodex/contracts";
import type { FollowUp, ToolDefinition, ToolFailure } from "@webcodex/contracts";

/**
 * The recovery follow-up a failure carries, as the reason-code table names it, built from
 * what the call and the failure's evidence prove (the caller's own project selector, the
 * path the evidence names). A failure that already carries one keeps it; a row whose inputs
 * are not known here (no project, no single path, an effect that cannot have happened)
 * carries none, as the table records. A workspace inspection is offered only after a call
 * of a tool that can change the workspace (`touchesWorkspace`); a manifest is offered for a field error of a known tool: after a failed create_session
 * there is nothing in the workspace to inspect.
 */
export function withRecovery(failure: ToolFailure, project: string | undefined, tool?: string): ToolFailure {
  if (failure.follow_up) return failure;
  const builder = failureFollowUpBuilder(failure.reason_code, failure.detail_code);
  const path = typeof failure.evidence?.["path"] === "string" ? (failure.evidence["path"] as string) : undefined;
  let followUp: FollowUp | undefined;
  switch (builder) {
    case "listProjectsFollowUp":
      followUp = listProjectsFollowUp();
      break;
    case "rereadFollowUp":
      if (project !== undefined && path !== undefined) followUp = rereadFollowUp(project, path);
      break;
    case "inspectWorkspaceFollowUp":
      if (project !== undefined && failure.outcome_unknown && touchesWorkspace(tool === undefined ? undefined : toolDefinition(tool)))
        followUp = inspectWorkspaceFollowUp(project);
      break;
    case "createSessionFollowUp":
      if (project !== undefined) followUp = createSessionFollowUp(project);
      break;
    case "readAgentTaskFollowUp": {
      const taskId = failure.evidence?.["task_id"];
      if (typeof taskId === "string") followUp = readAgentTaskFollowUp(taskId);
      break;
    }
    case "waitForProjectFollowUp":
      if (project !== undefined) followUp = waitForProjectFollowUp(project);
      break;
    case "describeUpstreamToolFollowUp": {
      const server = failure.evidence?.["server"];
      const upstreamTool = failure.evidence?.["tool"];
      if (typeof server === "string" && typeof upstreamTool === "string") followUp = describeUpstreamToolFollowUp(server, upstreamTool);
      break;
    }
    case "listUpstreamToolsFollowUp": {
      const server = failure.evidence?.["server"];
      if (typeof server === "string") followUp = listUpstreamToolsFollowUp(server);
      break;
    }
    case "readToolManifestFollowUp":
      if (tool !== undefined && toolDefinition(tool) !== undefined) followUp = readToolManifestFollowUp(tool);
      break;
    case "waitForJobFollowUp":
    case "restartListFollowUp":
      // Built where the cursor is read, with the listing's filters; here only its first page.
      if (tool === "list_projects" || tool === "list_agent_tasks") followUp = restartListFollowUp(tool, {});
      break;
    case "listAgentTasksFollowUp":
    case "waitForAgentEventsFollowUp":
    case "undoEditFollowUp":
    case undefined:
      break;
  }
  return followUp ? { ...failure, follow_up: followUp } : failure;
}

/** Whether a call of `def` can change the workspace (edits, processes): what a workspace inspection can show. */
export function touchesWorkspace(def: ToolDefinition | undefined): boolean {
  return def !== undefined && (def.effect === "workspace_write" || def.effect === "process_execution");
}

/** The caller's own project selector, from the normalized arguments or, before normalization, the raw ones. */
export function projectSelector(args: Record<string, unknown>, rawArgs: unknown): string | undefined {
  const own = args["project"];
  if (typeof own === "string") return own;
  const raw = typeof rawArgs === "object" && rawArgs !== null ? (rawArgs as Record<string, unknown>)["project"] : undefined;
  return typeof raw === "string" && raw !== "" ? raw : undefined;
}
