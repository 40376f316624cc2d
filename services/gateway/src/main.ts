import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { AuditService, RefResolverService, RunnerBrokerService, ToolRegistryService } from "@webcodex/proto";
import { createLogger, createMetrics, createServiceTransport, onShutdown, startServiceServer, startTelemetry } from "@webcodex/platform";
import type { Env, Logger, LogLevel, Metrics } from "@webcodex/platform";
import { loadConfig } from "./config.js";
import type { GatewayConfig } from "./config.js";
import { createGateway } from "./gateway.js";
import type { GatewayDeps } from "./gateway.js";
import { createStaticTokenAuthenticator, parseDevTokensFile } from "./auth.js";
import type { StaticTokenEntry } from "./auth.js";

/** An HTTP/2 transport to a peer whose calls carry the trace context (traceparent). */
const h2 = (baseUrl: string, metrics: Metrics) => createServiceTransport(baseUrl, { metrics });

/** Probes a peer's /readyz over HTTP/1.1 with a short deadline. */
export function httpReadinessProbe(baseUrl: string): () => Promise<void> {
  return async () => {
    const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
    if (!res.ok) throw new Error(`${baseUrl}/readyz answered ${res.status}`);
  };
}

/**
 * Dev tokens: a file mapping tokens to principals, or one token (given or random, printed
 * once). With OAuth configured, no random token is made: only tokens asked for exist.
 */
export function devTokenEntries(config: GatewayConfig, logger: Logger): StaticTokenEntry[] {
  if (config.devTokensFile) return parseDevTokensFile(readFileSync(config.devTokensFile, "utf8"));
  if (config.oauthIssuer && !config.devToken) return [];
  const token = config.devToken ?? randomBytes(24).toString("base64url");
  if (!config.devToken) logger.info("generated dev token (set WEBCODEX_DEV_TOKEN to fix it)", { token });
  return [{ token, clientId: config.devClientId, subject: "dev" }];
}

const splitList = (text: string) => text.split(",").map((s) => s.trim()).filter(Boolean);

function oauthOptions(config: GatewayConfig): NonNullable<GatewayDeps["oauth"]> {
  return {
    issuer: config.oauthIssuer ?? "",
    ...(config.oauthAudience ? { audience: config.oauthAudience } : {}),
    ...(config.oauthJwksUrl ? { jwksUrl: config.oauthJwksUrl } : {}),
    ...(config.oauthClientIdClaim ? { clientIdClaim: config.oauthClientIdClaim } : {}),
    ...(config.oauthAdmissionClaim ? { admissionProfileClaim: config.oauthAdmissionClaim } : {}),
    ...(config.oauthHostProfileClaim ? { hostProfileClaim: config.oauthHostProfileClaim } : {}),
    clockToleranceSec: config.oauthClockToleranceS,
  };
}

/** Distributed entry point: config → peer clients → gateway → server → shutdown. */
export async function main(env: Env = process.env): Promise<void> {
  const config = loadConfig(env);
  const logger = createLogger({ service: "gateway", level: config.logLevel as LogLevel });
  const telemetry = await startTelemetry("webcodex-gateway", env, logger);
  const metrics = createMetrics();
  // The base URL; the MCP URL (…/mcp) is accepted too, as the Helm chart passes that.
  const publicUrl = (config.publicUrl ?? `http://127.0.0.1:${config.port}`).replace(/\/+$/, "").replace(/\/mcp$/, "");
  const gateway = await createGateway({
    clients: {
      toolRegistry: createClient(ToolRegistryService, h2(config.toolRegistryUrl, metrics)),
      refResolver: createClient(RefResolverService, h2(config.refResolverUrl, metrics)),
      broker: createClient(RunnerBrokerService, h2(config.runnerBrokerUrl, metrics)),
      audit: createClient(AuditService, h2(config.auditUrl, metrics)),
    },
    authenticator: createStaticTokenAuthenticator(devTokenEntries(config, logger)),
    dependencyProbes: {
      "tool-registry": httpReadinessProbe(config.toolRegistryUrl),
      "ref-resolver": httpReadinessProbe(config.refResolverUrl),
      audit: httpReadinessProbe(config.auditUrl),
      "runner-broker": httpReadinessProbe(config.runnerBrokerUrl),
    },
    publicUrl,
    // The public URL's host is always accepted: behind an ingress that is the Host header.
    allowedHosts: [...new Set([...splitList(config.allowedHosts), new URL(publicUrl).hostname].map((h) => h.toLowerCase()))],
    hostProfile: config.hostProfile,
    ...(config.auditSpoolDir ? { auditSpoolDir: config.auditSpoolDir } : {}),
    ...(config.oauthIssuer ? { oauth: oauthOptions(config) } : {}),
    readOnlyClients: splitList(config.readOnlyClients),
    rateLimit: { perMinute: config.rateLimitPerMinute, burst: config.rateLimitBurst, perClient: config.rateLimits },
    mode: "distributed",
    version: "0.1.0",
    logger,
    metrics,
  });
  const server = await startServiceServer({ name: "gateway", port: config.port, host: config.host, httpRoutes: gateway.httpRoutes, readiness: gateway.readiness, metrics, logger });
  logger.info("listening", { url: server.url, mcp: `${publicUrl}/mcp` });
  onShutdown(logger, async () => { await server.close(); await gateway.close(); await telemetry.shutdown(); });
}
