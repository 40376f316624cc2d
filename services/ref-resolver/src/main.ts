import {
  createLogger,
  createMetrics,
  createPostgresDatabase,
  createRedis,
  defaultBindHost,
  onShutdown,
  readinessFrom,
  serviceIdentityFromEnv,
  serverRuntimeOptions,
  startServiceServer,
  startTelemetry,
} from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { serving } from "./routes.js";
import { checkRefStores, migrateRefResolver } from "./ref-resolver.js";
import { createPostgresAgentEventBus } from "./agents/event-bus.js";
import { createRedisTaskFenceCounter } from "./agents/fence-counter.js";

/** Distributed entry point: config → Postgres → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "ref-resolver", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-ref-resolver", env, logger);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateRefResolver(db);
  // A database not migrated yet (the chart's hook runs first) is checked on the next start.
  await checkRefStores(db, logger).catch((error: unknown) => logger.error("ref store invariants not checked", { error }));
  const identity = serviceIdentityFromEnv("ref-resolver", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  // Task fences ratchet a Redis counter from the Postgres mark; event waiters on every replica
  // wake through Postgres LISTEN/NOTIFY.
  const redis = config.redisUrl ? createRedis(config.redisUrl) : undefined;
  const taskFences = redis ? createRedisTaskFenceCounter(redis, config.redisKeyPrefix) : undefined;
  const agentEvents = createPostgresAgentEventBus(config.postgresUrl, logger);
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    ...serverRuntimeOptions(config),
    ...(identity ? { interceptors: [identity.serverInterceptor()] } : {}),
    name: "ref-resolver",
    port: config.port,
    host: config.host ?? defaultBindHost(env),
    ...serving({ db, agentEvents, ...(taskFences ? { taskFences } : {}) }),
    metrics: createMetrics(),
    logger,
    readiness: readinessFrom({ postgres: () => db.ping() }),
  });
  logger.info("listening", { url: server.url });
  onShutdown(logger, async () => {
    await server.close();
    await agentEvents.close();
    redis?.disconnect();
    await db.close();
    await telemetry.shutdown();
  });
}
