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
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { gatewayToolsInstruction, toolDefinitions } from "@webcodex/contracts";
import type { HostProfile } from "@webcodex/contracts";
import type { Caller } from "../auth.js";
import type { CatalogCache } from "../catalog-cache.js";
import type { Pipeline } from "../pipeline.js";
import { MultiplexTransport } from "./multiplex-transport.js";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";
import type { AppResource } from "./app-resources.js";
import { resourceReadResult, resourcesListResult } from "./app-resources.js";

const INSTRUCTIONS_HEAD =
  "WebCodex gives you tools for project workspaces. Start with list_projects and pass its project_ref (~p1) as `project`. " +
  "Read with read_files (batch related ranges), search with search_project_texts (several queries per call), edit with edit_project_files " +
  "using the read_revision you read. More tools run through call_runtime_tool; read_tool_manifest gives their schemas. " +
  "Failures carry reason_code and, when a retry is provable, a follow_up you can run unchanged. ";

/** The bootstrap guidance a Host that selects Code Mode gets (the code_mode Host profile). */
const CODE_MODE_GUIDANCE =
  " Code Mode: for an inspection of several dependent reads, write one run_code_cell (its API: read_tool_manifest); " +
  "keep intermediate results in the cell and text() compact evidence. Edit, run and validate outside cells.";

/** The spec's ceiling for bootstrap guidance, in characters. */
export const BOOTSTRAP_INSTRUCTIONS_MAX_CHARS = 1536;

/** The server instructions for a Host profile: Code Mode guidance only where the profile selects it. */
export function serverInstructions(hostProfile: HostProfile): string {
  const base = INSTRUCTIONS_HEAD + gatewayToolsInstruction(toolDefinitions(), hostProfile);
  return hostProfile === "code_mode" ? base + CODE_MODE_GUIDANCE : base;
}

export const SERVER_INSTRUCTIONS = serverInstructions("generic");

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
      instructions: serverInstructions(deps.hostProfile),
    },
  );
  const transport = new MultiplexTransport();
  // Constant answers, built once: no per-request work on these paths.
  const noResources = { resources: [] };
  const noResourceTemplates = { resourceTemplates: [] };
  const noPrompts = { prompts: [] };
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
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
    const catalog = await deps.catalogs.get(caller.admissionProfile, caller.hostProfile ?? deps.hostProfile);
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
      result = await deps.pipeline.call(caller, req.params.name, req.params.arguments ?? {}, extra.signal);
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
