import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const toolRegistryConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8081, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
} as const;

export const loadConfig = (env: Env) => readConfig(toolRegistryConfigSpec, env);
