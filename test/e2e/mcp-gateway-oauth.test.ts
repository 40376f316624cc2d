/**
 * The MCP gateway's per-user OAuth upstreams end to end on the distributed stack: an upstream
 * MCP server (its own process) that accepts only access tokens its authorization server
 * (oidc-provider, in the test) says are active, beside a plain upstream shared by two tenants
 * with per-tenant tool lists. A real MCP client is asked to authorize once (the URL in the
 * failure, which the test opens as the user's browser), then its calls carry its own token;
 * a revoked access token is refreshed, a revoked grant fails closed with the authorization
 * follow-up, and the user can revoke through WebCodex. Tokens are stored encrypted in Redis.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { createRedis } from "@webcodex/platform";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, executeFollowUp, startTestStack, tempDir } from "../support/index.js";
import type { TestDatabase, ToolOutcome } from "../support/index.js";
import { startUpstream } from "../support/mcp-upstream.js";
import type { UpstreamProcess } from "../support/mcp-upstream.js";
import { GATEWAY_CLIENT, startUpstreamIdp, UPSTREAM_RS } from "../support/upstream-idp.js";
import type { UpstreamIdp } from "../support/upstream-idp.js";

const tok = () => `t-${randomBytes(16).toString("hex")}`;
const alice = tok();
const bob = tok();
const stranger = tok();

const mcpTool = (client: Client, args: Record<string, unknown>): Promise<ToolOutcome> =>
  callTool(client, "call_runtime_tool", { tool: "mcp_tool", arguments: args });

describe("MCP gateway: per-user OAuth upstreams and per-tenant tool lists", () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let idp: UpstreamIdp;
  let tickets: UpstreamProcess;
  let shared: UpstreamProcess;
  let client: Client;
  let second: Client;
  let other: Client;
  let redisUrl: string;
  let gatewayUrl: string;

  before(async () => {
    const services = await backingServices();
    redisUrl = services.redisUrl;
    db = await createTestDatabase();
    const dir = tempDir("wcx-mcpgw-oauth-");
    idp = await startUpstreamIdp();
    tickets = await startUpstream(join(dir, "tickets.journal"), 0, {
      url: `${idp.issuer}/token/introspection`,
      clientId: UPSTREAM_RS.id,
      secret: UPSTREAM_RS.secret,
    });
    shared = await startUpstream(join(dir, "shared.journal"));
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({
        upstreams: [
          {
            id: "tickets",
            url: tickets.url,
            tenants: ["local"],
            auth: { mode: "oauth", issuer: idp.issuer, client_id: GATEWAY_CLIENT.id, client_secret_env: "TICKETS_OAUTH_SECRET", scopes: ["openid", "tickets"] },
            read_only_tools: ["whoami", "echo"],
            timeout_ms: 8000,
          },
          {
            id: "shared",
            url: shared.url,
            tenants: ["local", "other"],
            deny_tools: ["crash_write"],
            tenant_tools: { other: { allow_tools: ["echo", "add_note"], deny_tools: ["add_note"] } },
            timeout_ms: 8000,
          },
        ],
      }),
    );
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: alice, client_id: "local", subject: "alice" },
          { token: bob, client_id: "local", subject: "bob" },
          { token: stranger, client_id: "other", subject: "carol" },
        ],
      }),
    );
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir: createProjectDir({ "README.md": "# oauth\n" }, { name: "oauth" }),
      gatewayEnv: {
        WEBCODEX_DEV_TOKENS_FILE: join(dir, "tokens.json"),
        WEBCODEX_MCP_UPSTREAMS_FILE: join(dir, "upstreams.json"),
        WEBCODEX_MCP_OAUTH_KEY: randomBytes(32).toString("hex"),
        WEBCODEX_MCP_OAUTH_REDIS_URL: services.redisUrl,
        TICKETS_OAUTH_SECRET: GATEWAY_CLIENT.secret,
      },
    });
    gatewayUrl = stack.mcpUrl.replace(/\/mcp$/, "");
    idp.configure(`${gatewayUrl}/mcp-upstream/oauth/callback`);
    client = await connectMcp(stack.mcpUrl, alice);
    second = await connectMcp(stack.mcpUrl, bob);
    other = await connectMcp(stack.mcpUrl, stranger);
  });
  after(async () => {
    await Promise.all([client?.close(), second?.close(), other?.close()]);
    await stack?.stop();
    await Promise.all([tickets?.kill(), shared?.kill()]);
    await idp?.close();
    await db?.drop();
  });

  const authorizationUrl = (outcome: ToolOutcome): string => String((outcome.result["evidence"] as Record<string, unknown>)["authorization_url"]);

  it("asks the user to authorize once (nothing sent), then calls with the user's own token", async () => {
    const first = await mcpTool(client, { server: "tickets", tool: "whoami", arguments: {} });
    assert.equal(first.isError, true);
    assert.equal(first.result["reason_code"], "upstream_authorization_required", JSON.stringify(first.result));
    assert.equal(first.result["state_changed"], false);
    assert.ok(authorizationUrl(first).startsWith(`${idp.issuer}/`), authorizationUrl(first));
    const url = new URL(authorizationUrl(first));
    assert.equal(url.searchParams.get("code_challenge_method"), "S256");
    assert.equal(url.searchParams.get("redirect_uri"), `${gatewayUrl}/mcp-upstream/oauth/callback`);
    assert.deepEqual(tickets.journal(), []);
    // The follow-up is the tool's description: before the user authorizes it fails the same way.
    const early = await executeFollowUp(client, first.result["follow_up"]);
    assert.equal(early.result["reason_code"], "upstream_authorization_required");
    // Listing the namespace asks for the same authorization, with the listing as follow-up.
    const listing = await callTool(client, "call_runtime_tool", { tool: "list_tools", arguments: { namespace: "mcp:tickets" } });
    assert.equal(listing.result["reason_code"], "upstream_authorization_required");
    assert.equal(listing.result["detail_code"], "listing");

    const page = await idp.authorizeAs(authorizationUrl(first), "alice");
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /may now call tickets/);

    const described = await executeFollowUp(client, first.result["follow_up"]);
    assert.equal(described.isError, false, JSON.stringify(described.result));
    const binding = described.result["binding"] as Record<string, string>;
    assert.equal(binding["tool"], "whoami");
    const called = await mcpTool(client, { binding, arguments: {} });
    assert.equal(called.isError, false, JSON.stringify(called.result));
    assert.deepEqual(called.result["content"], [{ type: "text", text: "alice" }]);
    assert.deepEqual(called.result["upstream"], { server: "tickets", tool: "whoami", trust: "untrusted" });
    assert.deepEqual(tickets.journal(), ["whoami alice"]);
    // The same link cannot be used twice.
    const again = await fetch(`${gatewayUrl}/mcp-upstream/oauth/callback?state=${url.searchParams.get("state")}&code=x`);
    assert.equal(again.status, 400);
  });

  it("another principal of the same tenant authorizes for itself; its calls carry its own token", async () => {
    const first = await mcpTool(second, { server: "tickets", tool: "whoami", arguments: {} });
    assert.equal(first.result["reason_code"], "upstream_authorization_required");
    assert.equal((await idp.authorizeAs(authorizationUrl(first), "bob")).status, 200);
    const called = await mcpTool(second, { server: "tickets", tool: "whoami", arguments: {} });
    assert.deepEqual(called.result["content"], [{ type: "text", text: "bob" }], JSON.stringify(called.result));
    const mine = await mcpTool(client, { server: "tickets", tool: "whoami", arguments: {} });
    assert.deepEqual(mine.result["content"], [{ type: "text", text: "alice" }], JSON.stringify(mine.result));
  });

  it("tokens are stored encrypted: no issued token appears in Redis", async () => {
    const redis = createRedis(redisUrl);
    try {
      await new Promise((ready) => redis.once("ready", ready));
      const keys = await redis.keys("webcodex:mcp-oauth:token:tickets:*");
      assert.ok(keys.length >= 2, `records: ${keys.length}`);
      const values = await Promise.all(keys.map((k) => redis.get(k)));
      const { access, refresh } = idp.issued();
      assert.ok(access.length >= 2 && refresh.length >= 2);
      for (const v of values) for (const t of [...access, ...refresh]) assert.ok(!String(v).includes(t), "a token in clear text");
    } finally {
      redis.disconnect();
    }
  });

  it("an access token the upstream no longer accepts is refreshed once; a revoked grant fails closed with the authorization follow-up", async () => {
    const before = tickets.journal().length;
    const { access } = idp.issued();
    const refreshes = idp.grants()["refresh_token"] ?? 0;
    // Alice's tokens were issued first: the first access and refresh token.
    await idp.dropAccessToken(access[0] as string);
    const refreshed = await mcpTool(client, { server: "tickets", tool: "whoami", arguments: {} });
    assert.equal(refreshed.isError, false, JSON.stringify(refreshed.result));
    assert.deepEqual(refreshed.result["content"], [{ type: "text", text: "alice" }]);
    assert.equal((idp.grants()["refresh_token"] ?? 0) - refreshes, 1);

    // Revoking at the authorization server (the user withdraws consent there) revokes the grant:
    // the access token the gateway holds and its refresh token both stop working.
    await idp.revoke(idp.issued().access.at(-1) as string, "access_token");
    const revoked = await mcpTool(client, { server: "tickets", tool: "echo", arguments: { text: "after revocation" } });
    assert.equal(revoked.isError, true);
    assert.equal(revoked.result["reason_code"], "upstream_authorization_required", JSON.stringify(revoked.result));
    assert.equal(revoked.result["state_changed"], false);
    assert.equal(revoked.result["outcome_unknown"], false);
    // Nothing ran: the journal holds only the refreshed whoami.
    assert.deepEqual(tickets.journal().slice(before), ["whoami alice"]);
    // Bob's authorization is his own and still works.
    const bobs = await mcpTool(second, { server: "tickets", tool: "whoami", arguments: {} });
    assert.deepEqual(bobs.result["content"], [{ type: "text", text: "bob" }]);
    // Authorizing again restores Alice's calls; the follow-up runs exactly as returned.
    assert.equal((await idp.authorizeAs(authorizationUrl(revoked), "alice")).status, 200);
    const fresh = await executeFollowUp(client, revoked.result["follow_up"]);
    assert.equal(fresh.isError, false, JSON.stringify(fresh.result));
    const ok = await mcpTool(client, { binding: fresh.result["binding"], arguments: { text: "back" } });
    assert.equal(ok.isError, false, JSON.stringify(ok.result));
  });

  it("the user revokes through WebCodex: its tokens are forgotten and revoked, and the next call asks again", async () => {
    const url = `${gatewayUrl}/mcp-upstream/oauth/revoke?server=tickets`;
    assert.equal((await fetch(url, { method: "POST" })).status, 401);
    assert.equal((await fetch(url, { method: "POST", headers: { authorization: `Bearer ${stranger}` } })).status, 404);
    const { refresh } = idp.issued();
    const res = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${alice}` } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { server: "tickets", revoked: true });
    const next = await mcpTool(client, { server: "tickets", tool: "whoami", arguments: {} });
    assert.equal(next.result["reason_code"], "upstream_authorization_required");
    // Revoked at the authorization server too: Alice's last refresh token no longer works there.
    const introspected = await fetch(`${idp.issuer}/token/introspection`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${UPSTREAM_RS.id}:${UPSTREAM_RS.secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ token: refresh.at(-1) as string }),
    });
    assert.equal(((await introspected.json()) as { active: boolean }).active, false);
  });

  it("per-tenant tool lists narrow what each tenant sees and calls of a shared upstream", async () => {
    const mine = await callTool(client, "call_runtime_tool", { tool: "list_tools", arguments: { namespace: "mcp:shared" } });
    assert.deepEqual(
      (mine.result["tools"] as Array<Record<string, unknown>>).map((t) => t["name"]),
      ["echo", "add_note", "hang", "big", "hostile"],
    );
    const theirs = await callTool(other, "call_runtime_tool", { tool: "list_tools", arguments: { namespace: "mcp:shared" } });
    assert.deepEqual(
      (theirs.result["tools"] as Array<Record<string, unknown>>).map((t) => t["name"]),
      ["echo"],
    );
    const refused = await mcpTool(other, { server: "shared", tool: "add_note", arguments: { text: "x" } });
    assert.equal(refused.result["reason_code"], "unknown_tool");
    assert.equal(refused.result["detail_code"], "upstream_tool_not_found");
    const allowed = await mcpTool(other, { server: "shared", tool: "echo", arguments: { text: "hi" } });
    assert.equal(allowed.isError, false, JSON.stringify(allowed.result));
    const noted = await mcpTool(client, { server: "shared", tool: "add_note", arguments: { text: "mine" } });
    assert.equal(noted.isError, false, JSON.stringify(noted.result));
    assert.deepEqual(shared.journal(), ["add_note mine"]);
    // The other tenant does not see the OAuth server at all.
    const plain = await callTool(other, "call_runtime_tool", { tool: "list_tools", arguments: {} });
    assert.deepEqual(
      (plain.result["namespaces"] as Array<Record<string, string>>).map((n) => n["namespace"]),
      ["mcp:shared"],
    );
  });
});
