/**
 * A real authorization server for tests: oidc-provider in-process on 127.0.0.1, issuing JWT
 * access tokens for this MCP resource (RFC 8707) to people who sign in through the
 * authorization code flow with PKCE (its development login form accepts any login), so
 * several subjects of one OAuth client get their own tokens.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createHash, randomBytes } from "node:crypto";
import Provider from "oidc-provider";
import { exportJWK, generateKeyPair } from "jose";

export interface UserAuthServer {
  issuer: string;
  /** Signs `login` in as a user of `clientId` and returns its access token for `resource`. */
  userToken(login: string, resource: string): Promise<string>;
  close(): Promise<void>;
}

const SECRET = "a-client-secret-for-tests-only-0123456789";
const REDIRECT = "http://127.0.0.1/callback";

export async function startUserAuthServer(options: {
  clientId: string;
  scopes: string;
  extraClaims?: (login: string) => Record<string, unknown>;
}): Promise<UserAuthServer> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const key = { ...(await exportJWK(privateKey)), kid: "as-key-1", alg: "RS256", use: "sig" };
  const scopes = options.scopes.split(" ");
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: SECRET,
        grant_types: ["authorization_code"],
        redirect_uris: [REDIRECT],
        response_types: ["code"],
        scope: `openid ${options.scopes}`,
      },
    ],
    scopes: ["openid", ...scopes],
    jwks: { keys: [key as never] },
    pkce: { required: () => true },
    extraTokenClaims: (_ctx, token) =>
      options.extraClaims && "accountId" in token && typeof token.accountId === "string" ? options.extraClaims(token.accountId) : undefined,
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined as unknown as string,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: options.scopes,
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: 600,
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
  });
  server.on("request", provider.callback());

  async function userToken(login: string, resource: string): Promise<string> {
    const jar = new Map<string, string>();
    const go = async (url: string, init: RequestInit = {}): Promise<string> => {
      const res = await fetch(new URL(url, issuer), {
        ...init,
        redirect: "manual",
        headers: { ...(init.headers as Record<string, string> | undefined), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") },
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const eq = pair?.indexOf("=") ?? -1;
        if (pair && eq > 0) jar.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      await res.arrayBuffer();
      const location = res.headers.get("location");
      if (!location) throw new Error(`no redirect from ${url}: HTTP ${res.status}`);
      return location;
    };
    const form = (body: Record<string, string>): RequestInit => ({
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body),
    });
    const verifier = randomBytes(32).toString("base64url");
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    let at = await go(
      `/auth?${new URLSearchParams({ client_id: options.clientId, response_type: "code", redirect_uri: REDIRECT, scope: `openid ${options.scopes}`, resource, code_challenge: challenge, code_challenge_method: "S256", state: "s" })}`,
    );
    for (let step = 0; step < 8 && !at.startsWith(REDIRECT); step++) {
      if (/\/interaction\//.test(at)) {
        const uid = at.split("/interaction/")[1] ?? "";
        // The login prompt first, then consent; the form names the prompt it answers.
        const page = await (await fetch(new URL(at, issuer), { headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } })).text();
        const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1] ?? "login";
        at = await go(`/interaction/${uid}`, form(prompt === "login" ? { prompt, login, password: "x" } : { prompt }));
      } else {
        at = await go(at);
      }
    }
    const code = new URL(at).searchParams.get("code");
    if (!code) throw new Error(`no authorization code: ${at}`);
    const res = await fetch(`${issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${options.clientId}:${SECRET}`).toString("base64")}`,
      },
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier, resource }),
    });
    const body = (await res.json()) as { access_token?: string };
    if (res.status !== 200 || !body.access_token) throw new Error(`token request failed: HTTP ${res.status} ${JSON.stringify(body)}`);
    return body.access_token;
  }

  return {
    issuer,
    userToken,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
