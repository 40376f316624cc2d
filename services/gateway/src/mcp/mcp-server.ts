/**
 * The one MCP SDK Server of a gateway process, connected to the multiplexing transport.
 * tools/list serves the pre-serialized Direct catalog of the caller's admission; tools/call
 * runs the pipeline.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import type { HostProfile } from "@webcodex/contracts";
import type { Caller } from "../auth.js";
import type { CatalogCache } from "../catalog-cache.js";
import type { Pipeline } from "../pipeline.js";
import { MultiplexTransport } from "./multiplex-transport.js";

export const SERVER_INSTRUCTIONS =
  "WebCodex gives you tools for project workspaces. Start with list_projects and pass its project_ref (~p1) as `project`. " +
  "Read with read_files (batch related ranges), search with search_project_texts (several queries per call), edit with edit_project_files " +
  "using the read_revision you read. Tools not listed directly are reached through read_tool_manifest and call_runtime_tool. " +
  "Failures carry reason_code and, when a retry is provable, a follow_up you can run unchanged.";

function callerOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): Caller {
  const caller = extra.authInfo?.extra?.["caller"] as Caller | undefined;
  if (!caller) throw new McpError(ErrorCode.InvalidRequest, "unauthenticated");
  return caller;
}

export async function createMcpServer(deps: { pipeline: Pipeline; catalogs: CatalogCache; hostProfile: HostProfile; version: string }): Promise<MultiplexTransport> {
  const server = new Server({ name: "webcodex", version: deps.version }, { capabilities: { tools: { listChanged: false } }, instructions: SERVER_INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, async (_req, extra) => {
    const caller = callerOf(extra);
    const catalog = await deps.catalogs.get(caller.admissionProfile, deps.hostProfile);
    return catalog.toolsListResult as { tools: [] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const caller = callerOf(extra);
    const result = await deps.pipeline.call(caller, req.params.name, req.params.arguments ?? {}, extra.signal);
    return {
      content: [{ type: "text" as const, text: JSON.stringify(result.structuredContent) }],
      structuredContent: result.structuredContent,
      ...(result.isError ? { isError: true } : {}),
    };
  });
  const transport = new MultiplexTransport();
  await server.connect(transport);
  return transport;
}
