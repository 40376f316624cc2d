/**
 * The by-construction floor of an MCP gateway for `make bench mcp_gateway`: a bare MCP SDK
 * Streamable HTTP server (stateless, JSON answers, as the baseline server) whose tools/call
 * forwards the call, as it is, to one upstream over one pooled SDK client session, with no
 * authority, validation, audit or labelling. Whatever a real gateway adds is on top of this.
 * Usage: node mcp-relay-server.js <upstream URL> [port]; prints `LISTENING <port>`.
 */
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, CallToolResultSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [upstreamUrl, port = "0"] = process.argv.slice(2);
if (!upstreamUrl) throw new Error("usage: mcp-relay-server.js <upstream URL> [port]");

const upstream = new Client({ name: "bench-relay", version: "1.0.0" });
await upstream.connect(new StreamableHTTPClientTransport(new URL(upstreamUrl)));

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    void (async () => {
      const mcp = new Server({ name: "bench-relay", version: "1.0.0" }, { capabilities: { tools: {} } });
      mcp.setRequestHandler(ListToolsRequestSchema, async () => upstream.listTools());
      mcp.setRequestHandler(CallToolRequestSchema, async (call) => upstream.request({ method: "tools/call", params: call.params }, CallToolResultSchema));
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      res.on("close", () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined);
    })();
  });
});
server.listen(Number(port), "127.0.0.1", () => {
  const address = server.address() as { port: number };
  process.stdout.write(`LISTENING ${address.port}\n`);
});
