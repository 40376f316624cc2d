/**
 * The one MCP SDK Server of a gateway process, connected to the multiplexing transport.
 * tools/list serves the pre-serialized Direct catalog of the caller's admission; tools/call
 * runs the pipeline. The logging, resources and prompts capabilities are declared so Hosts
 * and the conformance suite can probe them. Resources are the MCP App cards, listed and read
 * only for App Hosts (a Host that declared `io.modelcontextprotocol/ui`, or whose token names
 * the app profile); WebCodex offers no prompts and sends no log notifications.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { InitializeRequest, InitializeResult } from "@modelcontextprotocol/sdk/types.js";
import { gatewayToolsInstruction, SKILLS_BOOTSTRAP_HINT, toolDefinitions } from "@webcodex/contracts";
import type { HostProfile } from "@webcodex/contracts";
import type { Caller } from "../auth.js";
import type { CatalogCache } from "../catalog-cache.js";
import type { Pipeline } from "../pipeline.js";
import { MultiplexTransport } from "./multiplex-transport.js";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";
import type { AppResource } from "./app-resources.js";
import { resourceReadResult, resourcesListResult } from "./app-resources.js";

/** The server instructions, naming no tool the operator's tool policy withholds from this caller. */
export function serverInstructions(withheld?: ReadonlySet<string>): string {
  return (
    "WebCodex gives you tools for project workspaces. Start with list_projects and pass its project_ref (~p1) as `project`. " +
    "Read with read_files (batch related ranges), search with search_project_texts (several queries per call), edit with edit_project_files " +
    "using the read_revision you read. More tools run through call_runtime_tool; read_tool_manifest gives their schemas. " +
    "Failures carry reason_code and, when a retry is provable, a follow_up you can run unchanged. " +
    `${SKILLS_BOOTSTRAP_HINT} ` +
    gatewayToolsInstruction(withheld ? toolDefinitions().filter((d) => !withheld.has(d.name)) : toolDefinitions())
  );
}

export const SERVER_INSTRUCTIONS = serverInstructions();

const PROGRESS_INTERVAL_MS = 1_000;

function callerOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): Caller {
  const caller = extra.authInfo?.extra?.["caller"] as Caller | undefined;
  if (!caller) throw new McpError(ErrorCode.InvalidRequest, "unauthenticated");
  return caller;
}

export async function createMcpServer(deps: {
  pipeline: Pipeline;
  catalogs: CatalogCache;
  hostProfile: HostProfile;
  version: string;
  appResources: ReadonlyMap<string, AppResource>;
}): Promise<MultiplexTransport> {
  const server = new Server(
    { name: "webcodex", version: deps.version },
    {
      capabilities: { tools: { listChanged: false }, logging: {}, resources: {}, prompts: {}, extensions: { [EXTENSION_ID]: {} } },
      instructions: SERVER_INSTRUCTIONS,
    },
  );
  const transport = new MultiplexTransport();
  // Constant answers, built once: no per-request work on these paths.
  const noResources = { resources: [] };
  const noResourceTemplates = { resourceTemplates: [] };
  const noPrompts = { prompts: [] };
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  // The SDK's own initialize answer, with instructions that name only tools this caller has.
  const initialize = (server as unknown as { _oninitialize(req: InitializeRequest): Promise<InitializeResult> })._oninitialize.bind(server);
  server.setRequestHandler(InitializeRequestSchema, async (req, extra) => {
    const result = await initialize(req);
    const caller = extra.authInfo?.extra?.["caller"] as Caller | undefined;
    if (!caller) return result;
    // The registry unreachable: initialize still answers; tools/list and calls fail closed on their own.
    const host = caller.hostProfile ?? deps.hostProfile;
    const catalog = await (deps.catalogs.fresh ? deps.catalogs.fresh(caller, host) : deps.catalogs.get(caller, host)).catch(() => undefined);
    return catalog?.withheld ? { ...result, instructions: serverInstructions(catalog.withheld) } : result;
  });
  const appResources = resourcesListResult(deps.appResources);
  const isApp = (caller: Caller) => (caller.hostProfile ?? deps.hostProfile) === "app";
  server.setRequestHandler(ListResourcesRequestSchema, async (_req, extra) => (isApp(callerOf(extra)) ? appResources : noResources));
  server.setRequestHandler(ReadResourceRequestSchema, async (req, extra) => {
    const resource = isApp(callerOf(extra)) ? deps.appResources.get(req.params.uri) : undefined;
    if (!resource) throw new McpError(-32002, "Resource not found", { uri: req.params.uri });
    return resourceReadResult(resource);
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => noResourceTemplates);
  server.setRequestHandler(ListPromptsRequestSchema, async () => noPrompts);
  server.setRequestHandler(ListToolsRequestSchema, async (_req, extra) => {
    const caller = callerOf(extra);
    const catalog = await deps.catalogs.get(caller, caller.hostProfile ?? deps.hostProfile);
    return catalog.toolsListResult as { tools: [] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const caller = callerOf(extra);
    const progressToken = req.params._meta?.progressToken;
    // While a Host waits with a progressToken, report elapsed time every second; the total is
    // unknown, so none is claimed.
    const started = Date.now();
    const heartbeat =
      progressToken === undefined
        ? undefined
        : setInterval(() => {
            const elapsed = Math.round((Date.now() - started) / 1000);
            void extra
              .sendNotification({ method: "notifications/progress", params: { progressToken, progress: elapsed, message: `running for ${elapsed} s` } })
              .catch(() => undefined);
          }, PROGRESS_INTERVAL_MS);
    let result;
    try {
      const requestId = transport.clientRequestId(Number(extra.requestId));
      const facts = { ...(requestId !== undefined ? { requestId } : {}), ...(req.params._meta ? { meta: req.params._meta } : {}) };
      result = await deps.pipeline.call(caller, req.params.name, req.params.arguments ?? {}, extra.signal, facts);
    } finally {
      if (heartbeat) clearInterval(heartbeat);
    }
    if (result.delivered) transport.whenDelivered(Number(extra.requestId), result.delivered);
    return {
      content: [{ type: "text" as const, text: result.text ?? JSON.stringify(result.structuredContent) }],
      structuredContent: result.structuredContent,
      ...(result.isError ? { isError: true } : {}),
    };
  });
  await server.connect(transport);
  return transport;
}
