/**
 * The late, pure model projection of a call's outcome: sparse success with at most one
 * follow-up, or the structured failure. It never writes into the canonical result.
 */
import { CODE_CELL_TOOL, projectSuccess, undoEditFollowUp, waitForJobFollowUp, waitForProjectFollowUp } from "@webcodex/contracts";
import type { GatewayArguments, InputNormalization, ToolDefinition } from "@webcodex/contracts";
import type { Outcome } from "./call-context.js";
import { presentationText } from "./presentation.js";
import { cellText } from "./code-mode/cell.js";

export interface ModelResult {
  structuredContent: Record<string, unknown>;
  isError: boolean;
  /** The text content when it is not the JSON of structuredContent (presentation results, a code cell's text). */
  text?: string;
  /** Called by the transport once the result was handed to the caller's connection. */
  delivered?: () => void;
}

/**
 * Builds the model result of an outcome: the late, pure projection. It never writes into the
 * canonical result; a pending run gets its one wait_for_job_terminal follow-up here.
 */
export function projectForModel(
  def: ToolDefinition | undefined,
  outcome: Outcome,
  normalization: InputNormalization | undefined,
  args: Record<string, unknown>,
): ModelResult {
  if (!outcome.ok) return { structuredContent: outcome.failure as unknown as Record<string, unknown>, isError: true };
  const canonical = outcome.result;
  const pendingJob = canonical["execution_state"] === "pending" && typeof canonical["job_id"] === "string" ? canonical["job_id"] : undefined;
  const pendingProject = canonical["project_state"] === "pending" && typeof canonical["project_id"] === "string" ? canonical["project_id"] : undefined;
  // The call's normalized arguments, validated against def's input schema: the Project, Session and Attempt it named
  // (a Job or an undo comes from a Runner tool, which names its Project).
  const { project, session_id: sessionId, attempt_ref: attemptRef }: GatewayArguments = args;
  const followUp =
    pendingJob !== undefined && project !== undefined
      ? waitForJobFollowUp(project, pendingJob, sessionId)
      : pendingProject !== undefined
        ? waitForProjectFollowUp(pendingProject)
        : undefined;
  const undo =
    project !== undefined && Array.isArray(canonical["undo_changes"]) && canonical["undo_changes"].length > 0
      ? undoEditFollowUp(project, canonical["undo_changes"] as Array<Record<string, unknown>>, sessionId, attemptRef)
      : undefined;
  const extras = { ...(normalization ? { normalization } : {}), ...(followUp ? { followUp } : {}), ...(undo ? { undo } : {}) };
  const result = def ? projectSuccess(def, canonical, extras) : { ...canonical };
  const text =
    def?.name === CODE_CELL_TOOL
      ? cellText(result)
      : def?.direct !== undefined && def.category === "presentation"
        ? presentationText(def.name, args, result)
        : undefined;
  return { structuredContent: result, isError: false, ...(text !== undefined ? { text } : {}) };
}
