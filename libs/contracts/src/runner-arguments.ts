/**
 * What a Runner's handler is given: a Runner tool's canonical arguments without the fields the
 * gateway resolves and admits itself (the target Project, the Workflow Session, the Attempt).
 * The call id travels beside the arguments (the dispatch's callId), never inside them.
 */
import type { RunnerToolName } from "./tool-names.js";
import type { CanonicalToolInput } from "./normalize.js";

/** The arguments the gateway keeps: it resolves `project`, records into `session_id` and admits `attempt_ref`. */
export type GatewayArgument = "project" | "session_id" | "attempt_ref";

/** A Runner tool's arguments as its handler gets them: normalized, validated, without the gateway's fields. */
export type RunnerArguments<N extends RunnerToolName> = Omit<CanonicalToolInput<N>, GatewayArgument>;

/** The arguments dispatched to the Runner: the canonical arguments less every GatewayArgument. */
export function runnerArguments(args: Record<string, unknown>): Record<string, unknown> {
  const { project: _p, session_id: _s, attempt_ref: _a, ...rest } = args;
  return rest;
}
