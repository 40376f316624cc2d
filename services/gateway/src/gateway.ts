/**
 * createGateway wires the MCP endpoint, the pipeline and the operator routes from service
 * clients. The same code runs embedded (in-memory transports) and distributed (HTTP/2).
 */
import type { Client } from "@connectrpc/connect";
import type { AuditService, RefResolverService, RunnerBrokerService, ToolRegistryService } from "@webcodex/proto";
import type { HostProfile, ModelWorkflowPolicy } from "@webcodex/contracts";
import type { HttpHandler, Logger, Metrics, ReadinessReport } from "@webcodex/platform";
import { principalHeaders, readinessFrom } from "@webcodex/platform";
import { parseCanonicalProjectId } from "@webcodex/contracts";
import type { Authenticator } from "./auth.js";
import { createChainAuthenticator } from "./auth.js";
import { createJwtAuthenticator } from "./auth/jwt.js";
import type { TenancyOptions } from "./auth/tenancy.js";
import { createResourceMetadataHandler } from "./auth/resource-metadata.js";
import { SUPPORTED_SCOPES } from "./auth/scopes.js";
import { createRateLimiter, parseRateLimitOverrides } from "./rate-limit.js";
import type { RateLimiter } from "./rate-limit.js";
import { createAuditRecorder } from "./audit-recorder.js";
import { createCatalogCache } from "./catalog-cache.js";
import { refusedCallRecord } from "./audit-capture.js";
import { createPipeline } from "./pipeline.js";
import type { AttemptDispatchHold } from "./execute/runner-tools.js";
import { createMcpServer } from "./mcp/mcp-server.js";
import { createStreamableHttpHandler } from "./mcp/streamable-http.js";
import { createAppSessions } from "./mcp/app-session.js";
import { loadAppResources } from "./mcp/app-resources.js";
import { serveLocalConnection } from "./mcp/local-transport.js";
import type { LocalConnection } from "./mcp/local-transport.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Caller } from "./auth.js";
import type { DeniedToolCall } from "./mcp/streamable-http.js";
import type { UpstreamServer } from "./upstream/config.js";
import { createUpstreamTools } from "./upstream/upstream-tools.js";
import type { RouteTable } from "./execute/routes.js";
import type { ResolutionCache } from "./execute/call-scope.js";
import { CALLBACK_PATH as UPSTREAM_OAUTH_CALLBACK_PATH, REVOKE_PATH as UPSTREAM_OAUTH_REVOKE_PATH, upstreamOAuthFor } from "./upstream/oauth.js";

/**
 * Hooks only a test harness installs, by passing them to createGateway (the test launcher of
 * the CLI does): no configuration, flag or environment variable of a service sets them.
 */
export interface GatewayTestHooks {
  /** Holds a workspace call made for an Agent Attempt between its admission and its dispatch. */
  attemptDispatchHold?: AttemptDispatchHold;
}

export interface GatewayDeps {
  clients: {
    toolRegistry: Client<typeof ToolRegistryService>;
    refResolver: Client<typeof RefResolverService>;
    broker: Client<typeof RunnerBrokerService>;
    audit: Client<typeof AuditService>;
  };
  /** Static (dev) token authenticator; JWTs are accepted as well when `oauth` is set. */
  authenticator: Authenticator;
  /** OAuth 2.1 resource server settings: JWT access tokens from this issuer. */
  oauth?: {
    issuer: string;
    /** Expected token audience (this MCP resource); default `${publicUrl}/mcp`. */
    audience?: string;
    jwksUrl?: string;
    clientIdClaim?: string;
    /** Tenant preset and tenant-admin mapping. */
    tenancy?: Omit<TenancyOptions, "tenantClaim">;
    admissionProfileClaim?: string;
    /** Claim naming the caller's Host profile; absent: every JWT caller gets `hostProfile`. */
    hostProfileClaim?: string;
    clockToleranceSec?: number;
  };
  /** Tenants admitted read-only whatever their token says (JWT callers). */
  readOnlyClients?: readonly string[];
  /**
   * tools/call limits: `perMinute` per principal, `tenantPerMinute` per tenant (overridden per
   * tenant by `perClient`); all 0 or absent: no limit.
   */
  rateLimit?: { perMinute: number; burst?: number; tenantPerMinute?: number; perClient?: string | Readonly<Record<string, number>> };
  /** Named probes of the services the gateway needs; /readyz fails when one fails. */
  dependencyProbes: Record<string, () => Promise<void>>;
  /**
   * Canonical project ids whose Runner must be routable before /readyz says ready (the
   * project `webcodex up --project` serves), so a Host that connects then finds it.
   */
  readyProjects?: readonly string[];
  /** The public base URL Hosts use, e.g. http://127.0.0.1:8080. */
  publicUrl: string;
  allowedHosts: readonly string[];
  allowedOrigins?: readonly string[];
  /** Authorization server advertised in the resource metadata when `oauth` is not set. */
  oauthIssuer?: string;
  /** Deployment facts (goal selection, Host interaction assumptions); default: on_demand, unknown. */
  workflowPolicy?: ModelWorkflowPolicy;
  /** Key signing Mcp-Session-Id (shared by replicas); default: random per process. */
  mcpSessionKey?: string;
  /** The directory holding one Agent Skills catalog directory per tenant (read-only); absent: none. */
  skillCatalogsDir?: string;
  /** The Host profile of callers whose token names none (default "generic"). */
  hostProfile?: HostProfile;
  mode: "embedded" | "distributed";
  version: string;
  logger: Logger;
  metrics?: Metrics;
  maxBodyBytes?: number;
  /** How long read-only audit records may wait to be batched. */
  auditFlushMs?: number;
  /** Whether read-only and refused calls are answered only once their audit row is stored (default true). */
  auditReadsWaitForStore?: boolean;
  /**
   * Directory of the audit spool (one gateway process per directory): records the audit
   * service cannot take now are fsync'd here and replayed. Without it they wait in memory.
   */
  auditSpoolDir?: string;
  /** Upstream MCP servers the operator registered (namespaces mcp:<server>, mcp_tool). */
  mcpUpstreams?: readonly UpstreamServer[];
  /** Per-user OAuth to upstreams: the key tokens are encrypted with, and the Redis replicas share them in (else memory). */
  mcpUpstreamOAuth?: { key: string; redisUrl?: string };
  /** Test hooks (tests only; see GatewayTestHooks). */
  testHooks?: GatewayTestHooks;
  /** Direct routes to Runners (distributed mode); absent: every Runner call goes through the broker. */
  routes?: RouteTable;
  /** Resolved Projects kept for the resolver's TTL (distributed mode); absent: every Runner call asks the resolver. */
  resolutionCache?: ResolutionCache;
}

export interface Gateway {
  httpRoutes: Record<string, HttpHandler>;
  /** The per-principal/tenant limiter the HTTP layer enforces (for a pipeline hook), if any. */
  rateLimiter?: RateLimiter;
  readiness: () => Promise<ReadinessReport>;
  /**
   * Serves one trusted MCP connection (stdio) as `caller`, through the same MCP server,
   * pipeline, refs and audit as /mcp. No token check: the caller is whoever owns the pipe.
   */
  serveLocal(connection: Transport, caller: Caller): Promise<LocalConnection>;
  close(): Promise<void>;
}

/** One readiness probe per project: it is registered and a Runner takes its calls now. */
function projectRunnerProbes(clients: GatewayDeps["clients"], projects: readonly string[]): Record<string, () => Promise<void>> {
  return Object.fromEntries(
    projects.map((canonicalId) => [
      `project ${canonicalId}`,
      async () => {
        const workspace = parseCanonicalProjectId(canonicalId);
        if (!workspace) throw new Error(`not a canonical project id: ${canonicalId}`);
        const headers = principalHeaders({ clientId: workspace.clientId, subject: "webcodex:readiness" });
        const resolved = await clients.refResolver.resolveProject({ selector: canonicalId }, { headers });
        if (!resolved.project) throw new Error("its Runner has not registered yet");
        const { states } = await clients.broker.getProjectRunnerStates(
          { projects: [{ projectCanonicalId: canonicalId, rootIdentity: resolved.project.rootIdentity }] },
          { headers },
        );
        if (states[canonicalId] !== "ready") throw new Error(`its Runner is not ready (${states[canonicalId] ?? "none"})`);
      },
    ]),
  );
}

export async function createGateway(deps: GatewayDeps): Promise<Gateway> {
  const hostProfile = deps.hostProfile ?? "generic";
  const catalogs = createCatalogCache(deps.clients.toolRegistry, { ttlMs: 30_000 });
  const audit = createAuditRecorder(deps.clients.audit, deps.logger, {
    ...(deps.auditFlushMs !== undefined ? { flushMs: deps.auditFlushMs } : {}),
    ...(deps.auditReadsWaitForStore !== undefined ? { readsWaitForStore: deps.auditReadsWaitForStore } : {}),
    ...(deps.auditSpoolDir !== undefined ? { spoolDir: deps.auditSpoolDir } : {}),
  });
  const upstreamLogger = deps.logger.child({ component: "mcp-upstream" });
  const upstreamOAuth = upstreamOAuthFor({
    upstreams: deps.mcpUpstreams ?? [],
    publicUrl: deps.publicUrl,
    logger: upstreamLogger,
    ...(deps.mcpUpstreamOAuth ? { settings: deps.mcpUpstreamOAuth } : {}),
  });
  const upstreamTools =
    deps.mcpUpstreams && deps.mcpUpstreams.length > 0
      ? createUpstreamTools({
          upstreams: deps.mcpUpstreams,
          refResolver: deps.clients.refResolver,
          logger: upstreamLogger,
          ...(upstreamOAuth ? { oauth: upstreamOAuth.client } : {}),
        })
      : undefined;
  const pipeline = createPipeline({
    catalogs,
    upstreamTools,
    refResolver: deps.clients.refResolver,
    broker: deps.clients.broker,
    audit,
    hostProfile,
    serverInfo: { name: "webcodex", version: deps.version, mode: deps.mode },
    logger: deps.logger,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    ...(deps.workflowPolicy ? { workflowPolicy: deps.workflowPolicy } : {}),
    ...(deps.testHooks?.attemptDispatchHold ? { attemptDispatchHold: deps.testHooks.attemptDispatchHold } : {}),
    ...(deps.routes ? { routes: deps.routes } : {}),
    ...(deps.resolutionCache ? { resolutionCache: deps.resolutionCache } : {}),
    ...(deps.skillCatalogsDir !== undefined ? { skillCatalogsDir: deps.skillCatalogsDir } : {}),
  });
  const appResources = await loadAppResources(deps.logger);
  const transport = await createMcpServer({ pipeline, catalogs, hostProfile, version: deps.version, appResources });
  const resource = deps.oauth?.audience ?? `${deps.publicUrl}/mcp`;
  const resourceMetadataUrl = `${deps.publicUrl}/.well-known/oauth-protected-resource/mcp`;
  const issuer = deps.oauth?.issuer ?? deps.oauthIssuer;
  const authenticator = deps.oauth
    ? createChainAuthenticator([
        deps.authenticator,
        createJwtAuthenticator({
          issuer: deps.oauth.issuer,
          audience: resource,
          ...(deps.oauth.jwksUrl ? { jwksUrl: deps.oauth.jwksUrl } : {}),
          ...(deps.oauth.clientIdClaim ? { clientIdClaim: deps.oauth.clientIdClaim } : {}),
          ...(deps.oauth.tenancy ? { tenancy: deps.oauth.tenancy } : {}),
          ...(deps.oauth.admissionProfileClaim ? { admissionProfileClaim: deps.oauth.admissionProfileClaim } : {}),
          ...(deps.oauth.hostProfileClaim ? { hostProfileClaim: deps.oauth.hostProfileClaim } : {}),
          ...(deps.oauth.clockToleranceSec !== undefined ? { clockToleranceSec: deps.oauth.clockToleranceSec } : {}),
          readOnlyClients: deps.readOnlyClients ?? [],
          logger: deps.logger.child({ component: "oauth" }),
        }),
      ])
    : deps.authenticator;
  const perClient = typeof deps.rateLimit?.perClient === "string" ? parseRateLimitOverrides(deps.rateLimit.perClient) : deps.rateLimit?.perClient;
  const tenantPerMinute = deps.rateLimit?.tenantPerMinute ?? 0;
  const limiter =
    deps.rateLimit && (deps.rateLimit.perMinute > 0 || tenantPerMinute > 0 || Object.keys(perClient ?? {}).length > 0)
      ? createRateLimiter({
          perMinute: deps.rateLimit.perMinute,
          tenantPerMinute,
          ...(deps.rateLimit.burst ? { burst: deps.rateLimit.burst } : {}),
          ...(perClient ? { perClient } : {}),
        })
      : undefined;
  // Quotas: every request a rate limit refuses, by the bucket that refused it (principal or tenant).
  const rateLimited = deps.metrics?.counter("webcodex_rate_limited_total", "Requests refused by a rate limit, by scope (principal or tenant)");
  const rateLimiter: RateLimiter | undefined =
    limiter && rateLimited
      ? {
          take(principal) {
            const decision = limiter.take(principal);
            if (!decision.ok) rateLimited.inc({ scope: decision.scope });
            return decision;
          },
        }
      : limiter;
  // Audit lag: records captured but not yet stored by the audit service (memory queue and spool).
  deps.metrics?.sampledGauge("webcodex_audit_backlog_records", "Audit records captured by the gateway and not yet stored by the audit service", () =>
    audit.backlog(),
  );
  // Calls refused before the pipeline (scope, rate limit) are audited like any failed call,
  // and answered once the record left the gateway's memory (as the pipeline's calls are).
  const recordDenied = (d: DeniedToolCall): Promise<void> =>
    audit
      .record(refusedCallRecord(d.caller, d.tool, d.args, d.failure), false)
      .catch((error: unknown) => deps.logger.warn("audit of a denied call failed", { error }));
  const mcp = createStreamableHttpHandler({
    transport,
    authenticator,
    allowedHosts: deps.allowedHosts,
    allowedOrigins: deps.allowedOrigins ?? [],
    resourceMetadataUrl,
    challengeScopes: SUPPORTED_SCOPES,
    ...(rateLimiter ? { rateLimiter } : {}),
    onDenied: recordDenied,
    maxBodyBytes: deps.maxBodyBytes ?? 8 * 1024 * 1024,
    logger: deps.logger,
    appSessions: createAppSessions(deps.mcpSessionKey),
  });
  const resourceMetadata = createResourceMetadataHandler({
    resource,
    authorizationServers: issuer ? [issuer] : [],
    scopesSupported: SUPPORTED_SCOPES,
    resourceName: "WebCodex",
  });
  return {
    httpRoutes: {
      "/mcp": mcp,
      "/.well-known/oauth-protected-resource": resourceMetadata,
      "/.well-known/oauth-protected-resource/mcp": resourceMetadata,
      ...(upstreamOAuth && upstreamTools
        ? {
            [UPSTREAM_OAUTH_CALLBACK_PATH]: upstreamOAuth.client.callbackHandler(upstreamTools.servers),
            [UPSTREAM_OAUTH_REVOKE_PATH]: upstreamTools.revokeHandler((token) => authenticator.authenticate(token)),
          }
        : {}),
    },
    ...(rateLimiter ? { rateLimiter } : {}),
    readiness: readinessFrom({ ...deps.dependencyProbes, ...projectRunnerProbes(deps.clients, deps.readyProjects ?? []) }),
    serveLocal: (connection, caller) => serveLocalConnection(transport, connection, caller),
    close: async () => {
      await upstreamTools?.close();
      upstreamOAuth?.redis?.disconnect();
      await audit.close();
    },
  };
}
