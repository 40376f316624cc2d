import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

/** Retention and partition settings: the audit service's, and embedded mode's (`webcodex dev`). */
export const auditRetentionConfigSpec = {
  retentionDays: {
    kind: "int",
    env: "WEBCODEX_AUDIT_RETENTION_DAYS",
    default: 90,
    min: 1,
    max: 3650,
    doc: "Days ActionAudit rows are kept; older daily partitions are dropped.",
  },
  partitionsAheadDays: {
    kind: "int",
    env: "WEBCODEX_AUDIT_PARTITIONS_AHEAD_DAYS",
    default: 7,
    min: 0,
    max: 366,
    doc: "Daily partitions created ahead of today.",
  },
  maintenanceIntervalMs: { kind: "int", env: "WEBCODEX_AUDIT_MAINTENANCE_INTERVAL_MS", default: 3_600_000, min: 1_000 },
} as const;

export const auditConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8083, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  postgresUrl: { kind: "string", env: "WEBCODEX_POSTGRES_URL", required: true },
  migrateOnStart: { kind: "bool", env: "WEBCODEX_MIGRATE_ON_START", default: true },
  ...auditRetentionConfigSpec,
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

export const loadConfig = (env: Env) => readConfig(auditConfigSpec, env);
export const loadRetentionConfig = (env: Env) => readConfig(auditRetentionConfigSpec, env);
export type AuditRetentionConfig = ReturnType<typeof loadRetentionConfig>;
