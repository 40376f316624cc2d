/**
 * The one mapping between a ToolFailure and its wire form (DomainFailure) between services.
 * Evidence, message and follow-up travel as one bounded JSON object.
 */
import { toolFailure } from "@webcodex/contracts";
import type { FailureStage, ReasonCode, ToolFailure } from "@webcodex/contracts";
import type { DomainFailure } from "@webcodex/proto";

export interface DomainFailureInit {
  reasonCode: string;
  failureStage: string;
  detailCode: string;
  stateChanged: boolean;
  outcomeUnknown: boolean;
  evidenceJson: string;
}

export function failureToWire(f: ToolFailure): DomainFailureInit {
  return {
    reasonCode: f.reason_code,
    failureStage: f.failure_stage,
    detailCode: f.detail_code ?? "",
    stateChanged: f.state_changed,
    outcomeUnknown: f.outcome_unknown,
    evidenceJson: JSON.stringify({ ...(f.evidence ? { evidence: f.evidence } : {}), ...(f.message ? { message: f.message } : {}), ...(f.follow_up ? { follow_up: f.follow_up } : {}) }),
  };
}

export function failureFromWire(f: DomainFailure): ToolFailure {
  let extra: { evidence?: Record<string, unknown>; message?: string; follow_up?: ToolFailure["follow_up"] } = {};
  try {
    extra = f.evidenceJson ? JSON.parse(f.evidenceJson) : {};
  } catch {
    extra = {};
  }
  return toolFailure(f.reasonCode as ReasonCode, f.failureStage as FailureStage, {
    ...(f.detailCode ? { detail_code: f.detailCode } : {}),
    state_changed: f.stateChanged,
    outcome_unknown: f.outcomeUnknown,
    ...(extra.evidence ? { evidence: extra.evidence } : {}),
    ...(extra.message ? { message: extra.message } : {}),
    ...(extra.follow_up ? { follow_up: extra.follow_up } : {}),
  });
}
