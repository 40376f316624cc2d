/**
 * The failures the MCP plugin gateway answers with: each says what was (not) sent upstream and,
 * where one helps, carries the follow-up that repairs it.
 */
import { describeUpstreamToolFollowUp, listUpstreamToolsFollowUp, PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { Outcome } from "../call-context.js";
import type { UpstreamServer } from "./config.js";
import { UpstreamError } from "./connection.js";

export const fail = (reason: ReasonCode, stage: PipelineStage, options: Parameters<typeof toolFailure>[2]): Outcome => ({
  ok: false,
  failure: toolFailure(reason, stage, options),
});

export const isOutcome = (v: unknown): v is Outcome => typeof v === "object" && v !== null && "ok" in v && typeof (v as { ok: unknown }).ok === "boolean";

export const unknownNamespace = (field: string): Outcome =>
  fail(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "unknown_namespace",
    evidence: { field },
    message: "No upstream MCP server of this name is available to you; list_tools names the namespaces you may use.",
  });

export const missingTool = (server: UpstreamServer): Outcome =>
  fail(ReasonCode.unknownTool, PipelineStage.admission, {
    detail_code: "upstream_tool_not_found",
    evidence: { field: "/tool", server: server.id },
    message: `Upstream ${server.id} offers no tool of this name to you; list_tools with namespace mcp:${server.id} names them.`,
  });

/** The caller has no usable credential for an OAuth upstream: authorize at `authorizationUrl`, then run the follow-up. */
export const authorizationRequired = (server: UpstreamServer, authorizationUrl: string, tool: string | undefined): Outcome =>
  fail(ReasonCode.upstreamAuthorizationRequired, PipelineStage.authorization, {
    ...(tool === undefined ? { detail_code: "listing" } : {}),
    evidence: { server: server.id, ...(tool !== undefined ? { tool } : {}), authorization_url: authorizationUrl },
    message: `Upstream ${server.id} acts for you only once you authorize it: open authorization_url, sign in and allow access, then run the follow-up. Nothing was sent.`,
    follow_up: tool === undefined ? listUpstreamToolsFollowUp(server.id) : describeUpstreamToolFollowUp(server.id, tool),
  });

/**
 * An upstream request that failed. `effectful`: the request was a tool call, so one that was
 * sent without an answer is outcome_unknown (and never re-sent).
 */
export function unavailable(server: UpstreamServer, error: unknown, effectful: boolean): Outcome {
  const e = error instanceof UpstreamError ? error : new UpstreamError("connection_lost", true, "the upstream call failed");
  if (e.detail === "rejected")
    return fail(ReasonCode.invalidValue, PipelineStage.execution, {
      detail_code: "upstream_rejected",
      evidence: { server: server.id, upstream_error_code: e.upstreamCode ?? 0 },
      message: "The upstream server answered with a protocol error and did not run the call.",
    });
  const unknown = effectful && e.sent;
  return fail(ReasonCode.upstreamUnavailable, PipelineStage.dispatch, {
    detail_code: e.detail,
    outcome_unknown: unknown,
    evidence: { server: server.id },
    message: `Upstream ${server.id}: ${e.message}; ${unknown ? "the call was sent and its effect is unknown: it is not re-sent" : "nothing was run"}.`,
  });
}
