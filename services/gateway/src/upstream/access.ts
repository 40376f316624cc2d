/**
 * Whose credential a call to an upstream carries. A server without per-user OAuth is reached
 * through its one shared connection (the operator's credential, if any); an OAuth server
 * through a connection per principal that carries that principal's own access token, refreshed
 * once when the upstream refuses it, and asked for again (authorization_url) when there is none.
 * Also the revocation endpoint that forgets a principal's tokens for a server.
 */
import type { HttpHandler, Logger, NodeRequest, NodeResponse } from "@webcodex/platform";
import type { Caller } from "../auth.js";
import type { Outcome } from "../call-context.js";
import type { UpstreamServer } from "./config.js";
import { createUpstreamConnection, UpstreamError } from "./connection.js";
import type { UpstreamConnection } from "./connection.js";
import { authorizationRequired, unavailable } from "./failures.js";
import type { UpstreamCredential, UpstreamOAuthClient } from "./oauth.js";

/** Per-principal connections kept for OAuth servers (the oldest is closed beyond this). */
const MAX_PRINCIPAL_CONNECTIONS = 2000;

export interface UpstreamAccessDeps {
  logger: Logger;
  /** Per-user OAuth (required when a server's auth mode is oauth). */
  oauth?: UpstreamOAuthClient | undefined;
}

/**
 * The credential one model call already used: a call that lists (the bound schema) and then
 * calls reads the principal's token once, not once per request.
 */
export interface CallCredential {
  credential?: UpstreamCredential;
}

export function createUpstreamAccess(deps: UpstreamAccessDeps) {
  /** OAuth servers: one connection per principal, carrying that principal's access token. */
  const principalConnections = new Map<string, { token: string; connection: UpstreamConnection }>();

  const principalKey = (server: UpstreamServer, caller: Caller) => `${server.id}\0${caller.principal.clientId}\0${caller.principal.subject}`;

  /** The connection that carries `token` for this principal (a new token replaces the old connection). */
  function principalConnection(server: UpstreamServer, caller: Caller, token: string): UpstreamConnection {
    const key = principalKey(server, caller);
    const held = principalConnections.get(key);
    if (held?.token === token) return held.connection;
    if (held) void held.connection.close();
    principalConnections.delete(key);
    if (principalConnections.size >= MAX_PRINCIPAL_CONNECTIONS) {
      const [oldest] = principalConnections;
      if (oldest) {
        principalConnections.delete(oldest[0]);
        void oldest[1].connection.close();
      }
    }
    const connection = createUpstreamConnection(server, token);
    principalConnections.set(key, { token, connection });
    return connection;
  }

  function authorizationServerDown(server: UpstreamServer, error: unknown): Outcome {
    deps.logger.warn("mcp upstream authorization server unavailable", { server: server.id, error: error instanceof Error ? error.message : String(error) });
    return unavailable(server, new UpstreamError("unreachable", false, "its authorization server could not be reached"), false);
  }

  /**
   * Runs `use` on the connection this caller reaches `server` through (`shared`: the server's
   * own connection). For an OAuth server: the caller's own token; a credential the upstream
   * refuses (401/403, so nothing ran) is refreshed once and the request made again; without a
   * usable token the caller is asked to authorize (`tool` names the follow-up's target).
   * `held`: the credential an earlier request of the same model call used (and gets the one used).
   */
  async function through<T>(
    server: UpstreamServer,
    shared: UpstreamConnection,
    caller: Caller,
    tool: string | undefined,
    use: (c: UpstreamConnection) => Promise<T>,
    held?: CallCredential,
  ): Promise<T | Outcome> {
    if (server.auth.mode !== "oauth" || !deps.oauth) return use(shared);
    let credential: UpstreamCredential;
    try {
      credential = held?.credential ?? (await deps.oauth.credential(server, caller.principal));
    } catch (error) {
      return authorizationServerDown(server, error);
    }
    for (let attempt = 0; attempt < 2; attempt++) {
      if (!("token" in credential)) return authorizationRequired(server, credential.authorizationUrl, tool);
      try {
        const used = credential;
        const result = await use(principalConnection(server, caller, credential.token));
        if (held) held.credential = used;
        return result;
      } catch (error) {
        if (!(error instanceof UpstreamError) || error.detail !== "unauthorized") throw error;
        try {
          credential = await deps.oauth.rejected(server, caller.principal, credential.token);
        } catch (failure) {
          return authorizationServerDown(server, failure);
        }
      }
    }
    if ("token" in credential) credential = { authorizationUrl: await deps.oauth.authorizationUrl(server, caller.principal) };
    return authorizationRequired(server, credential.authorizationUrl, tool);
  }

  /**
   * POST /mcp-upstream/oauth/revoke?server=<id> (Authorization: Bearer <the caller's WebCodex
   * token>): forgets the caller's tokens for that server and revokes them at its authorization
   * server. `serverFor` finds a server the caller may see.
   */
  function revokeHandler(
    authenticate: (token: string | undefined) => Promise<Caller | undefined>,
    serverFor: (caller: Caller, id: string | undefined) => UpstreamServer | undefined,
  ): HttpHandler {
    const answer = (res: NodeResponse, status: number, body: Record<string, unknown>) => {
      res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify(body));
    };
    return async (req: NodeRequest, res: NodeResponse) => {
      if (req.method !== "POST") return answer(res, 405, { error: "method_not_allowed" });
      const header = req.headers["authorization"];
      const token = typeof header === "string" && /^Bearer /i.test(header) ? header.slice(7).trim() : undefined;
      const caller = await authenticate(token).catch(() => undefined);
      if (!caller) return answer(res, 401, { error: "unauthenticated" });
      const id = new URL(req.url ?? "/", "http://revoke").searchParams.get("server") ?? undefined;
      const server = serverFor(caller, id);
      if (!server || server.auth.mode !== "oauth" || !deps.oauth) return answer(res, 404, { error: "unknown_server" });
      const revoked = await deps.oauth.revoke(server, caller.principal);
      const key = principalKey(server, caller);
      void principalConnections.get(key)?.connection.close();
      principalConnections.delete(key);
      deps.logger.info("mcp upstream authorization revoked", { server: server.id, client_id: caller.principal.clientId, had_tokens: revoked });
      return answer(res, 200, { server: server.id, revoked });
    };
  }

  async function close(): Promise<void> {
    await Promise.all([...principalConnections.values()].map((s) => s.connection.close()));
    principalConnections.clear();
  }

  return { through, revokeHandler, close };
}
