/**
 * What a Runner's handler is given: a Runner tool's canonical arguments without the fields the
 * gateway resolves and admits itself (the target Project, the Workflow Session, the Attempt).
 * The call id travels beside the arguments (the dispatch's callId), never inside them.
 */
import type { ToolInput, ToolName } from "./catalog.js";
import type { RunnerToolName } from "./tool-names.js";
import type { CanonicalToolInput } from "./normalize.js";

/** The arguments the gateway keeps: it resolves `project`, records into `session_id` and admits `attempt_ref`. */
export type GatewayArgument = "project" | "session_id" | "attempt_ref";

/** The type of argument K in the tools N whose input schema has it (`never` when none has). */
type ArgumentIn<N extends ToolName, K extends string> = N extends ToolName ? (K extends keyof ToolInput<N> ? NonNullable<ToolInput<N>[K]> : never) : never;

/**
 * The gateway's arguments of a validated call of any catalog tool, typed from the input schemas
 * that have them; each is absent where the tool's schema has no such argument (or the call left
 * an optional one out).
 */
export type GatewayArguments = { [K in GatewayArgument]?: ArgumentIn<ToolName, K> };

/** A Runner tool's arguments as its handler gets them: normalized, validated, without the gateway's fields. */
export type RunnerArguments<N extends RunnerToolName> = Omit<CanonicalToolInput<N>, GatewayArgument>;

/** The arguments dispatched to the Runner: the canonical arguments less every GatewayArgument. */
export function runnerArguments(args: Record<string, unknown>): Record<string, unknown> {
  const { project: _p, session_id: _s, attempt_ref: _a, ...rest } = args;
  return rest;
}
