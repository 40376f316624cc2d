import { readConfig } from "@webcodex/platform";
import type { Env } from "@webcodex/platform";
import { GOAL_SELECTIONS, HOST_PROFILES, modelWorkflowPolicyFrom, UNATTENDED_CONTINUATIONS } from "@webcodex/contracts";
import type { HostProfile, ModelWorkflowPolicy } from "@webcodex/contracts";
import type { TenantPreset } from "./auth/tenancy.js";
import { skillCatalogsDirFrom } from "./skills/catalogs-dir.js";

export const gatewayConfigSpec = {
  port: { kind: "int", env: "WEBCODEX_PORT", default: 8080, min: 0, max: 65535 },
  host: { kind: "string", env: "WEBCODEX_HOST" },
  /** Key internal calls are signed and checked with (service-identity.ts); unset: not authenticated. */
  serviceKey: { kind: "string", env: "WEBCODEX_SERVICE_KEY" },
  publicUrl: { kind: "string", env: "WEBCODEX_PUBLIC_URL" },
  allowedHosts: { kind: "string", env: "WEBCODEX_ALLOWED_HOSTS", default: "localhost,127.0.0.1,[::1]" },
  toolRegistryUrl: { kind: "string", env: "WEBCODEX_TOOL_REGISTRY_URL", required: true },
  refResolverUrl: { kind: "string", env: "WEBCODEX_REF_RESOLVER_URL", required: true },
  /** How long a resolved Project is reused for the same caller and selector (keep it at the ref-resolver's own 1 s live-cache TTL); 0: ask every call. */
  resolutionCacheMs: { kind: "int", env: "WEBCODEX_RESOLUTION_CACHE_MS", default: 1_000, min: 0, max: 60_000 },
  auditUrl: { kind: "string", env: "WEBCODEX_AUDIT_URL", required: true },
  runnerBrokerUrl: { kind: "string", env: "WEBCODEX_RUNNER_BROKER_URL", required: true },
  devToken: { kind: "string", env: "WEBCODEX_DEV_TOKEN" },
  devTokensFile: { kind: "string", env: "WEBCODEX_DEV_TOKENS_FILE" },
  devClientId: { kind: "string", env: "WEBCODEX_DEV_CLIENT_ID", default: "local" },
  // OAuth 2.1 resource server: JWT access tokens are accepted when an issuer is set.
  oauthIssuer: { kind: "string", env: "WEBCODEX_OAUTH_ISSUER", doc: "Authorization server issuer; enables JWT bearer tokens" },
  oauthAudience: { kind: "string", env: "WEBCODEX_OAUTH_AUDIENCE", doc: "Expected token audience; default <public URL>/mcp" },
  oauthJwksUrl: { kind: "string", env: "WEBCODEX_OAUTH_JWKS_URL", doc: "JWKS URL; default discovered from the issuer metadata" },
  oauthClientIdClaim: { kind: "string", env: "WEBCODEX_OAUTH_CLIENT_ID_CLAIM", doc: "Claim naming the tenant; default client_id, then azp" },
  oauthTenantPreset: {
    kind: "enum",
    env: "WEBCODEX_OAUTH_TENANT_PRESET",
    values: ["client", "keycloak", "okta", "entra", "issuer"],
    default: "client",
    doc: "Where the tenant comes from: client (client_id/azp), keycloak (organization), okta (tenant), entra (tid), issuer (one tenant per issuer)",
  },
  oauthAdminClaim: {
    kind: "string",
    env: "WEBCODEX_OAUTH_ADMIN_CLAIM",
    doc: "Claim (dotted path) with roles/groups; default from the tenant preset (groups, or roles for entra)",
  },
  oauthAdminValues: {
    kind: "string",
    env: "WEBCODEX_OAUTH_ADMIN_VALUES",
    default: "",
    doc: "Comma-separated admin-claim values that make a caller a tenant admin; empty: nobody is",
  },
  oauthAdmissionClaim: { kind: "string", env: "WEBCODEX_OAUTH_ADMISSION_CLAIM", doc: "Claim whose value read_only admits a caller read-only" },
  oauthHostProfileClaim: {
    kind: "string",
    env: "WEBCODEX_OAUTH_HOST_PROFILE_CLAIM",
    doc: "Claim naming the caller's Host profile (generic or app); other values are refused",
  },
  oauthClockToleranceS: { kind: "int", env: "WEBCODEX_OAUTH_CLOCK_TOLERANCE_S", default: 30, min: 0, max: 300 },
  readOnlyClients: { kind: "string", env: "WEBCODEX_READ_ONLY_CLIENTS", default: "", doc: "Comma-separated tenants admitted read-only" },
  // Rate limits on tools/call: a token bucket per principal (tenant, subject) and one per tenant.
  rateLimitPerMinute: {
    kind: "int",
    env: "WEBCODEX_RATE_LIMIT_PER_MINUTE",
    default: 600,
    min: 0,
    doc: "Calls per minute per principal (tenant, subject); 0 = none",
  },
  rateLimitBurst: { kind: "int", env: "WEBCODEX_RATE_LIMIT_BURST", default: 0, min: 0, doc: "Bucket size; 0 = the per-minute rate" },
  rateLimitTenantPerMinute: {
    kind: "int",
    env: "WEBCODEX_RATE_LIMIT_TENANT_PER_MINUTE",
    default: 0,
    min: 0,
    doc: "Ceiling per tenant, all its principals together; 0 = none",
  },
  rateLimits: { kind: "string", env: "WEBCODEX_RATE_LIMITS", default: "", doc: "Per-tenant ceilings overriding the tenant default: client=per_minute,..." },
  // Fails at startup on any other value; a token may name its own (dev tokens file, OAuth claim).
  hostProfile: { kind: "enum", env: "WEBCODEX_HOST_PROFILE", values: HOST_PROFILES, default: "generic" },
  // ModelWorkflowPolicy: deployment facts; they never change tool names, schemas or ranks.
  goalSelection: {
    kind: "enum",
    env: "WEBCODEX_GOAL_SELECTION",
    values: GOAL_SELECTIONS,
    default: "on_demand",
    doc: "Goal plans: on_demand (default) or recommended",
  },
  unattendedContinuation: {
    kind: "enum",
    env: "WEBCODEX_UNATTENDED_CONTINUATION",
    values: UNATTENDED_CONTINUATIONS,
    default: "unknown",
    doc: "What an operator validated about the Host resuming a turn without the user: unknown (default), requires_confirmation, validated",
  },
  mcpSessionKey: {
    kind: "string",
    env: "WEBCODEX_MCP_SESSION_KEY",
    doc: "Key signing Mcp-Session-Id (shared by gateway replicas); default: random per process",
  },
  auditSpoolDir: {
    kind: "string",
    env: "WEBCODEX_AUDIT_SPOOL_DIR",
    doc: "Durable spool for audit records the audit service cannot take now; without it an effectful call's record waits in memory only",
  },
  skillCatalogsDir: {
    kind: "string",
    env: "WEBCODEX_SKILL_CATALOGS_DIR",
    doc: "Directory with one Agent Skills catalog per tenant (<dir>/<tenant>/<skill>/SKILL.md), read-only; unset: no tenant catalogs",
  },
  readyProjects: {
    kind: "string",
    env: "WEBCODEX_READY_PROJECTS",
    default: "",
    doc: "Comma-separated canonical project ids whose Runner must be routable before /readyz is ready",
  },
  mcpUpstreams: {
    kind: "string",
    env: "WEBCODEX_MCP_UPSTREAMS",
    doc: 'Upstream MCP servers as JSON {"upstreams": [...]} (the Helm chart renders gateway.mcpUpstreams here); see docs/mcp-gateway.md',
  },
  mcpUpstreamsFile: {
    kind: "string",
    env: "WEBCODEX_MCP_UPSTREAMS_FILE",
    doc: "JSON file of upstream MCP servers (namespaces mcp:<server>, mcp_tool); see docs/mcp-gateway.md",
  },
  mcpOAuthKey: {
    kind: "string",
    env: "WEBCODEX_MCP_OAUTH_KEY",
    doc: "Secret (at least 32 characters) the per-user tokens of auth.mode oauth upstreams are encrypted with; required when one is configured",
  },
  mcpOAuthRedisUrl: {
    kind: "string",
    env: "WEBCODEX_MCP_OAUTH_REDIS_URL",
    doc: "Redis the gateway replicas share per-user upstream tokens and pending authorizations in; unset: this process's memory (one replica, lost on restart)",
  },
  logLevel: { kind: "enum", env: "WEBCODEX_LOG_LEVEL", values: ["debug", "info", "warn", "error", "silent"], default: "info" },
  /** Serve grpc.reflection.v1.ServerReflection on the service port (grpcurl); off by default. */
  grpcReflection: { kind: "bool", env: "WEBCODEX_GRPC_REFLECTION", default: false },
  /** Port of /metrics and /dependencies apart from the service port (which an Ingress may expose); unset: both on the service port. */
  metricsPort: { kind: "int", env: "WEBCODEX_METRICS_PORT", min: 0, max: 65535, optional: true },
  /** What /readyz follows: its dependencies, or this process only (`process`; the dependency report is then /dependencies). */
  readiness: { kind: "enum", env: "WEBCODEX_READINESS", values: ["dependencies", "process"], default: "dependencies" },
  /** How long shutdown lets calls in flight finish, in ms, before their connections are cut. */
  shutdownDrainMs: { kind: "int", env: "WEBCODEX_SHUTDOWN_DRAIN_MS", default: 2_000, min: 0 },
} as const;

export const loadConfig = (env: Env) => {
  const config = readConfig(gatewayConfigSpec, env);
  // readConfig has checked the value against HOST_PROFILES.
  // readConfig has checked both values against their vocabularies.
  const workflowPolicy: ModelWorkflowPolicy = modelWorkflowPolicyFrom(config.goalSelection, config.unattendedContinuation);
  const skillCatalogsDir = skillCatalogsDirFrom(config.skillCatalogsDir);
  return {
    ...config,
    hostProfile: config.hostProfile as HostProfile,
    oauthTenantPreset: config.oauthTenantPreset as TenantPreset,
    workflowPolicy,
    skillCatalogsDir,
  };
};
export type GatewayConfig = ReturnType<typeof loadConfig>;
