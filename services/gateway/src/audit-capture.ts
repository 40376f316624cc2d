/**
 * Audit capture: the ActionAudit record of a call, taken from its canonical outcome before the
 * late model projection, and the record of a call refused before the pipeline (scope, rate
 * limit). Pure; the recorder stores what is captured here.
 */
import { randomUUID } from "node:crypto";
import { CallOutcome, PipelineStage, forwardedCall, ReasonCode, toolDefinition, toolFailure } from "@webcodex/contracts";
import type { InputNormalization, ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { argumentShape } from "@webcodex/platform";
import type { ArgumentShapeSketch, ShapeSchema } from "@webcodex/platform";
import type { Caller } from "./auth.js";
import type { ActionRecordInit } from "./audit-recorder.js";
import type { Outcome } from "./call-context.js";

export interface CaptureInput {
  callId: string;
  caller: Caller;
  def: ToolDefinition | undefined;
  outcome: Outcome;
  normalization: InputNormalization | undefined;
  projectCanonicalId: string;
  sessionId: string;
  startedAtUnixMs: number;
  /** The shape of the arguments as received (after unwrapping, before normalization). */
  shape: ArgumentShapeSketch | undefined;
  /** The call named a target the operator marks read-only (mcp_tool): it changes nothing. */
  readOnlyTarget?: boolean | undefined;
}

/**
 * Captures a call's record from its canonical outcome, and whether the record must be durable
 * before the call is acknowledged (an effectful call that changed, or may have changed, something).
 * The record's durations are added when it is recorded.
 */
export function captureCall(input: CaptureInput) {
  const { outcome, def, normalization, shape } = input;
  const failure = outcome.ok ? undefined : outcome.failure;
  const effectful = def !== undefined && def.effect !== "read_only" && !(def.effectByTarget === true && input.readOnlyTarget === true);
  const stateChanged = failure ? failure.state_changed : effectful && outcome.ok && outcome.result["changed"] !== false;
  const outcomeUnknown = failure?.outcome_unknown ?? false;
  const durable = effectful && (outcome.ok || stateChanged || outcomeUnknown);
  const captured = {
    callId: input.callId,
    clientId: input.caller.principal.clientId,
    subject: input.caller.principal.subject,
    tool: def?.name ?? "unknown_tool",
    projectCanonicalId: input.projectCanonicalId,
    sessionId: input.sessionId,
    effect: def?.effect ?? "read_only",
    outcome: outcome.ok ? CallOutcome.success : CallOutcome.failure,
    reasonCode: failure?.reason_code ?? "",
    failureStage: failure?.failure_stage ?? "",
    stateChanged,
    outcomeUnknown,
    // model_ergonomics: only canonical success reports a normalization code.
    inputNormalizationCode: outcome.ok ? (normalization?.code ?? "") : "",
    startedAtUnixMs: BigInt(input.startedAtUnixMs),
    ...(shape ? { argumentShape: shape } : {}),
  } satisfies Omit<ActionRecordInit, "durationUs" | "stageDurationsUs">;
  return { captured, durable };
}

/**
 * The audit record of a call refused before the pipeline (scope, rate limit): the same fields a
 * pipeline failure records, under the tool call_runtime_tool would have run.
 */
export function refusedCallRecord(caller: Caller, requestedTool: string, requestedArgs: unknown, failure: ToolFailure): ActionRecordInit {
  const { tool, args } = forwardedCall(requestedTool, requestedArgs);
  const def = toolDefinition(tool);
  const shape = argumentShape(args, def?.inputSchema as ShapeSchema | undefined);
  return {
    callId: randomUUID(),
    clientId: caller.principal.clientId,
    subject: caller.principal.subject,
    tool: def?.name ?? "unknown_tool",
    projectCanonicalId: "",
    sessionId: "",
    effect: def?.effect ?? "read_only",
    outcome: CallOutcome.failure,
    reasonCode: failure.reason_code,
    failureStage: failure.failure_stage,
    ...(shape ? { argumentShape: shape } : {}),
    stateChanged: false,
    outcomeUnknown: false,
    inputNormalizationCode: "",
    startedAtUnixMs: BigInt(Date.now()),
    durationUs: 0,
    stageDurationsUs: {},
  };
}

/**
 * The failure the Host gets when an effectful call ran but its audit record is neither stored
 * nor spooled: the call is not acknowledged as a success, and what is known about the effect
 * is stated as it is, so the model does not repeat a change that already happened.
 */
export function auditNotDurableFailure(outcome: Outcome, stateChanged: boolean, outcomeUnknown: boolean): ToolFailure {
  const effect = outcomeUnknown
    ? "its effect is unknown: inspect the project before retrying"
    : stateChanged
      ? "it did change the project: do not repeat it"
      : "it changed nothing";
  return toolFailure(ReasonCode.dependencyUnavailable, PipelineStage.record, {
    detail_code: "audit_not_durable",
    state_changed: stateChanged,
    outcome_unknown: outcomeUnknown,
    evidence: outcome.ok ? { call_outcome: CallOutcome.success } : { call_outcome: CallOutcome.failure, call_reason_code: outcome.failure.reason_code },
    message: `The call ran but its audit record could not be stored; ${effect}.`,
  });
}
