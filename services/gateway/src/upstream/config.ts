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
  | { mode: "static"; env: string; header: string; prefix: string; value: string };

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
  if (mode === "oauth") throw new Error(`${where}.mode oauth (per-user OAuth) is not supported by this build; use none or static`);
  throw new Error(`${where}.mode must be none or static`);
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
    return {
      id,
      url: parsed.toString(),
      tenants,
      subjects: strings(e, "subjects", where),
      auth: parseAuth(e["auth"], `${where}.auth`, env),
      readOnlyTools: strings(e, "read_only_tools", where),
      allowTools,
      denyTools,
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
