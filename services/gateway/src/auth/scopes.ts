/**
 * OAuth scopes of the WebCodex MCP resource. The scope a tools/call needs is derived from the
 * tool's `effect` in the one catalog (`toolDefinition`), never from a second table: read-only
 * tools need `webcodex:read`, anything that can change state needs `webcodex:write`.
 * `webcodex:write` implies `webcodex:read`.
 */
import { PipelineStage, forwardedCall, ReasonCode, toolDefinition, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { Caller } from "../auth.js";

export const WebcodexScope = {
  read: "webcodex:read",
  write: "webcodex:write",
} as const;
export type WebcodexScope = (typeof WebcodexScope)[keyof typeof WebcodexScope];

/** Every scope this resource understands, for RFC 9728 `scopes_supported` and challenges. */
export const SUPPORTED_SCOPES: readonly WebcodexScope[] = [WebcodexScope.read, WebcodexScope.write];

/**
 * The scope a tools/call of `tool` with `args` needs. call_runtime_tool needs the scope of the
 * tool it runs. Unknown tools need read (they fail closed later, in normalization).
 */
export function requiredScope(tool: unknown, args: unknown): WebcodexScope {
  const def = toolDefinition(forwardedCall(typeof tool === "string" ? tool : "", args).tool);
  // A tool whose effect depends on its target checks the write scope per target (mcp_tool).
  return def === undefined || def.effect === "read_only" || def.effectByTarget === true ? WebcodexScope.read : WebcodexScope.write;
}

/** Whether the granted scopes satisfy `required` (write implies read). */
export function hasScope(granted: readonly string[], required: WebcodexScope): boolean {
  return granted.includes(required) || (required === WebcodexScope.read && granted.includes(WebcodexScope.write));
}

/**
 * The scope value of an insufficient_scope challenge: what the caller already holds of this
 * resource's scopes plus the one it lacks, so a step-up authorization does not drop any.
 */
export function stepUpScopes(granted: readonly string[], required: WebcodexScope): string[] {
  return SUPPORTED_SCOPES.filter((s) => s === required || granted.includes(s));
}

/**
 * Pipeline hook (defence in depth): the structured failure of a tool call whose caller lacks
 * the scope it needs, or undefined when the scope is held. The HTTP layer already answers such
 * calls with 403 before they reach the pipeline.
 */
export function checkToolScope(caller: Caller, tool: string, args: unknown): ToolFailure | undefined {
  const required = requiredScope(tool, args);
  if (hasScope(caller.scopes, required)) return undefined;
  return toolFailure(ReasonCode.insufficientScope, PipelineStage.admission, {
    detail_code: "missing_scope",
    evidence: { required_scope: required },
    message: `This call needs the ${required} scope; authorize again with it.`,
  });
}
