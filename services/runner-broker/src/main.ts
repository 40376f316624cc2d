import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RefResolverService, RunnerService } from "@webcodex/proto";
import { createLogger, createMetrics, createPostgresDatabase, createRedis, onShutdown, readinessFrom, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";
import { createRedisRunnerRegistry } from "./runner-registry.js";
import { createLeaseStore } from "./leases/lease-store.js";
import { createRedisLeaseBackend } from "./leases/redis-lease-backend.js";
import { createPostgresFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createRedisConcurrencyLimiter } from "./admission/concurrency.js";
import { createJobStore, startJobReconciler } from "./jobs/job-store.js";
import { createRedisLiveJobBackend } from "./jobs/live-job-backends.js";
import { migrateRunnerBroker } from "./migrations.js";
import { createKubernetesProvisioner, loadRunnerPodTemplate } from "./provisioning/kubernetes.js";
import { createLocalProcessProvisioner } from "./provisioning/local-process.js";
import { runnerNames } from "./provisioning/provisioner.js";
import type { Provisioner } from "./provisioning/provisioner.js";

const h2 = (baseUrl: string) => createConnectTransport({ baseUrl, httpVersion: "2" });

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
  const redis = createRedis(config.redisUrl);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateRunnerBroker(db);
  const prefix = config.redisKeyPrefix;
  const lostAfterMs = config.heartbeatIntervalMs * 2;
  const registry = createRedisRunnerRegistry(redis, { lostAfterMs, prefix });
  const leases = createLeaseStore(createRedisLeaseBackend(redis, { prefix }), createPostgresFenceHighWaterMark(db));
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
    name: "runner-broker", port: config.port, host: config.host, metrics: createMetrics(), logger,
    routes: routes({
      registry, leases, concurrency, jobs, ...(provisioner ? { provisioner } : {}),
      refResolver: createClient(RefResolverService, h2(config.refResolverUrl)),
      runnerClient: (url) => createClient(RunnerService, h2(url)),
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      dispatchTimeoutMs: config.dispatchTimeoutMs,
      ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
      logger,
    }),
    readiness: readinessFrom({ redis: async () => { await redis.ping(); }, postgres: () => db.ping() }),
  });
  brokerUrl ||= server.url;
  const reconciler = startJobReconciler(jobs, config.jobReconcileIntervalMs, logger);
  logger.info("listening", { url: server.url, provisioner: config.provisioner, runner_token: config.runnerToken ? "required" : "off" });
  onShutdown(logger, async () => {
    reconciler.stop();
    await server.close();
    await provisioner?.close();
    redis.disconnect();
    await db.close();
    await telemetry.shutdown();
  });
}
