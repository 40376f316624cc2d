import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const runnerBrokerConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8084, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST", default: "0.0.0.0" },
  redisUrl: { kind: "string", env: "WEBCODEX_REDIS_URL", required: true },
  redisKeyPrefix: { kind: "string", env: "WEBCODEX_REDIS_KEY_PREFIX", default: "webcodex:broker:" },
  refResolverUrl: { kind: "string", env: "WEBCODEX_REF_RESOLVER_URL", required: true },
  heartbeatIntervalMs: { kind: "int", env: "WEBCODEX_HEARTBEAT_INTERVAL_MS", default: 5000, min: 100 },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
} as const;

export const loadConfig = (env: Env) => readConfig(runnerBrokerConfigSpec, env);
