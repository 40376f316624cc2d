/**
 * Per-user OAuth to upstream MCP servers (`auth.mode: oauth`): the authorization code flow with
 * PKCE, run once per principal and server. The gateway builds the authorization URL (the Host
 * opens it for the user), takes the code at its callback, and keeps the principal's tokens
 * encrypted (AES-256-GCM, the principal and server as associated data, so a record cannot be
 * moved to another principal) in a store shared by the gateway replicas (Redis) or, without
 * one, in memory. An expiring access token is refreshed; a refresh the authorization server
 * refuses, or an upstream that answers 401, drops the record: the next call asks for
 * authorization again. A principal revokes its own authorization with
 * `POST /mcp-upstream/oauth/revoke?server=<id>`.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import { createRedis } from "@webcodex/platform";
import type { HttpHandler, Logger, NodeRequest, NodeResponse, Principal, Redis } from "@webcodex/platform";
import type { UpstreamOAuth, UpstreamServer } from "./config.js";

export const CALLBACK_PATH = "/mcp-upstream/oauth/callback";
export const REVOKE_PATH = "/mcp-upstream/oauth/revoke";
const STATE_TTL_MS = 10 * 60_000;
/** Refresh this long before the access token's stated expiry. */
const REFRESH_MARGIN_MS = 30_000;

/** Where encrypted records live: shared by the gateway replicas (Redis) or this process's memory. */
export interface SecretStore {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlMs?: number): Promise<void>;
  /** Reads and deletes in one step (an authorization state is used once). */
  take(key: string): Promise<string | undefined>;
  delete(key: string): Promise<void>;
}

export function memorySecretStore(): SecretStore {
  const map = new Map<string, { value: string; until: number }>();
  const live = (key: string) => {
    const e = map.get(key);
    if (e && e.until < Date.now()) map.delete(key);
    return map.get(key)?.value;
  };
  return {
    get: async (key) => live(key),
    set: async (key, value, ttlMs) => {
      map.set(key, { value, until: ttlMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + ttlMs });
    },
    take: async (key) => {
      const v = live(key);
      map.delete(key);
      return v;
    },
    delete: async (key) => {
      map.delete(key);
    },
  };
}

export function redisSecretStore(redis: Redis): SecretStore {
  return {
    get: async (key) => (await redis.get(key)) ?? undefined,
    set: async (key, value, ttlMs) => {
      if (ttlMs === undefined) await redis.set(key, value);
      else await redis.set(key, value, "PX", ttlMs);
    },
    take: async (key) => (await redis.getdel(key)) ?? undefined,
    delete: async (key) => {
      await redis.del(key);
    },
  };
}

interface TokenRecord {
  access_token: string;
  refresh_token?: string;
  /** Epoch ms; absent: the server stated none. */
  expires_at?: number;
}

interface PendingAuthorization {
  server: string;
  client_id: string;
  subject: string;
  verifier: string;
}

interface AuthServerMetadata {
  authorization_endpoint: string;
  token_endpoint: string;
  revocation_endpoint?: string;
}

/** What the gateway can send for this principal now: a token, or the URL the user must open first. */
export type UpstreamCredential = { token: string } | { authorizationUrl: string };

export interface UpstreamOAuthDeps {
  /** Key material (WEBCODEX_MCP_OAUTH_KEY, at least 32 characters); the record key is derived from it. */
  key: string;
  /** The gateway's public URL; the redirect URI is `<publicUrl>/mcp-upstream/oauth/callback`. */
  publicUrl: string;
  store: SecretStore;
  logger: Logger;
  fetch?: typeof fetch;
}

export function createUpstreamOAuth(deps: UpstreamOAuthDeps) {
  if (deps.key.length < 32) throw new Error("WEBCODEX_MCP_OAUTH_KEY must be at least 32 characters (it encrypts upstream tokens)");
  const aesKey = Buffer.from(hkdfSync("sha256", deps.key, "webcodex", "mcp upstream oauth records v1", 32));
  const redirectUri = `${deps.publicUrl}${CALLBACK_PATH}`;
  const http = deps.fetch ?? fetch;
  const metadata = new Map<string, Promise<AuthServerMetadata>>();

  const seal = (plain: string, aad: string): string => {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", aesKey, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
  };
  const open = (sealed: string, aad: string): string | undefined => {
    try {
      const raw = Buffer.from(sealed, "base64url");
      const decipher = createDecipheriv("aes-256-gcm", aesKey, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(aad));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
    } catch {
      return undefined;
    }
  };

  const principalAad = (server: string, p: Principal) => `token\0${server}\0${p.clientId}\0${p.subject}`;
  const tokenKey = (server: string, p: Principal) =>
    `mcp-oauth:token:${server}:${createHash("sha256").update(`${p.clientId}\0${p.subject}`).digest("hex").slice(0, 40)}`;

  async function endpoints(auth: UpstreamOAuth): Promise<AuthServerMetadata> {
    if (auth.authorizationEndpoint && auth.tokenEndpoint)
      return {
        authorization_endpoint: auth.authorizationEndpoint,
        token_endpoint: auth.tokenEndpoint,
        ...(auth.revocationEndpoint ? { revocation_endpoint: auth.revocationEndpoint } : {}),
      };
    let pending = metadata.get(auth.issuer);
    if (!pending) {
      pending = (async () => {
        for (const path of ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]) {
          const res = await http(`${auth.issuer}${path}`, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
          if (!res?.ok) continue;
          const doc = (await res.json()) as Partial<AuthServerMetadata>;
          if (typeof doc.authorization_endpoint === "string" && typeof doc.token_endpoint === "string")
            return {
              authorization_endpoint: auth.authorizationEndpoint ?? doc.authorization_endpoint,
              token_endpoint: auth.tokenEndpoint ?? doc.token_endpoint,
              ...((auth.revocationEndpoint ?? doc.revocation_endpoint) ? { revocation_endpoint: auth.revocationEndpoint ?? doc.revocation_endpoint } : {}),
            };
        }
        throw new Error(`no authorization server metadata at ${auth.issuer}`);
      })();
      metadata.set(auth.issuer, pending);
      pending.catch(() => metadata.delete(auth.issuer));
    }
    return pending;
  }

  /** A token endpoint request with the gateway's client authentication. */
  async function tokenRequest(auth: UpstreamOAuth, endpoint: string, body: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> {
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
    const form = new URLSearchParams(body);
    if (auth.clientSecret !== undefined)
      headers["authorization"] = `Basic ${Buffer.from(`${encodeURIComponent(auth.clientId)}:${encodeURIComponent(auth.clientSecret)}`).toString("base64")}`;
    else form.set("client_id", auth.clientId);
    const res = await http(endpoint, { method: "POST", headers, body: form, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      json = {};
    }
    return { status: res.status, json };
  }

  function record(json: Record<string, unknown>, previousRefresh?: string): TokenRecord | undefined {
    const access = json["access_token"];
    if (typeof access !== "string" || access === "") return undefined;
    const refresh = typeof json["refresh_token"] === "string" ? json["refresh_token"] : previousRefresh;
    const expiresIn = json["expires_in"];
    return {
      access_token: access,
      ...(refresh ? { refresh_token: refresh } : {}),
      ...(typeof expiresIn === "number" && expiresIn > 0 ? { expires_at: Date.now() + expiresIn * 1000 } : {}),
    };
  }

  async function load(server: UpstreamServer, p: Principal): Promise<TokenRecord | undefined> {
    const sealed = await deps.store.get(tokenKey(server.id, p));
    const plain = sealed === undefined ? undefined : open(sealed, principalAad(server.id, p));
    return plain === undefined ? undefined : (JSON.parse(plain) as TokenRecord);
  }

  const save = (server: UpstreamServer, p: Principal, r: TokenRecord) =>
    deps.store.set(tokenKey(server.id, p), seal(JSON.stringify(r), principalAad(server.id, p)));

  /** A fresh authorization URL for this principal and server (its state is good for 10 minutes, once). */
  async function authorizationUrl(server: UpstreamServer, p: Principal): Promise<string> {
    const auth = server.auth as UpstreamOAuth;
    const meta = await endpoints(auth);
    const state = randomBytes(24).toString("base64url");
    const verifier = randomBytes(32).toString("base64url");
    const pending: PendingAuthorization = { server: server.id, client_id: p.clientId, subject: p.subject, verifier };
    await deps.store.set(`mcp-oauth:state:${state}`, seal(JSON.stringify(pending), `state\0${state}`), STATE_TTL_MS);
    const url = new URL(meta.authorization_endpoint);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("client_id", auth.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    if (auth.scopes.length > 0) url.searchParams.set("scope", auth.scopes.join(" "));
    if (auth.resource) url.searchParams.set("resource", auth.resource);
    url.searchParams.set("state", state);
    url.searchParams.set("code_challenge", createHash("sha256").update(verifier).digest("base64url"));
    url.searchParams.set("code_challenge_method", "S256");
    return url.toString();
  }

  async function refresh(server: UpstreamServer, p: Principal, r: TokenRecord): Promise<TokenRecord | undefined> {
    if (!r.refresh_token) return undefined;
    const auth = server.auth as UpstreamOAuth;
    try {
      const meta = await endpoints(auth);
      const { status, json } = await tokenRequest(auth, meta.token_endpoint, {
        grant_type: "refresh_token",
        refresh_token: r.refresh_token,
        ...(auth.resource ? { resource: auth.resource } : {}),
      });
      const next = status === 200 ? record(json, r.refresh_token) : undefined;
      if (!next) {
        deps.logger.info("mcp upstream token refresh refused", { server: server.id, client_id: p.clientId, status, error: String(json["error"] ?? "") });
        return undefined;
      }
      await save(server, p, next);
      return next;
    } catch (error) {
      deps.logger.warn("mcp upstream token refresh failed", { server: server.id, error: error instanceof Error ? error.message : String(error) });
      return undefined;
    }
  }

  /** The principal's access token for `server` (refreshed when about to expire), or the URL to authorize at. */
  async function credential(server: UpstreamServer, p: Principal): Promise<UpstreamCredential> {
    let r = await load(server, p);
    if (r?.expires_at !== undefined && r.expires_at - REFRESH_MARGIN_MS < Date.now()) {
      r = await refresh(server, p, r);
      if (!r) await deps.store.delete(tokenKey(server.id, p));
    }
    return r ? { token: r.access_token } : { authorizationUrl: await authorizationUrl(server, p) };
  }

  /**
   * The upstream refused `rejected` (HTTP 401/403): refresh once if the record still holds that
   * token; otherwise drop the record, so the caller is asked to authorize again.
   */
  async function rejected(server: UpstreamServer, p: Principal, rejectedToken: string): Promise<UpstreamCredential> {
    const r = await load(server, p);
    if (r && r.access_token !== rejectedToken) return { token: r.access_token };
    const next = r ? await refresh(server, p, r) : undefined;
    if (next && next.access_token !== rejectedToken) return { token: next.access_token };
    await deps.store.delete(tokenKey(server.id, p));
    return { authorizationUrl: await authorizationUrl(server, p) };
  }

  /** Forgets the principal's tokens for `server` and asks the authorization server to revoke them. */
  async function revoke(server: UpstreamServer, p: Principal): Promise<boolean> {
    const r = await load(server, p);
    await deps.store.delete(tokenKey(server.id, p));
    if (!r) return false;
    const auth = server.auth as UpstreamOAuth;
    const meta = await endpoints(auth).catch(() => undefined);
    if (meta?.revocation_endpoint)
      for (const [token, hint] of [
        [r.refresh_token, "refresh_token"],
        [r.access_token, "access_token"],
      ] as const)
        if (token)
          await tokenRequest(auth, meta.revocation_endpoint, { token, token_type_hint: hint }).catch((error: unknown) =>
            deps.logger.warn("mcp upstream token revocation failed", { server: server.id, error: error instanceof Error ? error.message : String(error) }),
          );
    return true;
  }

  const page = (res: NodeResponse, status: number, text: string) => {
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
    res.end(`${text}\n`);
  };

  /** GET /mcp-upstream/oauth/callback?code&state: where the authorization server sends the user back. */
  function callbackHandler(servers: ReadonlyMap<string, UpstreamServer>): HttpHandler {
    return async (req: NodeRequest, res: NodeResponse) => {
      if (req.method !== "GET") return page(res, 405, "method not allowed");
      const url = new URL(req.url ?? "/", "http://callback");
      const state = url.searchParams.get("state") ?? "";
      const sealed = /^[A-Za-z0-9_-]{16,64}$/.test(state) ? await deps.store.take(`mcp-oauth:state:${state}`) : undefined;
      const plain = sealed === undefined ? undefined : open(sealed, `state\0${state}`);
      if (plain === undefined)
        return page(res, 400, "This authorization link is unknown, used or expired. Ask your assistant to try the call again for a new one.");
      const pending = JSON.parse(plain) as PendingAuthorization;
      const server = servers.get(pending.server);
      if (!server || server.auth.mode !== "oauth") return page(res, 400, "This upstream server is no longer configured.");
      const code = url.searchParams.get("code");
      if (!code) return page(res, 400, `The authorization server did not authorize access (${(url.searchParams.get("error") ?? "no code").slice(0, 100)}).`);
      const principal = { clientId: pending.client_id, subject: pending.subject } as Principal;
      try {
        const meta = await endpoints(server.auth);
        const { status, json } = await tokenRequest(server.auth, meta.token_endpoint, {
          grant_type: "authorization_code",
          code,
          redirect_uri: redirectUri,
          code_verifier: pending.verifier,
          ...(server.auth.resource ? { resource: server.auth.resource } : {}),
        });
        const r = status === 200 ? record(json) : undefined;
        if (!r) {
          deps.logger.info("mcp upstream authorization code refused", { server: server.id, status, error: String(json["error"] ?? "") });
          return page(res, 400, "The authorization server refused the authorization code. Ask your assistant to try the call again.");
        }
        await save(server, principal, r);
        deps.logger.info("mcp upstream authorized", { server: server.id, client_id: principal.clientId });
        return page(res, 200, `WebCodex may now call ${server.id} for you. You can close this page and return to your assistant.`);
      } catch (error) {
        deps.logger.warn("mcp upstream authorization failed", { server: server.id, error: error instanceof Error ? error.message : String(error) });
        return page(res, 502, "The authorization server could not be reached. Ask your assistant to try the call again.");
      }
    };
  }

  return { credential, rejected, revoke, callbackHandler, authorizationUrl };
}

export type UpstreamOAuthClient = ReturnType<typeof createUpstreamOAuth>;

/**
 * The per-user OAuth client when a configured upstream uses `auth.mode: oauth` (none
 * otherwise); such a server without WEBCODEX_MCP_OAUTH_KEY stops the gateway at start-up.
 */
export function upstreamOAuthFor(o: {
  upstreams: readonly UpstreamServer[];
  publicUrl: string;
  logger: Logger;
  settings?: { key: string; redisUrl?: string };
}): { client: UpstreamOAuthClient; redis?: Redis } | undefined {
  const oauthServers = o.upstreams.filter((s) => s.auth.mode === "oauth").map((s) => s.id);
  if (oauthServers.length === 0) return undefined;
  if (!o.settings)
    throw new Error(`upstream ${oauthServers.join(", ")} uses auth.mode oauth: set WEBCODEX_MCP_OAUTH_KEY (the key its per-user tokens are encrypted with)`);
  const redis = o.settings.redisUrl ? createRedis(o.settings.redisUrl, { keyPrefix: "webcodex:" }) : undefined;
  if (!redis) o.logger.warn("per-user upstream tokens are kept in this process's memory (no WEBCODEX_MCP_OAUTH_REDIS_URL): one replica only, lost on restart");
  const client = createUpstreamOAuth({
    key: o.settings.key,
    publicUrl: o.publicUrl,
    store: redis ? redisSecretStore(redis) : memorySecretStore(),
    logger: o.logger,
  });
  return { client, ...(redis ? { redis } : {}) };
}
