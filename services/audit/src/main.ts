import {
  createLogger,
  createMetrics,
  createPostgresDatabase,
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
import { routes } from "./routes.js";
import { migrateAudit } from "./audit.js";
import { startAuditRetention } from "./retention.js";

/** Distributed entry point: config → Postgres → partitions → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "audit", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-audit", env, logger);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateAudit(db);
  const maintenance = await startAuditRetention(db, config, logger);
  const identity = serviceIdentityFromEnv("audit", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    ...serverRuntimeOptions(config),
    ...(identity ? { interceptors: [identity.serverInterceptor()] } : {}),
    name: "audit",
    port: config.port,
    host: config.host ?? defaultBindHost(env),
    routes: routes({ db, retentionDays: config.retentionDays }),
    metrics: createMetrics(),
    logger,
    readiness: readinessFrom({ postgres: () => db.ping() }),
  });
  logger.info("listening", { url: server.url });
  onShutdown(logger, async () => {
    maintenance.stop();
    await server.close();
    await db.close();
    await telemetry.shutdown();
  });
}
