import {
  createLogger,
  createMetrics,
  defaultBindHost,
  onShutdown,
  serviceIdentityFromEnv,
  serverRuntimeOptions,
  startServiceServer,
  startTelemetry,
} from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig, loadToolPolicy } from "./config.js";
import { toolRegistryRoutes } from "./routes.js";

/** Distributed entry point: config → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  // A bad policy stops start-up here, naming the field, before anything is served.
  const policy = loadToolPolicy(env);
  const logger = createLogger({ service: "tool-registry", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-tool-registry", env, logger);
  const identity = serviceIdentityFromEnv("tool-registry", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    ...serverRuntimeOptions(config),
    ...(identity ? { interceptors: [identity.serverInterceptor()] } : {}),
    name: "tool-registry",
    port: config.port,
    host: config.host ?? defaultBindHost(env),
    routes: toolRegistryRoutes(policy),
    metrics: createMetrics(),
    logger,
  });
  logger.info("listening", { url: server.url, tool_policy: policy ? "configured" : "none" });
  onShutdown(logger, async () => {
    await server.close();
    await telemetry.shutdown();
  });
}
