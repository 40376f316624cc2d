import { readFileSync } from "node:fs";
import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";
import { parseToolPolicyText, ToolPolicyError } from "@webcodex/contracts";
import type { ToolPolicy } from "@webcodex/contracts";

export const toolRegistryConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8081, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
  /** Serve grpc.reflection.v1.ServerReflection on the service port (grpcurl); off by default. */
  grpcReflection: { kind: "bool", env: "WEBCODEX_GRPC_REFLECTION", default: false },
  /** Port of /metrics and /dependencies apart from the service port (which an Ingress may expose); unset: both on the service port. */
  metricsPort: { kind: "int", env: "WEBCODEX_METRICS_PORT", min: 0, max: 65535, optional: true },
  /** What /readyz follows: its dependencies, or this process only (`process`; the dependency report is then /dependencies). */
  readiness: { kind: "enum", env: "WEBCODEX_READINESS", values: ["dependencies", "process"], default: "dependencies" },
  /** How long shutdown lets calls in flight finish, in ms, before their connections are cut. */
  shutdownDrainMs: { kind: "int", env: "WEBCODEX_SHUTDOWN_DRAIN_MS", default: 2_000, min: 0 },
  /** The operator's tool policy as JSON (schema: docs/tool-policy.schema.json). */
  toolPolicy: { kind: "string", env: "WEBCODEX_TOOL_POLICY" },
  /** Or a file holding it. */
  toolPolicyFile: { kind: "string", env: "WEBCODEX_TOOL_POLICY_FILE" },
} as const;

export const loadConfig = (env: Env) => readConfig(toolRegistryConfigSpec, env);

/**
 * The tool policy from WEBCODEX_TOOL_POLICY or WEBCODEX_TOOL_POLICY_FILE (not both), checked
 * against its schema. A bad policy throws ToolPolicyError naming the variable and the field,
 * so the process stops before it serves anything.
 */
export function loadToolPolicy(env: Env): ToolPolicy | undefined {
  const inline = env["WEBCODEX_TOOL_POLICY"] || undefined;
  const file = env["WEBCODEX_TOOL_POLICY_FILE"] || undefined;
  if (inline !== undefined && file !== undefined)
    throw new ToolPolicyError("/", "is set twice: use WEBCODEX_TOOL_POLICY or WEBCODEX_TOOL_POLICY_FILE, not both");
  if (inline !== undefined) return withSource(() => parseToolPolicyText(inline, "WEBCODEX_TOOL_POLICY"), "WEBCODEX_TOOL_POLICY");
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ToolPolicyError("/", `cannot be read from WEBCODEX_TOOL_POLICY_FILE ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  return withSource(() => parseToolPolicyText(text, file), `WEBCODEX_TOOL_POLICY_FILE ${file}`);
}

function withSource(parse: () => ToolPolicy, source: string): ToolPolicy {
  try {
    return parse();
  } catch (error) {
    throw error instanceof ToolPolicyError ? new ToolPolicyError(error.field, `${error.problem} (${source})`) : error;
  }
}
