import { ConfigError, readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";

export const runnerBrokerConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8084, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /**
   * Port Runners register and heartbeat on, alone; the main port then refuses those
   * procedures. Unset or 0: one port serves both (a single machine).
   */
  registrationPort: { kind: "int", env: "WEBCODEX_REGISTRATION_PORT", min: 0, max: 65535 },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  redisUrl: { kind: "string", env: "WEBCODEX_REDIS_URL", required: true },
  redisKeyPrefix: { kind: "string", env: "WEBCODEX_REDIS_KEY_PREFIX", default: "webcodex:broker:" },
  /** Schema `broker`: fence high-water marks (the floor under Redis fence counters) and Job records. */
  postgresUrl: { kind: "string", env: "WEBCODEX_POSTGRES_URL", required: true },
  migrateOnStart: { kind: "bool", env: "WEBCODEX_MIGRATE_ON_START", default: true },
  refResolverUrl: { kind: "string", env: "WEBCODEX_REF_RESOLVER_URL", required: true },
  heartbeatIntervalMs: { kind: "int", env: "WEBCODEX_HEARTBEAT_INTERVAL_MS", default: 5000, min: 100 },
  /** Runner credential, separate from Host credentials; when set, Runners must present it. */
  runnerToken: { kind: "string", env: "WEBCODEX_RUNNER_TOKEN" },
  projectConcurrency: { kind: "int", env: "WEBCODEX_PROJECT_CONCURRENCY", default: 16, min: 1, max: 1024 },
  /** Issue direct routes (gateways call Runners themselves, on a per-route credential); false: every call is relayed through the broker. Needs WEBCODEX_RUNNER_TOKEN. */
  directRoutes: { kind: "bool", env: "WEBCODEX_DIRECT_ROUTES", default: true },
  /** How long a direct route's credential is valid after issue. */
  routeTtlMs: { kind: "int", env: "WEBCODEX_ROUTE_TTL_MS", default: 60_000, min: 1_000 },
  dispatchTimeoutMs: { kind: "int", env: "WEBCODEX_DISPATCH_TIMEOUT_MS", default: 660_000, min: 1_000 },
  jobReconcileIntervalMs: { kind: "int", env: "WEBCODEX_JOB_RECONCILE_INTERVAL_MS", default: 30_000, min: 0 },
  provisioner: { kind: "enum", env: "WEBCODEX_PROVISIONER", values: ["none", "local-process", "kubernetes"], default: "none" },
  runnerNamespace: { kind: "string", env: "WEBCODEX_RUNNER_NAMESPACE" },
  runnerPodTemplate: { kind: "string", env: "WEBCODEX_RUNNER_POD_TEMPLATE" },
  /** local-process: Runner workspaces live in <dir>/<tenant hash>/<project id>. */
  runnerWorkspacesDir: { kind: "string", env: "WEBCODEX_RUNNER_WORKSPACES_DIR" },
  /** local-process: the webcodex CLI the Runners are started with. */
  runnerCliPath: { kind: "string", env: "WEBCODEX_RUNNER_CLI" },
  /** local-process: passed to each Runner (hosts on private ranges create_project may clone from). */
  cloneAllowHosts: { kind: "string", env: "WEBCODEX_CLONE_ALLOW_HOSTS" },
  /** local-process: the broker URL local Runners register with (default: this server's URL). */
  brokerAdvertiseUrl: { kind: "string", env: "WEBCODEX_BROKER_ADVERTISE_URL" },
  /** kubernetes: reconcile the Runner fleet (anchor ownership, orphans, idle stop, rotation, quota) with Lease leader election. */
  fleetReconcile: { kind: "bool", env: "WEBCODEX_FLEET_RECONCILE", default: false },
  /** The anchor ConfigMap in the runner namespace that owns every Runner pod and credential Secret. */
  fleetAnchor: { kind: "string", env: "WEBCODEX_FLEET_ANCHOR", default: "webcodex-runner-anchor" },
  /** The coordination.k8s.io Lease the broker replicas elect the reconciling one with. */
  fleetLease: { kind: "string", env: "WEBCODEX_FLEET_LEASE", default: "webcodex-runner-fleet" },
  /** This replica's name in the Lease (the pod name); default the host name. */
  podName: { kind: "string", env: "WEBCODEX_POD_NAME" },
  /** No call for this long stops a Runner (its Project and workspace stay); 0 never stops. Kubernetes (with fleetReconcile) and local-process. */
  fleetIdleTimeoutMs: { kind: "int", env: "WEBCODEX_FLEET_IDLE_TIMEOUT_MS", default: 1_800_000, min: 0 },
  /** How many Runners a rotation may have unavailable at once. */
  fleetMaxUnavailable: { kind: "int", env: "WEBCODEX_FLEET_MAX_UNAVAILABLE", default: 1, min: 1 },
  fleetResyncMs: { kind: "int", env: "WEBCODEX_FLEET_RESYNC_MS", default: 300_000, min: 1_000 },
  /** Live Runners per tenant; 0: unlimited. */
  fleetQuotaRunnersPerTenant: { kind: "int", env: "WEBCODEX_FLEET_QUOTA_RUNNERS_PER_TENANT", default: 0, min: 0 },
  /** Projects per tenant; 0: unlimited. */
  fleetQuotaProjectsPerTenant: { kind: "int", env: "WEBCODEX_FLEET_QUOTA_PROJECTS_PER_TENANT", default: 0, min: 0 },
  /** Project creations per tenant in any hour; 0: unlimited. */
  fleetQuotaCreationsPerHour: { kind: "int", env: "WEBCODEX_FLEET_QUOTA_CREATIONS_PER_HOUR", default: 0, min: 0 },
  /** Jobs running at once per tenant, across its Projects; 0: unlimited. */
  fleetQuotaConcurrentJobsPerTenant: { kind: "int", env: "WEBCODEX_FLEET_QUOTA_CONCURRENT_JOBS_PER_TENANT", default: 0, min: 0 },
  /** Warm Runners kept for new projects (warm starts): loaded, unclaimed local processes, or (Kubernetes, with the fleet reconciler and a Runner key) Ready warm pods each with its own PVC; 0: every start is cold. */
  fleetWarmPool: { kind: "int", env: "WEBCODEX_FLEET_WARM_POOL", default: 0, min: 0, max: 64 },
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

export function loadConfig(env: Env) {
  const config = readConfig(runnerBrokerConfigSpec, env);
  const problems: string[] = [];
  if (config.provisioner === "kubernetes" && !config.runnerPodTemplate)
    problems.push("WEBCODEX_RUNNER_POD_TEMPLATE is required with WEBCODEX_PROVISIONER=kubernetes");
  if (config.provisioner === "local-process" && !config.runnerWorkspacesDir)
    problems.push("WEBCODEX_RUNNER_WORKSPACES_DIR is required with WEBCODEX_PROVISIONER=local-process");
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

export type RunnerBrokerConfig = ReturnType<typeof loadConfig>;
