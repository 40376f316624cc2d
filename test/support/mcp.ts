/** Test helpers: a real MCP SDK client over Streamable HTTP, and tool-call shorthands. */
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
