/**
 * Upstream MCP servers the operator registers (chart values `mcpGateway.upstreams`, mounted as
 * a JSON file): typed and validated once at start-up, so a bad entry stops the gateway with a
 * message that names the field instead of failing a call later. Credentials are never in the
 * file: a static credential names the environment variable (a Secret) that holds it.
 */
import { readFileSync } from "node:fs";
import { isCanonicalIdPart } from "@webcodex/contracts";
import type { Env } from "@webcodex/platform";

/** How the gateway authenticates to the upstream. */
export type UpstreamAuth =
  | { mode: "none" }
  /** A static credential from an environment variable (a Kubernetes Secret), sent as `header: <prefix><value>`. */
  | { mode: "static"; env: string; header: string; prefix: string; value: string }
  /**
   * Per-user OAuth: each principal authorizes once at the authorization server (a URL the Host
   * opens); the gateway keeps that principal's tokens, encrypted, and sends its own access token.
   */
  | UpstreamOAuth;

export interface UpstreamOAuth {
  mode: "oauth";
  /** Authorization server issuer; its metadata gives the endpoints unless they are set here. */
  issuer: string;
  clientId: string;
  /** Environment variable holding the client secret (empty: a public client, PKCE only). */
  clientSecretEnv?: string;
  clientSecret?: string;
  scopes: readonly string[];
  /** RFC 8707 resource indicator sent with the authorization and token requests. */
  resource?: string;
  authorizationEndpoint?: string;
  tokenEndpoint?: string;
  revocationEndpoint?: string;
}

export interface UpstreamServer {
  /** Namespace `mcp:<id>`. */
  id: string;
  /** Streamable HTTP endpoint. */
  url: string;
  /** Tenants (client ids) whose principals may see and call it. */
  tenants: readonly string[];
  /** Subjects within those tenants; empty: every principal of the tenants. */
  subjects: readonly string[];
  auth: UpstreamAuth;
  /** Tools read-only principals may call (upstream readOnlyHint is advice only). */
  readOnlyTools: readonly string[];
  /** Only these tools (empty: every tool not denied). */
  allowTools: readonly string[];
  denyTools: readonly string[];
  /** Per tenant, further allow/deny lists applied after the server's own (tenant id → lists). */
  tenantTools: Readonly<Record<string, { allowTools: readonly string[]; denyTools: readonly string[] }>>;
  /** Canonical project id (`agent:<tenant>:<project>`) a project-bound server serves. */
  project?: string;
  /** Longest a call may take before it is answered `outcome_unknown` (ms). */
  timeoutMs: number;
  /** Calls in flight at once to this upstream; more wait up to `queueTimeoutMs`, then are refused. */
  maxConcurrency: number;
  queueTimeoutMs: number;
  /** Calls per minute to this upstream, all callers together; 0: no limit. */
  ratePerMinute: number;
  /** Largest upstream result handed on (bytes of its content); longer results are cut and say so. */
  maxResultBytes: number;
  /** How long a fetched tool list is reused before it is fetched again (ms). */
  catalogTtlMs: number;
}

const ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const KNOWN = new Set([
  "id",
  "url",
  "tenants",
  "subjects",
  "auth",
  "read_only_tools",
  "allow_tools",
  "deny_tools",
  "tenant_tools",
  "project",
  "timeout_ms",
  "max_concurrency",
  "queue_timeout_ms",
  "rate_limit_per_minute",
  "max_result_bytes",
  "catalog_ttl_ms",
]);

function strings(entry: Record<string, unknown>, key: string, where: string, required = false): string[] {
  const v = entry[key];
  if (v === undefined && !required) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || x === "")) throw new Error(`${where}.${key} must be an array of non-empty strings`);
  if (required && v.length === 0) throw new Error(`${where}.${key} must name at least one`);
  return v as string[];
}

function integer(entry: Record<string, unknown>, key: string, where: string, fallback: number, min: number, max: number): number {
  const v = entry[key];
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) throw new Error(`${where}.${key} must be an integer from ${min} to ${max}`);
  return v;
}

function parseAuth(raw: unknown, where: string, env: Env): UpstreamAuth {
  if (raw === undefined) return { mode: "none" };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${where} must be an object`);
  const a = raw as Record<string, unknown>;
  const mode = a["mode"];
  if (mode === "none") return { mode: "none" };
  if (mode === "static") {
    const name = a["env"];
    if (typeof name !== "string" || !/^[A-Z_][A-Z0-9_]*$/.test(name)) throw new Error(`${where}.env must name an environment variable (A-Z, 0-9, _)`);
    const value = env[name];
    if (value === undefined || value === "") throw new Error(`${where}.env: ${name} is not set (mount the Secret that holds the credential)`);
    const header = a["header"] ?? "Authorization";
    if (typeof header !== "string" || !/^[A-Za-z0-9-]+$/.test(header)) throw new Error(`${where}.header must be an HTTP header name`);
    const prefix = a["prefix"] ?? (header.toLowerCase() === "authorization" ? "Bearer " : "");
    if (typeof prefix !== "string") throw new Error(`${where}.prefix must be a string`);
    return { mode: "static", env: name, header, prefix, value };
  }
  if (mode === "oauth") return parseOAuth(a, where, env);
  throw new Error(`${where}.mode must be none, static or oauth`);
}

const OAUTH_KNOWN = new Set([
  "mode",
  "issuer",
  "client_id",
  "client_secret_env",
  "scopes",
  "resource",
  "authorization_endpoint",
  "token_endpoint",
  "revocation_endpoint",
]);

function httpUrl(value: unknown, where: string): string {
  let parsed: URL | undefined;
  try {
    parsed = typeof value === "string" ? new URL(value) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) throw new Error(`${where} must be an http(s) URL`);
  return typeof value === "string" ? value.replace(/\/+$/, "") : "";
}

function parseOAuth(a: Record<string, unknown>, where: string, env: Env): UpstreamOAuth {
  for (const key of Object.keys(a)) if (!OAUTH_KNOWN.has(key)) throw new Error(`${where}.${key} is not a known setting`);
  const clientId = a["client_id"];
  if (typeof clientId !== "string" || clientId === "") throw new Error(`${where}.client_id must name the OAuth client the gateway is registered as`);
  const out: UpstreamOAuth = { mode: "oauth", issuer: httpUrl(a["issuer"], `${where}.issuer`), clientId, scopes: [] };
  const secretEnv = a["client_secret_env"];
  if (secretEnv !== undefined) {
    if (typeof secretEnv !== "string" || !/^[A-Z_][A-Z0-9_]*$/.test(secretEnv))
      throw new Error(`${where}.client_secret_env must name an environment variable (A-Z, 0-9, _)`);
    const secret = env[secretEnv];
    if (secret === undefined || secret === "")
      throw new Error(`${where}.client_secret_env: ${secretEnv} is not set (mount the Secret that holds the client secret)`);
    out.clientSecretEnv = secretEnv;
    out.clientSecret = secret;
  }
  const scopes = a["scopes"];
  if (scopes !== undefined) {
    if (!Array.isArray(scopes) || scopes.some((x) => typeof x !== "string" || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(x)))
      throw new Error(`${where}.scopes must be an array of scope names`);
    out.scopes = scopes as string[];
  }
  if (a["resource"] !== undefined) out.resource = httpUrl(a["resource"], `${where}.resource`);
  if (a["authorization_endpoint"] !== undefined) out.authorizationEndpoint = httpUrl(a["authorization_endpoint"], `${where}.authorization_endpoint`);
  if (a["token_endpoint"] !== undefined) out.tokenEndpoint = httpUrl(a["token_endpoint"], `${where}.token_endpoint`);
  if (a["revocation_endpoint"] !== undefined) out.revocationEndpoint = httpUrl(a["revocation_endpoint"], `${where}.revocation_endpoint`);
  return out;
}

/** Parses and validates the upstream list (the JSON document `{"upstreams": [...]}`). */
export function parseUpstreams(text: string, env: Env): UpstreamServer[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error("MCP upstreams: not valid JSON");
  }
  const list = (doc as { upstreams?: unknown } | null)?.upstreams;
  if (!Array.isArray(list)) throw new Error('MCP upstreams: expected {"upstreams": [...]}');
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const where = `upstreams[${i}]`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${where} must be an object`);
    const e = raw as Record<string, unknown>;
    for (const key of Object.keys(e)) if (!KNOWN.has(key)) throw new Error(`${where}.${key} is not a known setting`);
    const id = e["id"];
    if (typeof id !== "string" || !ID.test(id)) throw new Error(`${where}.id must match ${ID.source}`);
    if (seen.has(id)) throw new Error(`${where}.id ${id} is used twice`);
    seen.add(id);
    const url = e["url"];
    let parsed: URL | undefined;
    try {
      parsed = typeof url === "string" ? new URL(url) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) throw new Error(`${where}.url must be an http(s) URL`);
    const tenants = strings(e, "tenants", where, true);
    for (const t of tenants) if (!isCanonicalIdPart(t)) throw new Error(`${where}.tenants: ${t} is not a tenant id`);
    const project = e["project"];
    if (project !== undefined && (typeof project !== "string" || !/^agent:[^:]+:[^:]+$/.test(project)))
      throw new Error(`${where}.project must be a canonical project id agent:<tenant>:<project>`);
    if (typeof project === "string" && !tenants.includes(project.split(":")[1] as string))
      throw new Error(`${where}.project must belong to one of the server's tenants`);
    const allowTools = strings(e, "allow_tools", where);
    const denyTools = strings(e, "deny_tools", where);
    const tenantTools: Record<string, { allowTools: string[]; denyTools: string[] }> = {};
    const perTenant = e["tenant_tools"];
    if (perTenant !== undefined) {
      if (typeof perTenant !== "object" || perTenant === null || Array.isArray(perTenant))
        throw new Error(`${where}.tenant_tools must be an object keyed by tenant`);
      for (const [tenant, lists] of Object.entries(perTenant as Record<string, unknown>)) {
        const at = `${where}.tenant_tools.${tenant}`;
        if (!tenants.includes(tenant)) throw new Error(`${at}: ${tenant} is not one of the server's tenants`);
        if (typeof lists !== "object" || lists === null || Array.isArray(lists)) throw new Error(`${at} must be an object`);
        const l = lists as Record<string, unknown>;
        for (const key of Object.keys(l)) if (key !== "allow_tools" && key !== "deny_tools") throw new Error(`${at}.${key} is not a known setting`);
        tenantTools[tenant] = { allowTools: strings(l, "allow_tools", at), denyTools: strings(l, "deny_tools", at) };
      }
    }
    return {
      id,
      url: parsed.toString(),
      tenants,
      subjects: strings(e, "subjects", where),
      auth: parseAuth(e["auth"], `${where}.auth`, env),
      readOnlyTools: strings(e, "read_only_tools", where),
      allowTools,
      denyTools,
      tenantTools,
      ...(typeof project === "string" ? { project } : {}),
      timeoutMs: integer(e, "timeout_ms", where, 30_000, 100, 600_000),
      maxConcurrency: integer(e, "max_concurrency", where, 8, 1, 256),
      queueTimeoutMs: integer(e, "queue_timeout_ms", where, 5_000, 0, 60_000),
      ratePerMinute: integer(e, "rate_limit_per_minute", where, 0, 0, 1_000_000),
      maxResultBytes: integer(e, "max_result_bytes", where, 256 * 1024, 1024, 16 * 1024 * 1024),
      catalogTtlMs: integer(e, "catalog_ttl_ms", where, 30_000, 0, 3_600_000),
    };
  });
}

/**
 * The configured upstreams: WEBCODEX_MCP_UPSTREAMS (inline JSON, as the chart renders it) or the
 * file WEBCODEX_MCP_UPSTREAMS_FILE names, never both; none when neither is set. Static
 * credentials are read from `env`.
 */
export function configuredUpstreams(inline: string | undefined, file: string | undefined, env: Env): UpstreamServer[] {
  const hasInline = inline !== undefined && inline !== "";
  const hasFile = file !== undefined && file !== "";
  if (hasInline && hasFile) throw new Error("set WEBCODEX_MCP_UPSTREAMS or WEBCODEX_MCP_UPSTREAMS_FILE, not both");
  if (hasInline) return parseUpstreams(inline, env);
  if (hasFile) return parseUpstreams(readFileSync(file, "utf8"), env);
  return [];
}
