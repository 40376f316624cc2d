import { clampRule, fail, PipelineStage, ReasonCode } from "@webcodex/contracts";
import type { EffectiveLimits, ExecLimits } from "./types.js";

const TIMEOUT_MS = clampRule("run_process", "timeout_ms");
const WAIT_MS = clampRule("run_process", "wait_ms");

/**
 * Default bounds. Ceilings are enforced here even though the Gateway clamps upstream: the
 * Runner must stay safe when called with uncanonical input. timeout_ms and wait_ms come from
 * the tools' clamp rules (the ToolDefinition owns them).
 */
export const DEFAULT_EXEC_LIMITS: Readonly<ExecLimits> = Object.freeze({
  timeoutMsDefault: TIMEOUT_MS.default,
  timeoutMsCeiling: TIMEOUT_MS.ceiling,
  waitMsDefault: WAIT_MS.default,
  waitMsCeiling: WAIT_MS.ceiling,
  outputHeadBytes: 16_384,
  outputTailBytes: 16_384,
  observeTailBytes: 4_096,
  maxJobs: 64,
  killGraceMs: 2_000,
  jobRetentionMs: 15 * 60_000,
  maxRetainedJobs: 1_024,
  maxStdinBytes: 4 * 1024 * 1024,
});

/** Merges overrides onto the defaults, rejecting nonsense so a misconfiguration fails early. */
export function resolveLimits(overrides: Partial<ExecLimits> = {}): ExecLimits {
  const limits: ExecLimits = { ...DEFAULT_EXEC_LIMITS };
  for (const key of Object.keys(overrides) as (keyof ExecLimits)[]) {
    const value = overrides[key];
    if (value === undefined) continue;
    if (!Number.isFinite(value) || value < 0) {
      throw new RangeError(`exec limit ${key} must be a non-negative finite number`);
    }
    limits[key] = Math.floor(value);
  }
  if (limits.timeoutMsDefault > limits.timeoutMsCeiling) limits.timeoutMsDefault = limits.timeoutMsCeiling;
  if (limits.waitMsDefault > limits.waitMsCeiling) limits.waitMsDefault = limits.waitMsCeiling;
  return limits;
}

function requestNumber(field: string, value: number, min: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: `${field}_out_of_range`,
      evidence: { field, minimum: min },
      message: `${field} must be a number >= ${min}.`,
    });
  }
  return Math.floor(value);
}

/** Applies defaults and ceilings to a request's timeout_ms / wait_ms. */
export function effectiveLimits(limits: ExecLimits, request: { timeout_ms?: number | undefined; wait_ms?: number | undefined }): EffectiveLimits {
  const timeout = request.timeout_ms === undefined ? limits.timeoutMsDefault : requestNumber("timeout_ms", request.timeout_ms, 1);
  return { timeout_ms: Math.min(timeout, limits.timeoutMsCeiling), wait_ms: effectiveWaitMs(limits, request.wait_ms) };
}

/** Applies the default and ceiling to a wait_ms. */
export function effectiveWaitMs(limits: ExecLimits, waitMs: number | undefined): number {
  const wait = waitMs === undefined ? limits.waitMsDefault : requestNumber("wait_ms", waitMs, 0);
  return Math.min(wait, limits.waitMsCeiling);
}
