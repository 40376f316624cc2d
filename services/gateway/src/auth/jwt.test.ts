import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT } from "jose";
import type { JWK } from "jose";
import { AuthUnavailableError } from "../auth.js";
import { createJwtAuthenticator, discoverJwksUrl, scopesFromClaims, tenantIdFromClaim } from "./jwt.js";

const ISSUER = "https://as.example.test";
const AUDIENCE = "https://webcodex.example.test/mcp";

async function keys() {
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  return { privateKey, jwks: createLocalJWKSet({ keys: [jwk] }) };
}

type Claims = Record<string, unknown>;
async function sign(
  privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"],
  claims: Claims,
  options: { exp?: number | string; typ?: string; kid?: string } = {},
) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "ES256", kid: options.kid ?? "k1", typ: options.typ ?? "at+jwt" })
    .setIssuedAt()
    .setExpirationTime(options.exp ?? "5m")
    .sign(privateKey);
}

const base = { iss: ISSUER, aud: AUDIENCE, client_id: "acme", sub: "user-1", scope: "webcodex:read webcodex:write" };

test("a valid access token maps client_id, sub and scope to the caller (client_id also names its OAuth client for the tool policy)", async () => {
  const k = await keys();
  const auth = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks });
  const caller = await auth.authenticate(await sign(k.privateKey, base));
  assert.deepEqual(caller, {
    principal: { clientId: "acme", subject: "user-1" },
    admissionProfile: "full",
    oauthClientId: "acme",
    scopes: ["webcodex:read", "webcodex:write"],
  });
});

test("wrong audience, wrong issuer, expiry and a foreign key are each refused", async () => {
  const k = await keys();
  const other = await keys();
  const auth = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks, clockToleranceSec: 0 });
  assert.equal(await auth.authenticate(await sign(k.privateKey, { ...base, aud: "https://other.example.test/mcp" })), undefined);
  assert.equal(await auth.authenticate(await sign(k.privateKey, { ...base, iss: "https://evil.example.test" })), undefined);
  assert.equal(await auth.authenticate(await sign(k.privateKey, base, { exp: Math.floor(Date.now() / 1000) - 5 })), undefined);
  assert.equal(await auth.authenticate(await sign(other.privateKey, base)), undefined, "same kid, other key");
  assert.equal(await auth.authenticate(await sign(other.privateKey, base, { kid: "unknown" })), undefined, "unknown kid");
});

test("tokens without exp, with an ID-token type, or without a tenant claim are refused", async () => {
  const k = await keys();
  const auth = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks });
  const noExp = await new SignJWT(base).setProtectedHeader({ alg: "ES256", kid: "k1" }).sign(k.privateKey);
  assert.equal(await auth.authenticate(noExp), undefined);
  assert.equal(await auth.authenticate(await sign(k.privateKey, base, { typ: "id_token+jwt" })), undefined);
  const { client_id: _c, ...noClient } = base;
  assert.equal(await auth.authenticate(await sign(k.privateKey, noClient)), undefined);
  assert.equal(await auth.authenticate("not-a-jwt"), undefined);
  assert.equal(await auth.authenticate(undefined), undefined);
});

test("the tenant claim is configurable; azp and scp are understood; read-only tenants are admitted read-only", async () => {
  const k = await keys();
  const auth = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks, clientIdClaim: "org_id", readOnlyClients: ["auditors"] });
  const a = await auth.authenticate(await sign(k.privateKey, { iss: ISSUER, aud: AUDIENCE, sub: "u", org_id: "auditors", azp: "app", scp: ["webcodex:read"] }));
  assert.deepEqual(a, { principal: { clientId: "auditors", subject: "u" }, admissionProfile: "read_only", oauthClientId: "app", scopes: ["webcodex:read"] });
  const b = await auth.authenticate(await sign(k.privateKey, { iss: ISSUER, aud: [AUDIENCE, "x"], sub: "u", azp: "app" }));
  assert.equal(b?.principal.clientId, "app");
});

test("a configured Host profile claim sets the caller's Host profile; an unknown value refuses the token", async () => {
  const k = await keys();
  const auth = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks, hostProfileClaim: "wcx_host" });
  assert.equal((await auth.authenticate(await sign(k.privateKey, { ...base, wcx_host: "app" })))?.hostProfile, "app");
  const none = await auth.authenticate(await sign(k.privateKey, base));
  assert.ok(none && !("hostProfile" in none), "no claim: the gateway's profile applies");
  assert.equal(await auth.authenticate(await sign(k.privateKey, { ...base, wcx_host: "chatgpt" })), undefined, "fail closed");
  const unconfigured = createJwtAuthenticator({ issuer: ISSUER, audience: AUDIENCE, keys: k.jwks });
  assert.ok(
    !("hostProfile" in ((await unconfigured.authenticate(await sign(k.privateKey, { ...base, wcx_host: "app" }))) ?? {})),
    "the claim is read only when configured",
  );
});

test("client ids that cannot appear in a canonical project id map to a stable digest", () => {
  assert.equal(tenantIdFromClaim("acme.prod-1"), "acme.prod-1");
  const url = tenantIdFromClaim("https://app.example.com/client.json");
  assert.match(url, /^h-[0-9a-f]{40}$/);
  assert.equal(tenantIdFromClaim("https://app.example.com/client.json"), url);
  assert.notEqual(tenantIdFromClaim("acme:evil"), "acme");
});

test("scopesFromClaims merges scope and scp without duplicates", () => {
  assert.deepEqual(scopesFromClaims({ scope: "a b", scp: ["b", "c"] }), ["a", "b", "c"]);
  assert.deepEqual(scopesFromClaims({}), []);
});

test("JWKS discovery reads the issuer metadata and insists on the same issuer", async () => {
  let issuer = "";
  const server = http.createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/.well-known/openid-configuration") res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
    else {
      res.statusCode = 404;
      res.end("{}");
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.equal(await discoverJwksUrl(issuer), `${issuer}/jwks`);
    await assert.rejects(discoverJwksUrl(`${issuer}/other`), AuthUnavailableError);
  } finally {
    server.close();
  }
});

test("an unreachable authorization server means 'cannot check' (AuthUnavailableError), not an invalid token", async () => {
  const k = await keys();
  const auth = createJwtAuthenticator({ issuer: "http://127.0.0.1:9", audience: AUDIENCE, fetchTimeoutMs: 500 });
  await assert.rejects(auth.authenticate(await sign(k.privateKey, { ...base, iss: "http://127.0.0.1:9" })), AuthUnavailableError);
});
