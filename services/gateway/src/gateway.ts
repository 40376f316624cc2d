/**
 * createGateway wires the MCP endpoint, the pipeline and the operator routes from service
 * clients. The same code runs embedded (in-memory transports) and distributed (HTTP/2).
 */
import type { Client } from "@connectrpc/connect";
import type { AuditService, RefResolverService, RunnerBrokerService, ToolRegistryService } from "@webcodex/proto";
import type { HostProfile } from "@webcodex/contracts";
import type { HttpHandler, Logger, Metrics, ReadinessReport } from "@webcodex/platform";
import { readinessFrom, sendJson } from "@webcodex/platform";
import type { Authenticator } from "./auth.js";
import { createAuditRecorder } from "./audit-recorder.js";
import { createCatalogCache } from "./catalog-cache.js";
import { createPipeline } from "./pipeline.js";
import { createMcpServer } from "./mcp/mcp-server.js";
import { createStreamableHttpHandler } from "./mcp/streamable-http.js";

export interface GatewayDeps {
  clients: {
    toolRegistry: Client<typeof ToolRegistryService>;
    refResolver: Client<typeof RefResolverService>;
    broker: Client<typeof RunnerBrokerService>;
    audit: Client<typeof AuditService>;
  };
  authenticator: Authenticator;
  /** Named probes of the services the gateway needs; /readyz fails when one fails. */
  dependencyProbes: Record<string, () => Promise<void>>;
  /** The public base URL Hosts use, e.g. http://127.0.0.1:8080. */
  publicUrl: string;
  allowedHosts: readonly string[];
  allowedOrigins?: readonly string[];
  oauthIssuer?: string;
  hostProfile?: HostProfile;
  mode: "embedded" | "distributed";
  version: string;
  logger: Logger;
  metrics?: Metrics;
  maxBodyBytes?: number;
  /** How long read-only audit records may wait to be batched. */
  auditFlushMs?: number;
}

export interface Gateway {
  httpRoutes: Record<string, HttpHandler>;
  readiness: () => Promise<ReadinessReport>;
  close(): Promise<void>;
}

export async function createGateway(deps: GatewayDeps): Promise<Gateway> {
  const hostProfile = deps.hostProfile ?? "generic";
  const catalogs = createCatalogCache(deps.clients.toolRegistry, { ttlMs: 30_000 });
  const audit = createAuditRecorder(deps.clients.audit, deps.logger, deps.auditFlushMs !== undefined ? { flushMs: deps.auditFlushMs } : {});
  const pipeline = createPipeline({
    catalogs, refResolver: deps.clients.refResolver, broker: deps.clients.broker, audit, hostProfile,
    serverInfo: { name: "webcodex", version: deps.version, mode: deps.mode }, logger: deps.logger, ...(deps.metrics ? { metrics: deps.metrics } : {}),
  });
  const transport = await createMcpServer({ pipeline, catalogs, hostProfile, version: deps.version });
  const resourceMetadataUrl = `${deps.publicUrl}/.well-known/oauth-protected-resource/mcp`;
  const mcp = createStreamableHttpHandler({
    transport,
    authenticator: deps.authenticator,
    allowedHosts: deps.allowedHosts,
    allowedOrigins: deps.allowedOrigins ?? [],
    resourceMetadataUrl,
    maxBodyBytes: deps.maxBodyBytes ?? 8 * 1024 * 1024,
    logger: deps.logger,
  });
  const resourceMetadata: HttpHandler = (_req, res) =>
    sendJson(res, 200, {
      resource: `${deps.publicUrl}/mcp`,
      ...(deps.oauthIssuer ? { authorization_servers: [deps.oauthIssuer] } : {}),
      bearer_methods_supported: ["header"],
      scopes_supported: ["webcodex"],
    });
  return {
    httpRoutes: {
      "/mcp": mcp,
      "/.well-known/oauth-protected-resource": resourceMetadata,
      "/.well-known/oauth-protected-resource/mcp": resourceMetadata,
    },
    readiness: readinessFrom(deps.dependencyProbes),
    close: () => audit.close(),
  };
}
