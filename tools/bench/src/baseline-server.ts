/**
 * The baseline of the tool-call benchmark: a bare MCP SDK Streamable HTTP server that reads
 * the file itself, built the SDK's stateless way (no session id generator; a new server and transport per
 * request).
 * With a Postgres URL and a channel, it also has a baseline of the agent_events benchmark: a
 * tool `wait_event` that answers with the payload of the next NOTIFY on that channel heard by its
 * one LISTENing connection (a bare MCP server woken by a committed event).
 * Usage: node baseline-server.js <root> <port> [<postgres url> <channel>]
 */
import http from "node:http";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import pg from "pg";
import { z } from "zod";

const [root = ".", port = "0", postgresUrl, channel = ""] = process.argv.slice(2);
/** Calls of wait_event waiting for the next notification. */
const waiting: Array<(payload: string) => void> = [];
if (postgresUrl) {
  const listener = new pg.Client({ connectionString: postgresUrl });
  await listener.connect();
  listener.on("notification", (n) => {
    if (n.channel === channel) for (const wake of waiting.splice(0)) wake(n.payload ?? "");
  });
  await listener.query(`LISTEN ${channel}`);
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    void (async () => {
      const mcp = new McpServer({ name: "bare", version: "1.0.0" });
      mcp.registerTool("read_file", { description: "Read a file", inputSchema: { path: z.string() } }, async ({ path }) => ({
        content: [{ type: "text", text: await readFile(join(root, path), "utf8") }],
      }));
      if (postgresUrl) {
        mcp.registerTool("wait_event", { description: "Wait for the next event" }, async () => ({
          content: [{ type: "text", text: await new Promise<string>((resolve) => waiting.push(resolve)) }],
        }));
      }
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
