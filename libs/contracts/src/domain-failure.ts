/**
 * The one mapping between a ToolFailure and its wire form (DomainFailure) between services.
 * Evidence, message and follow-up travel as one bounded JSON object.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DomainFailure, DomainFailureSchema } from "@webcodex/proto";
import { ReasonCode, reasonCodeFromString, toolFailure } from "./failure.js";
import { PipelineStage, pipelineStageFromString } from "./pipeline.js";
import type { ToolFailure } from "./failure.js";

/** A DomainFailure as services build it (derived from the generated message). */
export type DomainFailureInit = MessageInitShape<typeof DomainFailureSchema>;

export function failureToWire(f: ToolFailure): DomainFailureInit {
  return {
    reasonCode: f.reason_code,
    failureStage: f.failure_stage,
    detailCode: f.detail_code ?? "",
    stateChanged: f.state_changed,
    outcomeUnknown: f.outcome_unknown,
    evidenceJson: JSON.stringify({
      ...(f.evidence ? { evidence: f.evidence } : {}),
      ...(f.message ? { message: f.message } : {}),
      ...(f.follow_up ? { follow_up: f.follow_up } : {}),
    }),
  };
}

/**
 * The ToolFailure a DomainFailure carries. Codes are parsed back with checked functions: a
 * reason or stage this build does not know (a newer peer) reads as an internal failure at
 * dispatch, with the unknown codes kept in evidence, never as an unchecked string.
 */
export function failureFromWire(f: DomainFailure): ToolFailure {
  let extra: { evidence?: Record<string, unknown>; message?: string; follow_up?: ToolFailure["follow_up"] } = {};
  try {
    extra = f.evidenceJson ? JSON.parse(f.evidenceJson) : {};
  } catch {
    extra = {};
  }
  const reason = reasonCodeFromString(f.reasonCode);
  const stage = pipelineStageFromString(f.failureStage);
  if (reason === undefined || stage === undefined) {
    extra = { ...extra, evidence: { ...extra.evidence, wire_reason_code: f.reasonCode, wire_failure_stage: f.failureStage } };
  }
  return toolFailure(reason ?? ReasonCode.internal, stage ?? PipelineStage.dispatch, {
    ...(f.detailCode ? { detail_code: f.detailCode } : {}),
    state_changed: f.stateChanged,
    outcome_unknown: f.outcomeUnknown,
    ...(extra.evidence ? { evidence: extra.evidence } : {}),
    ...(extra.message ? { message: extra.message } : {}),
    ...(extra.follow_up ? { follow_up: extra.follow_up } : {}),
  });
}
