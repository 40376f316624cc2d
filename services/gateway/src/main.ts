import { createClient } from "@connectrpc/connect";
import { AuditService, RefResolverService, RunnerBrokerService, RunnerService, ToolRegistryService } from "@webcodex/proto";
import {
  createLogger,
  createMetrics,
  createServiceTransport,
  createUnaryH2Client,
  defaultBindHost,
  onShutdown,
  serviceIdentityFromEnv,
  serverRuntimeOptions,
  startServiceServer,
  startTelemetry,
} from "@webcodex/platform";
import type { Env, LogLevel } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import { createGateway } from "./gateway.js";
import type { GatewayTestHooks } from "./gateway.js";
import { createStaticTokenAuthenticator } from "./auth.js";
import { devTokenEntries } from "./dev-tokens.js";
import { deploymentOptions } from "./deployment.js";
import { peerReadinessProbes } from "./peer-readiness.js";
import { configuredUpstreams } from "./upstream/config.js";
import { createRouteTable } from "./execute/routes.js";
import { createResolutionCache } from "./execute/call-scope.js";

/**
 * Distributed entry point: config → peer clients → gateway → server → shutdown. `testHooks`
 * only from a test harness's launcher (`webcodex serve gateway` passes none).
 */
export async function main(env: Env = process.env, testHooks?: GatewayTestHooks): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "gateway", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-gateway", env, logger);
  const metrics = createMetrics();
  // HTTP/2 transports to the peers; their calls carry the trace context (traceparent).
  // Every call is signed as the gateway, the principal with it.
  const identity = serviceIdentityFromEnv("gateway", env);
  if (!identity) logger.warn("no WEBCODEX_SERVICE_KEY: internal calls are not authenticated");
  const peer = (baseUrl: string) => createServiceTransport(baseUrl, { metrics, identity });
  const options = deploymentOptions(config);
  const broker = createClient(RunnerBrokerService, peer(config.runnerBrokerUrl));
  // Runner calls on direct routes: the route credential is the authority (Runners hold no
  // service key), so these calls are not signed as the gateway.
  const routes = createRouteTable({
    broker,
    // The hot hop: a Runner call on a direct route (unary Connect over HTTP/2, one write each way).
    runnerClient: (url) => createUnaryH2Client(RunnerService, url, { metrics }),
    logger: logger.child({ component: "routes" }),
    metrics,
  });
  const gateway = await createGateway({
    clients: {
      toolRegistry: createClient(ToolRegistryService, peer(config.toolRegistryUrl)),
      // On every call that resolves a ref and every agent tool call (a woken wait's answer
      // among them): unary Connect over HTTP/2, one write each way, signed as above.
      refResolver: createUnaryH2Client(RefResolverService, config.refResolverUrl, { metrics, identity }),
      broker,
      audit: createClient(AuditService, peer(config.auditUrl)),
    },
    routes,
    ...(config.resolutionCacheMs > 0 ? { resolutionCache: createResolutionCache({ ttlMs: config.resolutionCacheMs }) } : {}),
    authenticator: createStaticTokenAuthenticator(devTokenEntries(config, logger)),
    dependencyProbes: peerReadinessProbes({
      "tool-registry": config.toolRegistryUrl,
      "ref-resolver": config.refResolverUrl,
      audit: config.auditUrl,
      "runner-broker": config.runnerBrokerUrl,
    }),
    ...options,
    mcpUpstreams: configuredUpstreams(config.mcpUpstreams, config.mcpUpstreamsFile, env),
    ...(config.mcpOAuthKey !== undefined
      ? { mcpUpstreamOAuth: { key: config.mcpOAuthKey, ...(config.mcpOAuthRedisUrl ? { redisUrl: config.mcpOAuthRedisUrl } : {}) } }
      : {}),
    readyProjects: config.readyProjects
      .split(",")
      .map((id) => id.trim())
      .filter(Boolean),
    mode: "distributed",
    version: "0.1.0",
    logger,
    metrics,
    ...(testHooks ? { testHooks } : {}),
  });
  const server = await startServiceServer({
    grpcReflection: config.grpcReflection,
    ...serverRuntimeOptions(config),
    name: "gateway",
    port: config.port,
    host: config.host ?? defaultBindHost(env),
    httpRoutes: gateway.httpRoutes,
    readiness: gateway.readiness,
    metrics,
    logger,
  });
  logger.info("listening", { url: server.url, mcp: `${options.publicUrl}/mcp` });
  onShutdown(logger, async () => {
    await server.close();
    await gateway.close();
    await telemetry.shutdown();
  });
}
