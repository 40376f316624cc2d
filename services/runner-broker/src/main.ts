import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RefResolverService, RunnerService } from "@webcodex/proto";
import { createLogger, createMetrics, createRedis, onShutdown, readinessFrom, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";
import { createRedisRunnerRegistry } from "./runner-registry.js";

const h2 = (baseUrl: string) => createConnectTransport({ baseUrl, httpVersion: "2" });

/** Distributed entry point: config → Redis, ref-resolver client → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "runner-broker", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-runner-broker", env, logger);
  const redis = createRedis(config.redisUrl);
  const registry = createRedisRunnerRegistry(redis, { lostAfterMs: config.heartbeatIntervalMs * 2, prefix: config.redisKeyPrefix });
  const server = await startServiceServer({
    name: "runner-broker", port: config.port, host: config.host, metrics: createMetrics(), logger,
    routes: routes({ registry, refResolver: createClient(RefResolverService, h2(config.refResolverUrl)), runnerClient: (url) => createClient(RunnerService, h2(url)), heartbeatIntervalMs: config.heartbeatIntervalMs, logger }),
    readiness: readinessFrom({ redis: async () => { await redis.ping(); } }),
  });
  logger.info("listening", { url: server.url });
  onShutdown(logger, async () => { await server.close(); redis.disconnect(); await telemetry.shutdown(); });
}
