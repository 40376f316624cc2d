import { test } from "node:test";
import assert from "node:assert/strict";
import { createLogger } from "@webcodex/platform";
import type { NodeRequest, NodeResponse } from "@webcodex/platform";
import { parseUpstreams } from "./config.js";
import { createUpstreamOAuth, memorySecretStore } from "./oauth.js";
import type { SecretStore } from "./oauth.js";

const [server] = parseUpstreams(
  JSON.stringify({
    upstreams: [
      {
        id: "tickets",
        url: "http://127.0.0.1:9/mcp",
        tenants: ["acme"],
        auth: {
          mode: "oauth",
          issuer: "https://idp.example",
          client_id: "gw",
          authorization_endpoint: "https://idp.example/auth",
          token_endpoint: "https://idp.example/token",
        },
      },
    ],
  }),
  {},
);
const alice = { clientId: "acme", subject: "alice" };
const bob = { clientId: "acme", subject: "bob" };

/** A token endpoint that issues access-<n> / refresh-<n> for codes, and refuses refresh tokens in `revoked`. */
function tokenEndpoint(revoked: Set<string>) {
  let n = 0;
  const calls: string[] = [];
  const fake: typeof fetch = async (_url, init) => {
    const body = new URLSearchParams(String(init?.body));
    calls.push(body.get("grant_type") ?? "");
    if (body.get("grant_type") === "refresh_token" && revoked.has(body.get("refresh_token") ?? ""))
      return Response.json({ error: "invalid_grant" }, { status: 400 });
    n += 1;
    return Response.json({ access_token: `access-${n}`, refresh_token: `refresh-${n}`, expires_in: 3600 });
  };
  return { fake, calls };
}

async function authorize(oauth: ReturnType<typeof createUpstreamOAuth>, who: typeof alice): Promise<number> {
  const first = await oauth.credential(server!, who);
  assert.ok("authorizationUrl" in first);
  const state = new URL(first.authorizationUrl).searchParams.get("state");
  let status = 0;
  const res = { writeHead: (s: number) => (status = s), end: () => undefined } as unknown as NodeResponse;
  await oauth.callbackHandler(new Map([["tickets", server!]]))({ method: "GET", url: `/cb?state=${state}&code=c` } as NodeRequest, res);
  return status;
}

test("per-user OAuth: tokens are per principal, sealed to it, refreshed after a refusal, and dropped when the refresh is refused", async () => {
  const store: SecretStore = memorySecretStore();
  const revoked = new Set<string>();
  const { fake, calls } = tokenEndpoint(revoked);
  const oauth = createUpstreamOAuth({
    key: "k".repeat(32),
    publicUrl: "https://wcx.example",
    store,
    logger: createLogger({ service: "t", level: "silent" }),
    fetch: fake,
  });

  const url = new URL(((await oauth.credential(server!, alice)) as { authorizationUrl: string }).authorizationUrl);
  assert.equal(url.origin + url.pathname, "https://idp.example/auth");
  assert.equal(url.searchParams.get("redirect_uri"), "https://wcx.example/mcp-upstream/oauth/callback");
  assert.equal(url.searchParams.get("code_challenge_method"), "S256");

  assert.equal(await authorize(oauth, alice), 200);
  assert.deepEqual(await oauth.credential(server!, alice), { token: "access-1" });
  // Bob has authorized nothing.
  assert.ok("authorizationUrl" in (await oauth.credential(server!, bob)));

  // Alice's sealed record copied to Bob's key does not open for Bob.
  const keyOf = async (who: typeof alice) => {
    const keys: string[] = [];
    const spy: SecretStore = { ...store, get: async (k) => (keys.push(k), store.get(k)) };
    await createUpstreamOAuth({
      key: "k".repeat(32),
      publicUrl: "https://wcx.example",
      store: spy,
      logger: createLogger({ service: "t", level: "silent" }),
      fetch: fake,
    })
      .credential(server!, who)
      .catch(() => undefined);
    return keys[0] as string;
  };
  const sealed = (await store.get(await keyOf(alice))) as string;
  assert.ok(!sealed.includes("access-1") && !sealed.includes("refresh-1"));
  await store.set(await keyOf(bob), sealed);
  assert.ok("authorizationUrl" in (await oauth.credential(server!, bob)));

  // The upstream refused access-1: one refresh gives access-2.
  assert.deepEqual(await oauth.rejected(server!, alice, "access-1"), { token: "access-2" });
  assert.deepEqual(calls.slice(-1), ["refresh_token"]);
  // Its refresh token revoked: the record is dropped and authorization is asked for again.
  revoked.add("refresh-2");
  assert.ok("authorizationUrl" in (await oauth.rejected(server!, alice, "access-2")));
  assert.ok("authorizationUrl" in (await oauth.credential(server!, alice)));
});

test("per-user OAuth: an authorization link works once", async () => {
  const { fake } = tokenEndpoint(new Set());
  const oauth = createUpstreamOAuth({
    key: "k".repeat(32),
    publicUrl: "https://wcx.example",
    store: memorySecretStore(),
    logger: createLogger({ service: "t", level: "silent" }),
    fetch: fake,
  });
  const first = (await oauth.credential(server!, alice)) as { authorizationUrl: string };
  const state = new URL(first.authorizationUrl).searchParams.get("state");
  const statuses: number[] = [];
  for (let i = 0; i < 2; i++) {
    const res = { writeHead: (s: number) => statuses.push(s), end: () => undefined } as unknown as NodeResponse;
    await oauth.callbackHandler(new Map([["tickets", server!]]))({ method: "GET", url: `/cb?state=${state}&code=c` } as NodeRequest, res);
  }
  assert.deepEqual(statuses, [200, 400]);
  assert.throws(
    () => createUpstreamOAuth({ key: "short", publicUrl: "x", store: memorySecretStore(), logger: createLogger({ service: "t", level: "silent" }) }),
    /at least 32/,
  );
});
