import { createLogger, createMetrics, onShutdown, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { routes } from "./routes.js";

/** Distributed entry point: config → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "tool-registry", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-tool-registry", env, logger);
  const server = await startServiceServer({ name: "tool-registry", port: config.port, host: config.host, routes, metrics: createMetrics(), logger });
  logger.info("listening", { url: server.url });
  onShutdown(logger, async () => { await server.close(); await telemetry.shutdown(); });
}
