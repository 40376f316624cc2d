/**
 * RFC 9728 protected resource metadata and RFC 6750 bearer challenges: how a Host learns
 * which authorization server to use, for which resource and with which scopes.
 */
import type { HttpHandler } from "@webcodex/platform";
import { sendJson } from "@webcodex/platform";

export interface ProtectedResourceMetadataOptions {
  /** The resource identifier: the MCP endpoint URL, also the expected token audience. */
  resource: string;
  authorizationServers: readonly string[];
  scopesSupported: readonly string[];
  resourceName?: string;
  resourceDocumentation?: string;
}

export function protectedResourceMetadata(options: ProtectedResourceMetadataOptions): Record<string, unknown> {
  return {
    resource: options.resource,
    ...(options.authorizationServers.length > 0 ? { authorization_servers: [...options.authorizationServers] } : {}),
    scopes_supported: [...options.scopesSupported],
    bearer_methods_supported: ["header"],
    ...(options.resourceName ? { resource_name: options.resourceName } : {}),
    ...(options.resourceDocumentation ? { resource_documentation: options.resourceDocumentation } : {}),
  };
}

/**
 * Serves the metadata document. It is public and read by browser-based clients too, so it
 * allows any origin (it carries no credentials and no tenant data).
 */
export function createResourceMetadataHandler(options: ProtectedResourceMetadataOptions): HttpHandler {
  const body = protectedResourceMetadata(options);
  const cors = { "access-control-allow-origin": "*", "access-control-allow-methods": "GET, OPTIONS", "access-control-allow-headers": "mcp-protocol-version" };
  return (req, res) => {
    if (req.method === "OPTIONS") {
      res.writeHead(204, cors);
      return void res.end();
    }
    if (req.method !== "GET" && req.method !== "HEAD") return sendJson(res, 405, { error: "method_not_allowed" }, { allow: "GET, OPTIONS", ...cors });
    sendJson(res, 200, body, { "cache-control": "public, max-age=3600", ...cors });
  };
}

const quote = (v: string) => `"${v.replace(/["\\]/g, "\\$&")}"`;

export interface BearerChallenge {
  resourceMetadataUrl: string;
  scope?: readonly string[];
  error?: "invalid_request" | "invalid_token" | "insufficient_scope";
  errorDescription?: string;
}

/**
 * A `WWW-Authenticate: Bearer ...` value (RFC 6750 §3, RFC 9728 §5.1). Parameter order
 * follows the MCP authorization spec's examples: `resource_metadata` first on a 401, `error`
 * first on an `insufficient_scope` 403 (order carries no meaning to a conforming parser).
 */
export function bearerChallenge(c: BearerChallenge): string {
  const params: string[] = [];
  const metadata = `resource_metadata=${quote(c.resourceMetadataUrl)}`;
  if (c.error !== "insufficient_scope") params.push(metadata);
  if (c.error) params.push(`error=${quote(c.error)}`);
  if (c.errorDescription) params.push(`error_description=${quote(c.errorDescription)}`);
  if (c.error === "insufficient_scope") params.push(metadata);
  if (c.scope && c.scope.length > 0) params.push(`scope=${quote(c.scope.join(" "))}`);
  return `Bearer ${params.join(", ")}`;
}
