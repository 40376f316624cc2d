/**
 * The pure parts of agent continuation Endpoints and task Attempts: identities, the
 * "ref or explicit tuple" selector rule, and Endpoint failures. A stale continuation ref (the
 * caller's own, pinned to an earlier generation) is `stale_ref`; the same mismatch given as an
 * explicit tuple is `fence_rejected`; an unknown or foreign ref or record fails as
 * `invalid_value` with a `*_not_found` detail, identical for both.
 */
import { randomBytes } from "node:crypto";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

/** Caller-chosen ids (agent, endpoint, task, idempotency key): 1..128 visible, URL-safe characters. */
const CALLER_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
const ATTEMPT_ID = /^wc_att_[0-9a-f]{32}$/;

export function isCallerId(text: string): boolean {
  return CALLER_ID.test(text);
}

export function isAttemptId(text: string): boolean {
  return ATTEMPT_ID.test(text);
}

/** A new canonical Attempt id: 128 random bits. */
export function newAttemptId(): string {
  return `wc_att_${randomBytes(16).toString("hex")}`;
}

/** Largest generation / fence accepted from a caller (Postgres bigint, exact in a JS number). */
export const MAX_COUNTER = Number.MAX_SAFE_INTEGER;

export function isCounter(value: number, allowZero: boolean): boolean {
  return Number.isSafeInteger(value) && value <= MAX_COUNTER && (allowZero ? value >= 0 : value > 0);
}

export type RefOrTuple<T> = { kind: "ref"; ref: string } | { kind: "tuple"; tuple: T } | { kind: "invalid"; failure: ToolFailure };

/**
 * Either a ref or the complete explicit tuple, never both and never a partial tuple: a ref
 * is a shorthand for the tuple, not an extra authority to combine with one.
 */
export function refOrTuple<T>(ref: string, tuple: T, given: readonly boolean[], names: { ref: string; tuple: string }): RefOrTuple<T> {
  const anyTuple = given.some(Boolean);
  if (ref !== "" && anyTuple) {
    return {
      kind: "invalid",
      failure: toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
        detail_code: "ref_with_explicit_tuple",
        message: `Pass ${names.ref} or ${names.tuple}, not both.`,
      }),
    };
  }
  if (ref !== "") return { kind: "ref", ref };
  if (!given.every(Boolean)) {
    return {
      kind: "invalid",
      failure: toolFailure(ReasonCode.missingField, PipelineStage.normalization, {
        detail_code: "ref_or_complete_tuple_required",
        message: `Pass ${names.ref}, or all of ${names.tuple}.`,
      }),
    };
  }
  return { kind: "tuple", tuple };
}

export function invalidId(field: string): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: `invalid_${field}`, evidence: { field } });
}

export function endpointNotFound(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "agent_endpoint_not_found",
    message: "No such agent endpoint for this caller.",
  });
}

export function continuationRefNotFound(): ToolFailure {
  return toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "agent_continuation_ref_not_found",
    message: "No such agent_continuation_ref for this caller.",
  });
}

export function generationMismatch(): ToolFailure {
  return toolFailure(ReasonCode.fenceRejected, PipelineStage.authorization, {
    detail_code: "controller_generation_mismatch",
    message: "The controller generation is not the current one.",
  });
}

export function staleContinuationRef(): ToolFailure {
  return toolFailure(ReasonCode.staleRef, PipelineStage.resolution, {
    detail_code: "endpoint_generation_changed",
    message: "This agent_continuation_ref names an earlier endpoint generation; it is never moved to the successor.",
  });
}
