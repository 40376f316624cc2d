import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinition } from "@webcodex/contracts";
import { captureCall } from "../audit-capture.js";
import { configuredUpstreams, parseUpstreams } from "./config.js";
import { schemaHash } from "./connection.js";
import { createUpstreamLimiter } from "./limiter.js";
import { labelResult } from "./results.js";

const one = (extra: Record<string, unknown>) => JSON.stringify({ upstreams: [{ id: "tracker", url: "http://127.0.0.1:9/mcp", tenants: ["acme"], ...extra }] });

test("upstream config: defaults, a static credential read from the named environment variable, and a project binding", () => {
  const [s] = parseUpstreams(one({ auth: { mode: "static", env: "TRACKER_TOKEN" }, project: "agent:acme:web", read_only_tools: ["search"] }), {
    TRACKER_TOKEN: "sekrit",
  });
  assert.equal(s?.timeoutMs, 30_000);
  assert.equal(s?.maxConcurrency, 8);
  assert.deepEqual(s?.auth, { mode: "static", env: "TRACKER_TOKEN", header: "Authorization", prefix: "Bearer ", value: "sekrit" });
  assert.equal(s?.project, "agent:acme:web");
  assert.deepEqual(s?.readOnlyTools, ["search"]);
});

test("upstream config: every bad entry is refused at start-up naming its field", () => {
  const cases: Array<[string, RegExp]> = [
    [one({ extra: 1 }), /upstreams\[0\]\.extra is not a known setting/],
    [one({ id: "Bad Id" }), /upstreams\[0\]\.id/],
    [one({ url: "ftp://x" }), /url must be an http\(s\) URL/],
    [one({ tenants: [] }), /tenants must name at least one/],
    [one({ auth: { mode: "static", env: "MISSING_VAR" } }), /MISSING_VAR is not set/],
    [one({ auth: { mode: "oauth" } }), /auth\.client_id must name the OAuth client/],
    [one({ auth: { mode: "oauth", client_id: "gw" } }), /auth\.issuer must be an http\(s\) URL/],
    [one({ auth: { mode: "oauth", issuer: "https://idp.example", client_id: "gw", client_secret_env: "NO_SUCH_SECRET" } }), /NO_SUCH_SECRET is not set/],
    [one({ auth: { mode: "oauth", issuer: "https://idp.example", client_id: "gw", pkce: false } }), /auth\.pkce is not a known setting/],
    [one({ tenant_tools: { other: { deny_tools: ["x"] } } }), /tenant_tools\.other: other is not one of the server's tenants/],
    [one({ project: "agent:other:web" }), /project must belong to one of the server's tenants/],
    [one({ timeout_ms: 5 }), /timeout_ms must be an integer from 100/],
    [JSON.stringify({ upstreams: [JSON.parse(one({})).upstreams[0], JSON.parse(one({})).upstreams[0]] }), /used twice/],
    ["{", /not valid JSON/],
  ];
  for (const [text, message] of cases) assert.throws(() => parseUpstreams(text, {}), message);
});

test("upstream config: per-user OAuth and per-tenant tool lists are read", () => {
  const [s] = parseUpstreams(
    one({
      auth: { mode: "oauth", issuer: "https://idp.example/", client_id: "gw", client_secret_env: "GW_SECRET", scopes: ["tickets"] },
      tenant_tools: { acme: { deny_tools: ["delete"] } },
    }),
    { GW_SECRET: "s3" },
  );
  assert.deepEqual(s?.auth, {
    mode: "oauth",
    issuer: "https://idp.example",
    clientId: "gw",
    clientSecretEnv: "GW_SECRET",
    clientSecret: "s3",
    scopes: ["tickets"],
  });
  assert.deepEqual(s?.tenantTools, { acme: { allowTools: [], denyTools: ["delete"] } });
});

test("schema hashes ignore key order and change with the schema", () => {
  assert.equal(schemaHash({ type: "object", properties: { a: { type: "string" } } }), schemaHash({ properties: { a: { type: "string" } }, type: "object" }));
  assert.notEqual(schemaHash({ type: "object", required: ["a"] }), schemaHash({ type: "object" }));
});

test("the limiter holds at most maxConcurrency in flight, refuses after the queue wait, and hands a released slot on", async () => {
  const limiter = createUpstreamLimiter({ maxConcurrency: 1, queueTimeoutMs: 30, ratePerMinute: 0 });
  const first = await limiter.acquire();
  assert.ok(first.ok);
  const refused = await limiter.acquire();
  assert.deepEqual(refused, { ok: false, reason: "queue_timeout", retryAfterMs: 30 });
  const waiting = limiter.acquire();
  if (first.ok) first.release();
  const second = await waiting;
  assert.ok(second.ok);
  assert.equal(limiter.inFlight(), 1);
});

test("the limiter's rate budget refuses the call beyond it with the wait", async () => {
  let now = 0;
  const limiter = createUpstreamLimiter({ maxConcurrency: 10, queueTimeoutMs: 0, ratePerMinute: 2, now: () => now });
  assert.ok((await limiter.acquire()).ok);
  assert.ok((await limiter.acquire()).ok);
  const third = await limiter.acquire();
  assert.equal(third.ok, false);
  assert.equal(!third.ok && third.reason, "rate_limited");
  now += 30_000;
  assert.ok((await limiter.acquire()).ok);
});

test("results are labelled, cut at the byte cap without splitting a character, and binary content is described only", () => {
  const out = labelResult(
    "tracker",
    "search",
    {
      content: [
        { type: "text", text: "é".repeat(10) },
        { type: "text", text: "more" },
        { type: "image", data: "AAAA", mimeType: "image/png" },
      ],
      structuredContent: { a: 1 },
    },
    7,
  );
  assert.deepEqual(out.upstream, { server: "tracker", tool: "search", trust: "untrusted" });
  assert.deepEqual(out.content[0], { type: "text", text: "ééé", truncated: true, total_bytes: 20 });
  assert.deepEqual(out.content[1], { type: "text", text: "m", truncated: true, total_bytes: 4 });
  assert.deepEqual(out.content[2], { type: "image", mime_type: "image/png", bytes: 53, omitted: true });
  assert.equal(out.structured_content, undefined);
  assert.equal(out.truncated, true);
  const small = labelResult("tracker", "search", { content: [{ type: "text", text: "ok" }], isError: true }, 100);
  assert.deepEqual(small, {
    upstream: { server: "tracker", tool: "search", trust: "untrusted" },
    content: [{ type: "text", text: "ok" }],
    bytes: 2,
    is_error: true,
  });
});

test("upstreams come from the inline setting (as the chart renders it) or a file, never both", () => {
  assert.equal(configuredUpstreams(one({}), undefined, {})[0]?.id, "tracker");
  assert.deepEqual(configuredUpstreams(undefined, undefined, {}), []);
  assert.throws(() => configuredUpstreams(one({}), "/etc/upstreams.json", {}), /not both/);
});

test("an mcp_tool call to an operator-marked read-only tool is audited as a read; any other target as an effect", () => {
  const def = toolDefinition("mcp_tool");
  const base = {
    callId: "c1",
    caller: { principal: { clientId: "acme", subject: "s" }, admissionProfile: "full" as const, scopes: [] },
    def,
    outcome: { ok: true as const, result: { content: [] } },
    normalization: undefined,
    projectCanonicalId: "",
    sessionId: "",
    startedAtUnixMs: 0,
    shape: undefined,
  };
  const read = captureCall({ ...base, readOnlyTarget: true });
  assert.equal(read.durable, false);
  assert.equal(read.captured.stateChanged, false);
  const write = captureCall({ ...base, readOnlyTarget: false });
  assert.equal(write.durable, true);
  assert.equal(write.captured.stateChanged, true);
});
