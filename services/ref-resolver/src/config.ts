import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const refResolverConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8082, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  postgresUrl: { kind: "string", env: "WEBCODEX_POSTGRES_URL", required: true },
  /** Task fence counters; without it fences come from the Postgres high-water mark alone. */
  redisUrl: { kind: "string", env: "WEBCODEX_REDIS_URL", default: "" },
  redisKeyPrefix: { kind: "string", env: "WEBCODEX_REDIS_KEY_PREFIX", default: "" },
  migrateOnStart: { kind: "bool", env: "WEBCODEX_MIGRATE_ON_START", default: true },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
  /** Serve grpc.reflection.v1.ServerReflection on the service port (grpcurl); off by default. */
  grpcReflection: { kind: "bool", env: "WEBCODEX_GRPC_REFLECTION", default: false },
  /** Port of /metrics and /dependencies apart from the service port (which an Ingress may expose); unset: both on the service port. */
  metricsPort: { kind: "int", env: "WEBCODEX_METRICS_PORT", min: 0, max: 65535, optional: true },
  /** What /readyz follows: its dependencies, or this process only (`process`; the dependency report is then /dependencies). */
  readiness: { kind: "enum", env: "WEBCODEX_READINESS", values: ["dependencies", "process"], default: "dependencies" },
  /** How long shutdown lets calls in flight finish, in ms, before their connections are cut. */
  shutdownDrainMs: { kind: "int", env: "WEBCODEX_SHUTDOWN_DRAIN_MS", default: 2_000, min: 0 },
} as const;

export const loadConfig = (env: Env) => readConfig(refResolverConfigSpec, env);
