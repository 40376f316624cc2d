import { createLogger, createMetrics, createPostgresDatabase, defaultBindHost, onShutdown, readinessFrom, serviceIdentityFromEnv, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";
import { migrateRefResolver } from "./ref-resolver.js";

/** Distributed entry point: config → Postgres → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "ref-resolver", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-ref-resolver", env, logger);
  const db = createPostgresDatabase({ url: config.postgresUrl });
  if (config.migrateOnStart) await migrateRefResolver(db);
  const identity = serviceIdentityFromEnv("ref-resolver", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  const server = await startServiceServer({
    ...(identity ? { interceptors: [identity.serverInterceptor()] } : {}),
    name: "ref-resolver", port: config.port, host: config.host ?? defaultBindHost(env), routes: routes({ db }), metrics: createMetrics(), logger,
    readiness: readinessFrom({ postgres: () => db.ping() }),
  });
  logger.info("listening", { url: server.url });
  onShutdown(logger, async () => { await server.close(); await db.close(); await telemetry.shutdown(); });
}
