/** Test helpers: a real MCP SDK client over Streamable HTTP, tool-call shorthands, and a raw POST without a client. */
import { request } from "node:http";
import type { IncomingHttpHeaders } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export async function connectMcp(url: string, token: string): Promise<Client> {
  const client = new Client({ name: "webcodex-tests", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

export interface ToolOutcome {
  isError: boolean;
  result: Record<string, unknown>;
}

/** Calls a tool and returns its structured content (the model projection). */
export async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<ToolOutcome> {
  const res = await client.callTool({ name, arguments: args });
  return { isError: res.isError === true, result: (res.structuredContent ?? {}) as Record<string, unknown> };
}

/** The project_ref of the first project `list_projects` returns ("" when there is none). */
export async function firstProjectRef(client: Client): Promise<string> {
  const listed = await callTool(client, "list_projects", {});
  return ((listed.result["projects"] as Array<Record<string, string>> | undefined)?.[0] ?? {})["project_ref"] ?? "";
}

/** The read_revision `read_files` reports for one path (what a guarded edit must send). */
export async function readRevision(client: Client, project: string, path: string): Promise<string> {
  const { result } = await callTool(client, "read_files", { project, files: [{ path }] });
  return String((result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
}

/** A follow-up as a tool result carries it. */
export interface FollowUpCall {
  follow_up_kind: string;
  tool: string;
  arguments: Record<string, unknown>;
}

const listedNames = new WeakMap<Client, Promise<Set<string>>>();

/**
 * Executes a follow-up exactly as returned: its own `tool` name with its own `arguments`,
 * never re-wrapped. Like a Host that only knows tools/list, it refuses a name tools/list
 * does not show, so a follow-up a plain Host cannot run fails the test.
 */
export async function executeFollowUp(client: Client, followUp: unknown): Promise<ToolOutcome> {
  const f = followUp as FollowUpCall | undefined;
  if (!f || typeof f.tool !== "string" || typeof f.arguments !== "object") throw new Error(`not a follow-up: ${JSON.stringify(followUp)}`);
  let names = listedNames.get(client);
  if (!names) {
    names = client.listTools().then((r) => new Set(r.tools.map((t) => t.name)));
    listedNames.set(client, names);
  }
  if (!(await names).has(f.tool)) throw new Error(`follow-up names ${f.tool}, which tools/list does not show`);
  return callTool(client, f.tool, f.arguments);
}

/** The tool a follow-up finally runs, looking through call_runtime_tool (for assertions only). */
export function followUpTargetTool(followUp: unknown): string {
  const f = followUp as FollowUpCall;
  return f.tool === "call_runtime_tool" ? String(f.arguments["tool"]) : f.tool;
}

/**
 * One raw POST to an MCP endpoint (no client library in the way): JSON content and the Streamable
 * HTTP accept header, then `headers` (which may replace them); `ms` is until the whole answer.
 */
export function postMcpRaw(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string; ms: number }> {
  const u = new URL(url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "content-length": String(Buffer.byteLength(body)),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text, ms: performance.now() - started }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
