/**
 * Model projections: pure functions from a canonical result to what the model sees, applied
 * after audit capture. Sparse success, unknown kept apart from false, one follow-up at most.
 */
import type { InputNormalization } from "./normalize.js";
import type { ToolDefinition } from "./tool-definition.js";

type Json = Record<string, unknown>;

/** A complete all-success batch omits per-item success/error; a partial batch keeps full envelopes. */
export function compactBatch(result: Json, key: string): Json {
  const items = result[key];
  if (!Array.isArray(items)) return result;
  const allOk = items.every((i: Json) => i["success"] === true);
  if (!allOk) return result;
  return { ...result, [key]: items.map(({ success: _s, error: _e, ...rest }: Json) => rest) };
}

export function compactEdit(result: Json): Json {
  if (result["dry_run"] === true) return result;
  const { dry_run: _d, execution_state: _x, applied_count: _a, ...rest } = result;
  return rest;
}

/**
 * run_shell drops lifecycle, Job and timing bookkeeping only for a proven synchronous
 * exit-zero completion; failure, timeout and pending stay rich.
 */
export function compactShell(result: Json): Json {
  const proven = result["execution_state"] === "completed" && result["exit_code"] === 0 && result["timed_out"] === false && (result["signal"] ?? null) === null;
  if (!proven) return result;
  const keep = ["command_summary", "cwd", "shell", "output", "stdout", "stderr", "truncated", "omitted_bytes", "stdout_truncated", "stderr_truncated"];
  const out: Json = {};
  for (const k of keep) {
    const v = result[k];
    if (v === undefined || v === "" || v === false) continue;
    out[k] = v;
  }
  // One output field suffices when the combined stream is present.
  if (typeof out["output"] === "string") {
    delete out["stdout"];
    delete out["stderr"];
  }
  return out;
}

/** The model-facing success result of a tool whose definition is `def`. */
export function projectSuccess(def: ToolDefinition, canonical: Json, normalization?: InputNormalization): Json {
  const out = def.projectSuccess ? def.projectSuccess(canonical) : { ...canonical };
  if (normalization) out["input_normalization"] = normalization;
  return out;
}
