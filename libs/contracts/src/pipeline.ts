/**
 * The call pipeline's vocabulary: the stages a tools/call passes through (the one name a
 * stage has in failures, timings, spans, metrics and audit rows) and how a call came out (the
 * one spelling of an outcome in audit rows, metrics and Session records). Both are closed: a
 * string from the wire or a database is read back only through its checked parser.
 */

/** A stage of the call pipeline. A failure names the one that decided it; a timing names the one it measured. */
export const PipelineStage = {
  admission: "admission",
  normalization: "normalization",
  resolution: "resolution",
  authorization: "authorization",
  dispatch: "dispatch",
  preflight: "preflight",
  apply: "apply",
  execution: "execution",
  observation: "observation",
  /** The late, pure model projection of a result (timed; it decides no failure). */
  projection: "projection",
  /** The call ran, but its ActionAudit record could not be made durable (gateway). */
  record: "record",
} as const;
export type PipelineStage = (typeof PipelineStage)[keyof typeof PipelineStage];

const pipelineStages = new Set<string>(Object.values(PipelineStage));
/** The PipelineStage a wire string names, or undefined for one this build does not know. */
export function pipelineStageFromString(value: string): PipelineStage | undefined {
  return pipelineStages.has(value) ? (value as PipelineStage) : undefined;
}

/**
 * A part of a stage the gateway times on its own, spelled `<stage>.<part>`. Its time is not
 * added into its stage's: each key is one measured interval.
 */
export const PipelineSubStage = {
  /** Resolving and authorizing the call's session_id (after its Project resolved). */
  sessionResolution: "resolution.session",
  /** Admitting the call's attempt_ref (owner, lease, fence). */
  attemptAdmission: "authorization.attempt",
  /** Recording the call into its Session (after the result, before the audit record). */
  sessionRecord: "record.session",
} as const satisfies Record<string, `${PipelineStage}.${string}`>;
export type PipelineSubStage = (typeof PipelineSubStage)[keyof typeof PipelineSubStage];

/** A key of a call's stage timings (ActionAudit stage_durations_us, the stage metric label). */
export type StageTimingKey = PipelineStage | PipelineSubStage;
/** Microseconds per stage or sub-stage of one call. */
export type StageTimings = Partial<Record<StageTimingKey, number>>;

const stageTimingKeys = new Set<string>([...pipelineStages, ...Object.values(PipelineSubStage)]);
/** The StageTimingKey a wire string names, or undefined for one this build does not know. */
export function stageTimingKeyFromString(value: string): StageTimingKey | undefined {
  return stageTimingKeys.has(value) ? (value as StageTimingKey) : undefined;
}

/**
 * How a call came out. An ActionAudit row and the call metrics say success or failure; a
 * Session call also says pending (a Job still runs) or unknown (its effect cannot be known).
 */
export const CallOutcome = {
  success: "success",
  failure: "failure",
  /** Succeeded so far: the Job it started or waited on is still running. */
  pending: "pending",
  /** The effect cannot be known (transport lost mid-call, a Job the Runner no longer knows). */
  unknown: "unknown",
} as const;
export type CallOutcome = (typeof CallOutcome)[keyof typeof CallOutcome];
/** The outcome of a finished tools/call as audit rows and metrics record it. */
export type SettledCallOutcome = typeof CallOutcome.success | typeof CallOutcome.failure;

const callOutcomes = new Set<string>(Object.values(CallOutcome));
/** The CallOutcome a wire or stored string names, or undefined for one this build does not know. */
export function callOutcomeFromString(value: string): CallOutcome | undefined {
  return callOutcomes.has(value) ? (value as CallOutcome) : undefined;
}

/**
 * A wire or stored outcome for display: one this build does not know reads as `unknown` (the
 * outcome cannot be known here), never refused and never folded into failure.
 */
export function callOutcomeOrUnknown(value: string): CallOutcome {
  return callOutcomeFromString(value) ?? CallOutcome.unknown;
}
