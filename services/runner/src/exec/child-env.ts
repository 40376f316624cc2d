import os from "node:os";
import { fail, PipelineStage, ReasonCode } from "@webcodex/contracts";
import { activeSpanContext } from "@webcodex/platform";

/** The only variables a child inherits (from baseEnv, else a minimal default). */
const INHERITED_KEYS = ["PATH", "HOME", "LANG", "TMPDIR"] as const;

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_ENV_ENTRIES = 256;
const MAX_ENV_VALUE_CHARS = 65_536;

/**
 * The scrubbed base environment: PATH, HOME, LANG, TMPDIR and TERM=dumb, nothing else. It is
 * built from `baseEnv` only, never from process.env, so Runner credentials (WEBCODEX_*,
 * tokens, database URLs) can never leak into user commands.
 */
export function scrubbedBaseEnv(baseEnv: Record<string, string> = {}): Record<string, string> {
  const defaults: Record<(typeof INHERITED_KEYS)[number], string> = {
    PATH: DEFAULT_PATH,
    HOME: os.homedir(),
    LANG: "C.UTF-8",
    TMPDIR: os.tmpdir(),
  };
  const env: Record<string, string> = {};
  for (const key of INHERITED_KEYS) {
    const value = baseEnv[key];
    env[key] = typeof value === "string" && value !== "" && !value.includes("\0") ? value : defaults[key];
  }
  env["TERM"] = "dumb";
  return env;
}

/**
 * Validates a request's env additions (portable names, string values without NUL) and lays
 * them over the base. Additions may override base keys, e.g. PATH for a virtualenv.
 */
export function childEnv(base: Record<string, string>, additions: Record<string, string> | undefined): Record<string, string> {
  const env: Record<string, string> = { ...base };
  // The call's trace (W3C trace context) reaches the Job as TRACEPARENT, the variable
  // OpenTelemetry SDKs read, so a traced program joins the tool call's trace. Additions may override it.
  const trace = activeSpanContext();
  if (trace) env["TRACEPARENT"] = `00-${trace.traceId}-${trace.spanId}-${trace.traceFlags.toString(16).padStart(2, "0")}`;
  if (additions === undefined) return env;
  if (typeof additions !== "object" || additions === null || Array.isArray(additions)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "env_not_an_object", evidence: { field: "env" } });
  }
  const entries = Object.entries(additions);
  if (entries.length > MAX_ENV_ENTRIES) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "env_too_many_entries",
      evidence: { field: "env", maximum: MAX_ENV_ENTRIES },
    });
  }
  for (const [key, value] of entries) {
    if (!ENV_NAME.test(key)) {
      fail(ReasonCode.invalidValue, PipelineStage.preflight, {
        detail_code: "env_key_invalid",
        evidence: { field: "env", key: key.slice(0, 64) },
        message: "env keys must match [A-Za-z_][A-Za-z0-9_]*.",
      });
    }
    if (typeof value !== "string" || value.includes("\0") || value.length > MAX_ENV_VALUE_CHARS) {
      fail(ReasonCode.invalidValue, PipelineStage.preflight, {
        detail_code: "env_value_invalid",
        evidence: { field: "env", key },
        message: "env values must be strings without NUL, at most 65536 characters.",
      });
    }
    env[key] = value;
  }
  return env;
}

/**
 * The base environment built from this process's own: what the spawn host and any program the
 * Runner starts without an explicit environment (git, rg) get. Never the Runner's full
 * environment, which may hold credentials.
 */
export function minimalProcessEnv(): Record<string, string> {
  const base: Record<string, string> = {};
  for (const key of INHERITED_KEYS) {
    const value = process.env[key];
    if (value !== undefined) base[key] = value;
  }
  return scrubbedBaseEnv(base);
}
