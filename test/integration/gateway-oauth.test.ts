/**
 * The gateway as an OAuth 2.1 resource server against a real authorization server:
 * oidc-provider 9 in-process on 127.0.0.1 issues JWT access tokens (client credentials +
 * RFC 8707 resource indicators, audience = the MCP URL); `webcodex dev` validates them
 * (JWKS discovered from the issuer). A real MCP SDK client uses a good token; wrong audience,
 * expired, foreign-key and missing tokens get 401 with the right WWW-Authenticate; a token
 * without the scope a tool needs gets 403 insufficient_scope.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from "jose";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, connectMcp, createProjectDir, startDevServer, tempDir, until } from "../support/index.js";
import type { DevServer } from "../support/index.js";

const SECRET = "a-client-secret-for-tests-only-0123456789";
const SCOPES = "webcodex:read webcodex:write";

interface AuthServer {
  issuer: string;
  token(clientId: string, resource: string, scope?: string): Promise<string>;
  close(): Promise<void>;
}

async function startAuthorizationServer(): Promise<AuthServer> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const key = { ...(await exportJWK(privateKey)), kid: "as-key-1", alg: "RS256", use: "sig" };
  const client = (client_id: string) => ({
    client_id,
    client_secret: SECRET,
    grant_types: ["client_credentials"],
    redirect_uris: [],
    response_types: [],
    scope: SCOPES,
  });
  const provider = new Provider(issuer, {
    clients: [client("tenant-a"), client("tenant-b"), client("tenant-short")],
    scopes: ["webcodex:read", "webcodex:write"],
    ttl: { ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 300 },
    jwks: { keys: [key as never] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource, c) => ({
          scope: SCOPES,
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: c.clientId === "tenant-short" ? 3 : 300,
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
  });
  server.on("request", provider.callback());
  return {
    issuer,
    async token(clientId, resource, scope = SCOPES) {
      const res = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${Buffer.from(`${clientId}:${SECRET}`).toString("base64")}` },
        body: new URLSearchParams({ grant_type: "client_credentials", resource, scope }),
      });
      const body = (await res.json()) as { access_token?: string };
      assert.equal(res.status, 200, JSON.stringify(body));
      return body.access_token ?? "";
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe("OAuth resource server with a real authorization server (oidc-provider)", { timeout: 120_000 }, () => {
  let as: AuthServer;
  let server: DevServer;
  let mcpUrl: string;
  let metadataUrl: string;
  let client: Client | undefined;

  before(async () => {
    as = await startAuthorizationServer();
    const projectDir = createProjectDir({ "README.md": "# oauth\n" }, { name: "oauth-demo" });
    server = await startDevServer({
      projectDir,
      dataDir: tempDir("wcx-oauth-data-"),
      env: { WEBCODEX_OAUTH_ISSUER: as.issuer, WEBCODEX_DEV_CLIENT_ID: "tenant-a", WEBCODEX_OAUTH_CLOCK_TOLERANCE_S: "0" },
    });
    mcpUrl = server.mcpUrl;
    metadataUrl = `${server.baseUrl}/.well-known/oauth-protected-resource/mcp`;
  });
  after(async () => {
    await client?.close();
    await server?.stop();
    await as?.close();
  });

  const post = (token: string | undefined, body: unknown) =>
    fetch(mcpUrl, {
      method: "POST",
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
      },
      body: JSON.stringify(body),
    });
  const initialize = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
  };
  const toolCall = (name: string, args: Record<string, unknown>) => ({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name, arguments: args } });

  async function assertInvalidToken(token: string) {
    const res = await post(token, initialize);
    assert.equal(res.status, 401);
    const challenge = res.headers.get("www-authenticate") ?? "";
    assert.match(challenge, /^Bearer resource_metadata="[^"]+", error="invalid_token", /);
    assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), challenge);
    assert.ok(challenge.includes(`scope="${SCOPES}"`), challenge);
  }

  it("publishes RFC 9728 metadata naming the resource, the authorization server and the scopes (path form and root)", async () => {
    for (const url of [metadataUrl, `${server.baseUrl}/.well-known/oauth-protected-resource`]) {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), {
        resource: mcpUrl,
        authorization_servers: [as.issuer],
        scopes_supported: ["webcodex:read", "webcodex:write"],
        bearer_methods_supported: ["header"],
        resource_name: "WebCodex",
      });
    }
  });

  it("a token for this resource works through a real MCP SDK client, as the token's tenant", async () => {
    const token = await as.token("tenant-a", mcpUrl);
    assert.equal(decodeJwt(token).aud, mcpUrl, "the authorization server put the MCP URL in aud");
    client = await connectMcp(mcpUrl, token);
    assert.ok((await client.listTools()).tools.some((t) => t.name === "run_shell"));
    const listed = await callTool(client, "list_projects", {});
    const project = (listed.result["projects"] as Array<Record<string, string>>)[0];
    assert.equal(project?.["project_id"], "agent:tenant-a:oauth-demo");
    const ran = await callTool(client, "run_shell", { project: project?.["project_ref"], command: "echo via-oauth" });
    assert.equal(ran.isError, false, JSON.stringify(ran.result));
    assert.match(JSON.stringify(ran.result), /via-oauth/);
  });

  it("another tenant's token sees none of tenant A's Projects", async () => {
    const other = await connectMcp(mcpUrl, await as.token("tenant-b", mcpUrl));
    try {
      assert.deepEqual((await callTool(other, "list_projects", {})).result, { projects: [] });
      const foreign = await callTool(other, "read_files", { project: "agent:tenant-a:oauth-demo", files: [{ path: "README.md" }] });
      assert.equal(foreign.result["reason_code"], "project_not_found");
    } finally {
      await other.close();
    }
  });

  it("a missing token gets 401 with the metadata URL and scopes, and no error code", async () => {
    const res = await post(undefined, initialize);
    assert.equal(res.status, 401);
    assert.equal(res.headers.get("www-authenticate"), `Bearer resource_metadata="${metadataUrl}", scope="${SCOPES}"`);
  });

  it("a token for another audience gets 401 invalid_token", async () => {
    const token = await as.token("tenant-a", "http://127.0.0.1:1/mcp");
    assert.equal(decodeJwt(token).aud, "http://127.0.0.1:1/mcp");
    await assertInvalidToken(token);
  });

  it("an expired token gets 401 invalid_token", async () => {
    const token = await as.token("tenant-short", mcpUrl);
    assert.equal((await post(token, initialize)).status, 200, "valid before it expires");
    // The gateway (another process) judges expiry by its own clock, to the second: poll until it refuses.
    await until("the token expires", async () => (await post(token, initialize)).status === 401, 10_000, 200);
    assert.ok(Date.now() >= (decodeJwt(token).exp ?? 0) * 1000, "refused only once its exp has passed");
    await assertInvalidToken(token);
  });

  it("a token signed by another key gets 401 invalid_token", async () => {
    const genuine = await as.token("tenant-a", mcpUrl);
    const { privateKey } = await generateKeyPair("RS256");
    const claims = decodeJwt(genuine);
    const forge = (kid: string | undefined) =>
      new SignJWT(claims).setProtectedHeader({ alg: "RS256", typ: "at+jwt", ...(kid ? { kid } : {}) }).sign(privateKey);
    await assertInvalidToken(await forge(decodeProtectedHeader(genuine).kid));
    await assertInvalidToken(await forge("attacker-key"));
    await assertInvalidToken(await forge(undefined));
    assert.equal((await post(genuine, initialize)).status, 200, "the genuine token still works");
  });

  it("a token without the write scope can read but gets 403 insufficient_scope for an effectful tool", async () => {
    const token = await as.token("tenant-a", mcpUrl, "webcodex:read");
    assert.equal(decodeJwt(token)["scope"], "webcodex:read");
    const reader = await connectMcp(mcpUrl, token);
    try {
      assert.equal((await callTool(reader, "list_projects", {})).isError, false);
      await assert.rejects(callTool(reader, "run_shell", { project: "agent:tenant-a:oauth-demo", command: "echo no" }), /403|insufficient/i);
    } finally {
      await reader.close();
    }
    for (const body of [
      toolCall("run_shell", { project: "agent:tenant-a:oauth-demo", command: "echo no" }),
      toolCall("call_runtime_tool", { tool: "run_process", arguments: { project: "agent:tenant-a:oauth-demo", args: ["true"] } }),
    ]) {
      const res = await post(token, body);
      assert.equal(res.status, 403);
      const challenge = res.headers.get("www-authenticate") ?? "";
      assert.match(challenge, /^Bearer error="insufficient_scope", /);
      assert.ok(challenge.includes(`scope="${SCOPES}"`), challenge);
      assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), challenge);
      const answer = (await res.json()) as { id: number; error: { message: string } };
      assert.equal(answer.id, 2);
      assert.match(answer.error.message, /insufficient_scope/);
    }
  });
});
