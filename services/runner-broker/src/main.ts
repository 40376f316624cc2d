import { createClient } from "@connectrpc/connect";
import { canonicalProjectId } from "@webcodex/contracts";
import { RefResolverService, RunnerService } from "@webcodex/proto";
import {
  createLogger,
  createMetrics,
  createPostgresDatabase,
  createRedis,
  createServiceTransport,
  createWorkMetrics,
  defaultBindHost,
  onShutdown,
  serviceIdentityFromEnv,
  readinessFrom,
  serverRuntimeOptions,
  startServiceServer,
  startTelemetry,
} from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";
import { createBrokerCallerPolicy, createPortPolicy, RUNNER_PROCEDURES } from "./caller-policy.js";
import { createDistributedStores } from "./distributed-stores.js";
import { startJobReconciler } from "./jobs/job-store.js";
import { JOB_GAUGE_INTERVAL_MS, startJobGauge } from "./jobs/job-gauge.js";
import { startRunnerGauge } from "./fleet/runner-gauge.js";
import { migrateRunnerBroker } from "./migrations.js";
import { createConfiguredProvisioner } from "./provisioning/from-config.js";
import { createRedisCallActivity } from "./fleet/activity.js";
import { createConcurrentJobsQuota } from "./fleet/job-quota.js";

/**
 * Distributed entry point: config → Redis, Postgres (migrations) → registry, leases, Jobs,
 * provisioner → server → Job reconciliation → shutdown.
 */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "runner-broker", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-runner-broker", env, logger);
  const metrics = createMetrics();
  // HTTP/2 transports to peers and Runners; their calls carry the trace context (traceparent).
  const identity = serviceIdentityFromEnv("runner-broker", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  const peer = (baseUrl: string) => createServiceTransport(baseUrl, { metrics, identity });
  // Runners do not hold the service key; calls to them carry the Runner credential only.
  const toRunner = (baseUrl: string) => createServiceTransport(baseUrl, { metrics });
  const redis = createRedis(config.redisUrl);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateRunnerBroker(db);
  const work = createWorkMetrics(metrics);
  const { registry, leases, concurrency, jobs, continuations } = createDistributedStores({
    redis,
    db,
    prefix: config.redisKeyPrefix,
    lostAfterMs: config.heartbeatIntervalMs * 2,
    projectConcurrency: config.projectConcurrency,
    work,
  });
  // A local Runner registers with this server, whose URL is known only after listen.
  let brokerUrl = config.brokerAdvertiseUrl ?? "";
  // A Project with a call in flight (on any replica: the limiter is shared) or an open Job is never stopped or rotated.
  const provisioner = await createConfiguredProvisioner(
    config,
    () => brokerUrl,
    logger.child({ component: "provisioner" }),
    async (id) => (await concurrency.inFlight(id)) > 0 || (await jobs.openProjectJobs(id, 1)).length > 0,
    // A Runner stopped for idleness: its record goes, and its Project lease while it still holds
    // it (compare-and-set on owner and fence), so the next call starts a new one at once.
    async (w, runnerId) => {
      const id = canonicalProjectId(w.clientId, w.projectId);
      const lease = await leases.current(id);
      if (lease && lease.owner === runnerId) await leases.release(id, lease.owner, lease.fence);
      const last = await registry.lastForProject(id);
      if (!last || last.runnerId === runnerId) await registry.forgetProject(id);
    },
    // Every replica's calls count for the fleet's idle clock.
    createRedisCallActivity(redis, { prefix: config.redisKeyPrefix, logger }),
  );

  const jobQuota = createConcurrentJobsQuota({ limit: config.fleetQuotaConcurrentJobsPerTenant, jobs });
  const host = config.host ?? defaultBindHost(env);
  const split = config.registrationPort > 0;
  const brokerRoutes = routes({
    registry,
    leases,
    concurrency,
    jobs,
    continuations,
    ...(jobQuota ? { jobQuota } : {}),
    ...(provisioner ? { provisioner } : {}),
    refResolver: createClient(RefResolverService, peer(config.refResolverUrl)),
    runnerClient: (url) => createClient(RunnerService, toRunner(url)),
    metrics,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    dispatchTimeoutMs: config.dispatchTimeoutMs,
    directRoutes: config.directRoutes,
    routeTtlMs: config.routeTtlMs,
    ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
    logger,
  });
  const readiness = readinessFrom({
    redis: async () => {
      await redis.ping();
    },
    postgres: () => db.ping(),
  });
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    ...serverRuntimeOptions(config),
    interceptors: [
      ...(split ? [createPortPolicy("control")] : []),
      ...(identity ? [identity.serverInterceptor(RUNNER_PROCEDURES)] : []),
      createBrokerCallerPolicy({ requireIdentity: identity !== undefined }),
    ],
    name: "runner-broker",
    port: config.port,
    host,
    metrics,
    logger,
    routes: brokerRoutes,
    readiness,
  });
  // Runners reach only this port (NetworkPolicy): RegisterRunner and Heartbeat, nothing else.
  const registration = split
    ? await startServiceServer({
        interceptors: [createPortPolicy("registration")],
        name: "runner-broker-registration",
        port: config.registrationPort,
        host,
        metrics,
        logger,
        routes: brokerRoutes,
        readiness,
      })
    : undefined;
  brokerUrl ||= registration?.url ?? server.url;
  // Runners of existing workspaces start now, not on their first call (after a restart).
  void provisioner?.resume?.().catch((error: unknown) => logger.warn("workspaces not resumed", { error }));
  const reconciler = startJobReconciler(jobs, config.jobReconcileIntervalMs, logger);
  const jobGauge = startJobGauge(jobs, work, JOB_GAUGE_INTERVAL_MS, logger);
  const runnerGauge = startRunnerGauge(registry, metrics, JOB_GAUGE_INTERVAL_MS, logger);
  logger.info("listening", {
    url: server.url,
    ...(registration ? { registration_url: registration.url } : {}),
    provisioner: config.provisioner,
    runner_token: config.runnerToken ? "required" : "off",
  });
  onShutdown(logger, async () => {
    reconciler.stop();
    jobGauge.stop();
    runnerGauge.stop();
    await server.close();
    await registration?.close();
    await provisioner?.close();
    redis.disconnect();
    await db.close();
    await telemetry.shutdown();
  });
}
