/**
 * Model projections: pure functions from a canonical result to what the model sees, applied
 * after audit capture. They never write into the canonical result (audit, Session evidence
 * and telemetry read it) and never return an object the caller may later mutate into it.
 * Sparse success, unknown kept apart from false, one follow-up at most.
 */
import type { FollowUp } from "./follow-up-shape.js";
import type { InputNormalization } from "./normalize.js";
import type { ToolDefinition } from "./tool-definition.js";

type Json = Record<string, unknown>;

/** What the pipeline adds to a projected success: the reported normalization and the one follow-up. */
export interface ProjectionExtras {
  normalization?: InputNormalization;
  followUp?: FollowUp;
  /** The exact inverse of an applied edit (fallback_recovery), beside the result. */
  undo?: FollowUp;
}

/**
 * The model-facing success result of a tool whose definition is `def`: a new object, so
 * `canonical` (which may be frozen) is never written to.
 */
export function projectSuccess(def: ToolDefinition, canonical: Readonly<Json>, extras: ProjectionExtras = {}): Json {
  const out = def.projectSuccess ? { ...def.projectSuccess(canonical) } : { ...canonical };
  if (extras.normalization) out["input_normalization"] = extras.normalization;
  if (extras.followUp) out["follow_up"] = extras.followUp;
  if (extras.undo) out["undo"] = extras.undo;
  return out;
}
