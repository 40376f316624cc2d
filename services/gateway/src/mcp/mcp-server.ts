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
import { admittedTools, serverInstructions, toolDefinition } from "@webcodex/contracts";
import type { AdmissionProfile, HostProfile } from "@webcodex/contracts";
import type { Caller } from "../auth.js";
import type { CatalogCache } from "../catalog-cache.js";
import type { Pipeline } from "../pipeline.js";
import { MultiplexTransport } from "./multiplex-transport.js";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";
import type { AppResource } from "./app-resources.js";
import { resourceReadResult, resourcesListResult } from "./app-resources.js";

/**
 * The server instructions for an admission and Host profile: only tools that caller may use are
 * named, less any the operator's tool policy withholds from it.
 */
export function instructionsFor(admissionProfile: AdmissionProfile, hostProfile: HostProfile, withheld?: ReadonlySet<string>): string {
  const admitted = admittedTools({ admissionProfile, hostProfile });
  return serverInstructions(withheld ? admitted.filter((d) => !withheld.has(d.name)) : admitted, hostProfile);
}
/** The instructions a full-admission generic caller gets. */
export const SERVER_INSTRUCTIONS = instructionsFor("full", "generic");

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
      instructions: instructionsFor("full", deps.hostProfile),
    },
  );
  const transport = new MultiplexTransport();
  // initialize answers as the SDK does, with instructions that name only tools this caller has
  // (its admission and Host profile, less what the tool policy withholds from it).
  const sdkInitialize = (server as unknown as { _oninitialize(req: InitializeRequest): Promise<InitializeResult> })._oninitialize.bind(server);
  server.setRequestHandler(InitializeRequestSchema, async (req, extra) => {
    const result = await sdkInitialize(req);
    const caller = extra.authInfo?.extra?.["caller"] as Caller | undefined;
    if (!caller) return result;
    const host = caller.hostProfile ?? deps.hostProfile;
    // The registry unreachable: initialize still answers; tools/list and calls fail closed on their own.
    const catalog = await (deps.catalogs.fresh ? deps.catalogs.fresh(caller, host) : deps.catalogs.get(caller, host)).catch(() => undefined);
    return { ...result, instructions: instructionsFor(caller.admissionProfile, host, catalog?.withheld) };
  });
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
      const sessionId = extra.authInfo?.extra?.["sessionId"];
      const facts = {
        ...(requestId !== undefined ? { requestId } : {}),
        ...(req.params._meta ? { meta: req.params._meta } : {}),
        ...(typeof sessionId === "string" ? { sessionId } : {}),
      };
      result = await deps.pipeline.call(caller, req.params.name, req.params.arguments ?? {}, extra.signal, facts);
    } finally {
      if (heartbeat) clearInterval(heartbeat);
    }
    if (result.delivered) transport.whenDelivered(Number(extra.requestId), result.delivered);
    return {
      content: [{ type: "text" as const, text: result.text ?? textContent(req.params.name, result) }],
      structuredContent: result.structuredContent,
      ...(result.isError ? { isError: true } : {}),
    };
  });
  await server.connect(transport);
  return transport;
}

/**
 * The text content of a result: the tool's compact rendering of a success when it has one
 * (the same facts as structuredContent, not a second copy of its JSON), else that JSON.
 */
function textContent(tool: string, result: { structuredContent: Record<string, unknown>; isError: boolean }): string {
  const render = result.isError ? undefined : toolDefinition(tool)?.textContent;
  return render ? render(result.structuredContent) : JSON.stringify(result.structuredContent);
}
