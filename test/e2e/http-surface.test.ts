/**
 * The HTTP surface of `webcodex dev`: bearer auth, DNS-rebinding protection, stateless
 * Streamable HTTP rules, health endpoints.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createProjectDir, postMcpRaw, startDevServer, tempDir } from "../support/index.js";
import type { DevServer } from "../support/index.js";

const post = (url: string, headers: Record<string, string>, body: unknown) => postMcpRaw(url, headers, JSON.stringify(body));

describe("HTTP surface of the MCP endpoint", () => {
  let server: DevServer;
  const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
  before(async () => {
    server = await startDevServer({ projectDir: createProjectDir({ "README.md": "x\n" }), dataDir: tempDir("wcx-data-") });
  });
  after(async () => server?.stop());

  it("a missing or wrong token gets 401 with WWW-Authenticate: Bearer and resource metadata", async () => {
    for (const headers of [{}, { authorization: "Bearer wrong-token-000000000000" }]) {
      const res = await post(server.mcpUrl, headers, list);
      assert.equal(res.status, 401);
      assert.match(
        String(res.headers["www-authenticate"]),
        /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/,
      );
    }
    const meta = await fetch(`${server.baseUrl}/.well-known/oauth-protected-resource/mcp`);
    assert.equal(((await meta.json()) as Record<string, unknown>)["resource"], server.mcpUrl);
  });

  it("a foreign Host header or Origin is refused (DNS rebinding)", async () => {
    const auth = { authorization: `Bearer ${server.token}` };
    assert.equal((await post(server.mcpUrl, { ...auth, host: "evil.example:80" }, list)).status, 403);
    assert.equal((await post(server.mcpUrl, { ...auth, origin: "http://evil.example" }, list)).status, 403);
    assert.equal((await post(server.mcpUrl, auth, list)).status, 200);
  });

  it("is stateless: GET is 405, notifications get 202, a bad Accept gets 406, bad JSON a parse error", async () => {
    const auth = { authorization: `Bearer ${server.token}` };
    const get = await fetch(server.mcpUrl, { headers: { ...auth, accept: "text/event-stream" } });
    assert.equal(get.status, 405);
    assert.equal((await post(server.mcpUrl, auth, { jsonrpc: "2.0", method: "notifications/initialized" })).status, 202);
    assert.equal((await post(server.mcpUrl, { ...auth, accept: "application/json" }, list)).status, 406);
    const bad = (await postMcpRaw(server.mcpUrl, auth, "{not json")).status;
    assert.equal(bad, 400);
  });

  it("answers health, readiness and metrics without a token", async () => {
    assert.equal((await fetch(`${server.baseUrl}/healthz`)).status, 200);
    const ready = await fetch(`${server.baseUrl}/readyz`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    assert.match(metrics, /process_resident_memory_bytes/);
    // The memory breakdown an operator reads to tell a JavaScript leak from the embedded
    // Postgres's WebAssembly memory (a PGlite instance starts at 128 MiB; it only grows).
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
    for (const name of ["nodejs_heap_used_bytes", "nodejs_heap_total_bytes", "nodejs_external_memory_bytes", "nodejs_array_buffers_bytes"])
      assert.ok(gauge(name) > 0, `${name} is reported`);
    assert.ok(gauge("nodejs_heap_used_bytes") <= gauge("nodejs_heap_total_bytes"));
    assert.ok(gauge("webcodex_pglite_wasm_memory_bytes") >= 128 * 1024 * 1024, "the embedded Postgres's WebAssembly memory is reported");
    assert.ok(gauge("webcodex_pglite_worker_heap_used_bytes") > 0);
  });
});
