/**
 * The authorization server an OAuth-protected upstream MCP server trusts, for the MCP gateway's
 * per-user OAuth tests: oidc-provider in-process on 127.0.0.1 with the authorization code flow
 * (PKCE), refresh tokens, opaque access tokens the upstream checks by introspection (so a
 * revoked token stops working at once), and revocation. Its development login form accepts any
 * login. `authorizeAs` plays the user's browser: it opens the URL the gateway handed out, signs
 * in, consents and follows the redirect to the gateway's callback.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";

export const GATEWAY_CLIENT = { id: "webcodex-gateway", secret: "gateway-secret-for-tests-only-0123456789" };
export const UPSTREAM_RS = { id: "tickets-rs", secret: "resource-server-secret-for-tests-0123456789" };

export interface UpstreamIdp {
  issuer: string;
  /** Configures the provider (the gateway's callback is known once the stack runs). */
  configure(redirectUri: string): void;
  /** Opens `authorizationUrl` as `login`'s browser; returns the gateway callback's status and page. */
  authorizeAs(authorizationUrl: string, login: string): Promise<{ status: number; text: string }>;
  /** Tokens issued so far, newest last (opaque values). */
  issued(): { access: string[]; refresh: string[] };
  /** Drops one access token at the authorization server (as expiry would), leaving its grant and refresh token. */
  dropAccessToken(token: string): Promise<void>;
  /** Revokes a token at the revocation endpoint, as the gateway's client (this revokes its whole grant). */
  revoke(token: string, hint: "access_token" | "refresh_token"): Promise<void>;
  /** Token endpoint requests by grant type. */
  grants(): Record<string, number>;
  close(): Promise<void>;
}

export async function startUpstreamIdp(): Promise<UpstreamIdp> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const access: string[] = [];
  const refresh: string[] = [];
  const grants: Record<string, number> = {};
  let redirect = "";
  let live: Provider | undefined;

  function configure(redirectUri: string): void {
    redirect = redirectUri;
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: GATEWAY_CLIENT.id,
          client_secret: GATEWAY_CLIENT.secret,
          grant_types: ["authorization_code", "refresh_token"],
          redirect_uris: [redirectUri],
          response_types: ["code"],
          scope: "openid tickets",
        },
        { client_id: UPSTREAM_RS.id, client_secret: UPSTREAM_RS.secret, grant_types: [], redirect_uris: [], response_types: [] },
      ],
      scopes: ["openid", "tickets"],
      pkce: { required: () => true },
      issueRefreshToken: async () => true,
      // Refresh tokens outlive the browser session (as with offline_access).
      expiresWithSession: async () => false,
      ttl: { AccessToken: 600, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
      features: {
        devInteractions: { enabled: true },
        introspection: { enabled: true, allowedPolicy: async () => true },
        revocation: { enabled: true },
        resourceIndicators: { enabled: false },
      },
    });
    (provider as unknown as NodeJS.EventEmitter).on("grant.error", (_ctx: unknown, err: { error_detail?: string; message: string }) =>
      process.stderr.write(`idp grant.error: ${err.message} ${err.error_detail ?? ""}\n`),
    );
    provider.on("access_token.saved", (t: { jti: string }) => access.push(t.jti));
    provider.on("refresh_token.saved", (t: { jti: string }) => refresh.push(t.jti));
    // "grant.success" (a token endpoint grant) is emitted but missing from the typings.
    (provider as unknown as NodeJS.EventEmitter).on("grant.success", (ctx: { oidc: { params?: { grant_type?: string } } }) => {
      const type = ctx.oidc.params?.grant_type ?? "unknown";
      grants[type] = (grants[type] ?? 0) + 1;
    });
    server.on("request", provider.callback());
    live = provider;
  }

  async function authorizeAs(authorizationUrl: string, login: string): Promise<{ status: number; text: string }> {
    const jar = new Map<string, string>();
    const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const go = async (url: string, init: RequestInit = {}): Promise<string> => {
      const res = await fetch(new URL(url, issuer), {
        ...init,
        redirect: "manual",
        headers: { ...(init.headers as Record<string, string> | undefined), cookie: cookie() },
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const eq = pair?.indexOf("=") ?? -1;
        if (pair && eq > 0) jar.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      await res.arrayBuffer();
      const location = res.headers.get("location");
      if (!location) throw new Error(`no redirect from ${url}: HTTP ${res.status}`);
      return new URL(location, issuer).toString();
    };
    const form = (body: Record<string, string>): RequestInit => ({
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body),
    });
    let at = await go(authorizationUrl);
    for (let step = 0; step < 8 && !at.startsWith(redirect); step++) {
      if (/\/interaction\//.test(at)) {
        const uid = new URL(at).pathname.split("/interaction/")[1] ?? "";
        const page = await (await fetch(at, { headers: { cookie: cookie() } })).text();
        const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1] ?? "login";
        at = await go(`/interaction/${uid}`, form(prompt === "login" ? { prompt, login, password: "x" } : { prompt }));
      } else at = await go(at);
    }
    if (!at.startsWith(redirect)) throw new Error(`the authorization did not return to the gateway: ${at}`);
    // The browser lands on the gateway's callback (no cookies of the authorization server go there).
    const res = await fetch(at, { redirect: "manual" });
    return { status: res.status, text: await res.text() };
  }

  async function revoke(token: string, hint: "access_token" | "refresh_token"): Promise<void> {
    const res = await fetch(`${issuer}/token/revocation`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${GATEWAY_CLIENT.id}:${GATEWAY_CLIENT.secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ token, token_type_hint: hint }),
    });
    if (res.status !== 200) throw new Error(`revocation: HTTP ${res.status} ${await res.text()}`);
  }

  return {
    issuer,
    configure,
    authorizeAs,
    issued: () => ({ access: [...access], refresh: [...refresh] }),
    revoke,
    dropAccessToken: async (token) => {
      const found = await live?.AccessToken.find(token);
      if (!found) throw new Error("no such access token");
      await found.destroy();
    },
    grants: () => ({ ...grants }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
