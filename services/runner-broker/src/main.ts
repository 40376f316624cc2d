import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { RefResolverService, RunnerService } from "@webcodex/proto";
import {
  createLogger, createMetrics, createPostgresDatabase, createRedis, createServiceTransport, createWorkMetrics, onShutdown, readinessFrom, startServiceServer,
  startTelemetry,
} from "@webcodex/platform";
import type { Env, LogLevel, Logger, Metrics, WorkMetrics } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";
import { createRedisRunnerRegistry } from "./runner-registry.js";
import { createLeaseStore } from "./leases/lease-store.js";
import { createRedisLeaseBackend } from "./leases/redis-lease-backend.js";
import { createPostgresFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createMeteredLeaseStore } from "./leases/metered-lease-store.js";
import { createRedisConcurrencyLimiter } from "./admission/concurrency.js";
import { createJobStore, startJobReconciler } from "./jobs/job-store.js";
import { createRedisLiveJobBackend } from "./jobs/live-job-backends.js";
import { migrateRunnerBroker } from "./migrations.js";
import { createKubernetesProvisioner, loadRunnerPodTemplate } from "./provisioning/kubernetes.js";
import { createLocalProcessProvisioner } from "./provisioning/local-process.js";
import { runnerNames } from "./provisioning/provisioner.js";
import type { Provisioner } from "./provisioning/provisioner.js";

/** An HTTP/2 transport to a peer whose calls carry the trace context (traceparent). */
const h2 = (baseUrl: string, metrics: Metrics) => createServiceTransport(baseUrl, { metrics });

/** tools/cli/bin/webcodex.js relative to this file (services/runner-broker/dist/main.js). */
const defaultCliPath = () => resolve(dirname(fileURLToPath(import.meta.url)), "../../../tools/cli/bin/webcodex.js");

/**
 * Distributed entry point: config → Redis, Postgres (migrations) → registry, leases, Jobs,
 * provisioner → server → Job reconciliation → shutdown.
 */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "runner-broker", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-runner-broker", env, logger);
  const metrics = createMetrics();
  const redis = createRedis(config.redisUrl);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateRunnerBroker(db);
  const prefix = config.redisKeyPrefix;
  const lostAfterMs = config.heartbeatIntervalMs * 2;
  const registry = createRedisRunnerRegistry(redis, { lostAfterMs, prefix });
  const work = createWorkMetrics(metrics);
  const leases = createMeteredLeaseStore(createLeaseStore(createRedisLeaseBackend(redis, { prefix }), createPostgresFenceHighWaterMark(db)), work);
  const concurrency = createRedisConcurrencyLimiter(redis, { limit: config.projectConcurrency, prefix });
  const jobs = createJobStore({ live: createRedisLiveJobBackend(redis, { prefix }), db });

  // The local provisioner needs this server's URL, known only after listen.
  let brokerUrl = config.brokerAdvertiseUrl ?? "";
  let provisioner: Provisioner | undefined;
  if (config.provisioner === "kubernetes") {
    provisioner = createKubernetesProvisioner({
      template: await loadRunnerPodTemplate(config.runnerPodTemplate ?? ""),
      ...(config.runnerNamespace ? { namespace: config.runnerNamespace } : {}),
      logger: logger.child({ component: "provisioner" }),
    });
  } else if (config.provisioner === "local-process") {
    const base = config.runnerWorkspacesDir ?? "";
    provisioner = createLocalProcessProvisioner({
      cliPath: config.runnerCliPath ?? defaultCliPath(),
      get brokerUrl() {
        return brokerUrl;
      },
      directoryFor: (w) => {
        const dir = join(base, runnerNames(w).tenantLabel, w.projectId);
        mkdirSync(dir, { recursive: true });
        return dir;
      },
      ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
      logLevel: config.logLevel,
      logger: logger.child({ component: "provisioner" }),
    });
  }

  const server = await startServiceServer({
    name: "runner-broker", port: config.port, host: config.host, metrics, logger,
    routes: routes({
      registry, leases, concurrency, jobs, ...(provisioner ? { provisioner } : {}),
      refResolver: createClient(RefResolverService, h2(config.refResolverUrl, metrics)),
      runnerClient: (url) => createClient(RunnerService, h2(url, metrics)),
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      dispatchTimeoutMs: config.dispatchTimeoutMs,
      ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
      logger,
    }),
    readiness: readinessFrom({ redis: async () => { await redis.ping(); }, postgres: () => db.ping() }),
  });
  brokerUrl ||= server.url;
  const reconciler = startJobReconciler(jobs, config.jobReconcileIntervalMs, logger);
  const jobGauge = startJobGauge(jobs, work, JOB_GAUGE_INTERVAL_MS, logger);
  logger.info("listening", { url: server.url, provisioner: config.provisioner, runner_token: config.runnerToken ? "required" : "off" });
  onShutdown(logger, async () => {
    reconciler.stop();
    jobGauge.stop();
    await server.close();
    await provisioner?.close();
    redis.disconnect();
    await db.close();
    await telemetry.shutdown();
  });
}

/** How often `webcodex_jobs{state}` is refreshed from the Job store (a typical scrape interval). */
const JOB_GAUGE_INTERVAL_MS = 15_000;

/** Samples the Job counts into `webcodex_jobs{state}` now and every `intervalMs`. */
function startJobGauge(jobs: ReturnType<typeof createJobStore>, work: WorkMetrics, intervalMs: number, logger: Logger): { stop(): void } {
  const sample = () => {
    jobs.counts().then(
      (c) => work.setJobs({ running: c.running, queued: c.queued, recovering: c.recovering, lost_after_reconcile: c.lostAfterReconcile }),
      (error: unknown) => logger.warn("job counts for metrics failed", { error }),
    );
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

