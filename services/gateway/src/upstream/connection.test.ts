import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseUpstreams } from "./config.js";
import { createUpstreamConnection, UpstreamError } from "./connection.js";

/** A minimal Streamable HTTP MCP server: initialize, then tools/call answered by `call`. */
async function fakeUpstream(call: (res: ServerResponse, id: unknown) => void) {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      if (req.method !== "POST") return res.writeHead(405).end();
      const msg = JSON.parse(body) as { id?: unknown; method: string };
      if (msg.id === undefined) return res.writeHead(202).end();
      if (msg.method === "initialize") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            id: msg.id,
            result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "fake", version: "1" } },
          }),
        );
      }
      call(res, msg.id);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const [config] = parseUpstreams(JSON.stringify({ upstreams: [{ id: "fake", url, tenants: ["t"], max_result_bytes: 1024, timeout_ms: 20_000 }] }), {});
  return { server, config: config as NonNullable<typeof config> };
}

test("upstream connection: an answer beyond the response ceiling fails as result_too_large, unread beyond it", async () => {
  let written = 0;
  const { server, config } = await fakeUpstream((res) => {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    // Far more than the 1 MiB ceiling; stops once the gateway drops the connection.
    const pump = () => {
      while (written < 64 * 1024 * 1024 && res.write(chunk)) written += chunk.byteLength;
      if (written < 64 * 1024 * 1024 && !res.destroyed) res.once("drain", pump);
    };
    pump();
  });
  const connection = createUpstreamConnection(config);
  try {
    await assert.rejects(
      connection.callTool("big", {}, new AbortController().signal),
      (e: unknown) => e instanceof UpstreamError && e.detail === "result_too_large",
    );
    assert.ok(written < 32 * 1024 * 1024, `the upstream kept writing: ${written} bytes`);
  } finally {
    await connection.close();
    server.closeAllConnections();
    server.close();
  }
});

test("upstream connection: requests still open when the connection closes are aborted, and calls after it reconnect", async () => {
  let hanging = 0;
  let dropped = 0;
  let answer = false;
  const { server, config } = await fakeUpstream((res, id) => {
    if (!answer) {
      hanging += 1;
      res.on("close", () => (dropped += 1));
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "ok" }] } }));
  });
  const connection = createUpstreamConnection(config);
  try {
    const pending = connection.callTool("hang", {}, new AbortController().signal);
    while (hanging === 0) await new Promise((r) => setTimeout(r, 10));
    const closing = connection.close();
    await assert.rejects(pending, (e: unknown) => e instanceof UpstreamError && e.sent);
    await closing;
    // The request's socket is released, not left waiting for an answer that never comes.
    for (let i = 0; i < 200 && dropped === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(dropped, 1);
    answer = true;
    for (let i = 0; i < 50; i++)
      assert.deepEqual((await connection.callTool("echo", {}, new AbortController().signal)).result.content, [{ type: "text", text: "ok" }]);
  } finally {
    await connection.close();
    server.closeAllConnections();
    server.close();
  }
});
