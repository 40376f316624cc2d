/**
 * Parser-ready follow-up calls. follow_up_kind is the Host's execution posture:
 * mechanically_followable means the Server already made the semantic choice for this exact
 * call; fallback_recovery means it is only for explicit recovery or detail expansion.
 * Build them only with `buildFollowUp` (catalog.ts), which validates the arguments against the
 * target tool's registered input schema.
 */
export type FollowUpKind = "mechanically_followable" | "fallback_recovery";

export interface FollowUp {
  follow_up_kind: FollowUpKind;
  tool: string;
  arguments: Record<string, unknown>;
}

import { validateToolArguments } from "./schema-validator.js";

/**
 * The only way to make a follow-up: the arguments must validate unchanged against the
 * target tool's registered input schema, so a Host can execute it as is. A violation is a
 * programming error and throws.
 */
export function buildFollowUp(kind: FollowUpKind, tool: string, args: Record<string, unknown>): FollowUp {
  const violation = validateToolArguments(tool, args);
  if (violation) throw new Error(`follow-up for ${tool} does not validate: ${violation.reason_code} at ${violation.field}`);
  return { follow_up_kind: kind, tool, arguments: args };
}

/**
 * The one follow-up of a pending execution: wait for the same Job. A call made with
 * session_id carries it on, so the Job's terminal result is recorded in the same Session.
 */
export function waitForJobFollowUp(project: string, jobId: string, sessionId?: string): FollowUp {
  return buildFollowUp("mechanically_followable", "wait_for_job_terminal", { project, job_id: jobId, ...(sessionId !== undefined ? { session_id: sessionId } : {}) });
}

/** Recovery after a stale guard or a count mismatch: re-read the file. */
export function rereadFollowUp(project: string, path: string): FollowUp {
  return buildFollowUp("fallback_recovery", "read_files", { project, files: [{ path }] });
}
