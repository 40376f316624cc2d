/**
 * The MCP plugin gateway's part of the gateway tools: `list_tools` and `read_tool_manifest`
 * with a namespace `mcp:<server>`, the namespaces a caller may use, and `mcp_tool`.
 *
 * Authority, in order, before anything is sent upstream: the server is visible to the caller's
 * tenant (and subject list) or indistinguishable from a missing one; the tool passes the
 * operator's allow/deny lists; a read-only caller (read_only admission, or no write scope) may
 * call only tools the operator marked read-only; a project-bound server takes only its Project;
 * the binding's schema_hash matches the upstream's current schema; the arguments validate
 * against that schema; the upstream's own concurrency and rate budget has room.
 *
 * Every path to an upstream goes through these checks; whose credential a request carries is
 * ./access.ts, the failures ./failures.ts.
 */
import type { Client } from "@connectrpc/connect";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import type { RefResolverService } from "@webcodex/proto";
import { failureFromWire, PipelineStage, ReasonCode, toolFailure, toolLimit } from "@webcodex/contracts";
import type { Result, ToolInput } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { HttpHandler, Logger } from "@webcodex/platform";
import type { Caller } from "../auth.js";
import { hasScope, WebcodexScope } from "../auth/scopes.js";
import type { CallContext, Outcome } from "../call-context.js";
import type { UpstreamServer } from "./config.js";
import { createUpstreamAccess } from "./access.js";
import type { CallCredential } from "./access.js";
import { createUpstreamConnection } from "./connection.js";
import type { UpstreamConnection, UpstreamTool } from "./connection.js";
import { fail, isOutcome, missingTool, unavailable, unknownNamespace } from "./failures.js";
import { createUpstreamLimiter } from "./limiter.js";
import type { UpstreamLimiter } from "./limiter.js";
import { labelResult } from "./results.js";
import type { UpstreamOAuthClient } from "./oauth.js";

export interface UpstreamToolsDeps {
  upstreams: readonly UpstreamServer[];
  refResolver: Client<typeof RefResolverService>;
  logger: Logger;
  /** Per-user OAuth (required when a server's auth mode is oauth). */
  oauth?: UpstreamOAuthClient;
}

type Entry = { server: UpstreamServer; connection: UpstreamConnection; limiter: UpstreamLimiter };
/** A discovery tool's arguments with the namespace given (the gateway's own catalog answers a call without one). */
type Namespaced<A> = A & { namespace: string };

const NAMESPACE = /^mcp:([a-z0-9][a-z0-9_-]{0,62})$/;
const DESCRIPTION_MAX = 1024;

/** Whether the caller may only call tools the operator marked read-only. */
export function readOnlyCaller(caller: Caller): boolean {
  return caller.admissionProfile === "read_only" || !hasScope(caller.scopes, WebcodexScope.write);
}

export function createUpstreamTools(deps: UpstreamToolsDeps) {
  const servers = new Map<string, Entry>();
  if (!deps.oauth && deps.upstreams.some((s) => s.auth.mode === "oauth"))
    throw new Error("an upstream uses auth.mode oauth but per-user OAuth is not configured");
  const access = createUpstreamAccess({ logger: deps.logger, oauth: deps.oauth });
  for (const server of deps.upstreams)
    servers.set(server.id, {
      server,
      connection: createUpstreamConnection(server),
      limiter: createUpstreamLimiter({ maxConcurrency: server.maxConcurrency, queueTimeoutMs: server.queueTimeoutMs, ratePerMinute: server.ratePerMinute }),
    });
  const validator = new AjvJsonSchemaValidator();
  const validators = new Map<string, JsonSchemaValidator<unknown>>();

  const visible = (server: UpstreamServer, caller: Caller) =>
    server.tenants.includes(caller.principal.clientId) && (server.subjects.length === 0 || server.subjects.includes(caller.principal.subject));
  const allowed = (server: UpstreamServer, tool: string, tenant: string) => {
    if (server.denyTools.includes(tool) || (server.allowTools.length > 0 && !server.allowTools.includes(tool))) return false;
    const lists = server.tenantTools[tenant];
    return !lists || (!lists.denyTools.includes(tool) && (lists.allowTools.length === 0 || lists.allowTools.includes(tool)));
  };

  /** Runs `use` on the connection this caller reaches `entry` through (./access.ts). */
  const through = <T>(entry: Entry, caller: Caller, tool: string | undefined, use: (c: UpstreamConnection) => Promise<T>, held?: CallCredential) =>
    access.through(entry.server, entry.connection, caller, tool, use, held);

  function serverFor(caller: Caller, id: string | undefined) {
    const entry = id === undefined ? undefined : servers.get(id);
    return entry && visible(entry.server, caller) ? entry : undefined;
  }

  function namespaceServer(caller: Caller, namespace: string) {
    const m = NAMESPACE.exec(namespace);
    return serverFor(caller, m?.[1]);
  }

  /** The namespaces `caller` may use (no upstream is contacted). */
  function namespaces(caller: Caller): Array<Record<string, unknown>> {
    return [...servers.values()]
      .filter((s) => visible(s.server, caller))
      .map(({ server }) => ({ namespace: `mcp:${server.id}`, ...(server.project ? { project: server.project } : {}) }));
  }

  async function toolsOf(entry: Entry, caller: Caller, tool: string | undefined, fresh = false, held?: CallCredential): Promise<UpstreamTool[] | Outcome> {
    try {
      const tools = await through(entry, caller, tool, (c) => c.tools(fresh), held);
      if (isOutcome(tools)) return tools;
      return tools.filter((t) => allowed(entry.server, t.name, caller.principal.clientId));
    } catch (error) {
      return unavailable(entry.server, error, false);
    }
  }

  const listed = (server: UpstreamServer, t: UpstreamTool) => ({
    name: t.name,
    description: t.description.slice(0, DESCRIPTION_MAX),
    ...(t.annotations ? { annotations: t.annotations } : {}),
    ...(server.readOnlyTools.includes(t.name) ? { read_only: true } : {}),
  });

  /** list_tools {namespace, cursor?}: one page within the catalog budget. */
  async function listTools(args: Namespaced<ToolInput<"list_tools">>, ctx: CallContext): Promise<Outcome> {
    const { namespace, cursor } = args;
    const entry = namespaceServer(ctx.caller, namespace);
    if (!entry) return unknownNamespace("/namespace");
    const tools = await toolsOf(entry, ctx.caller, undefined);
    if (!Array.isArray(tools)) return tools;
    const start = cursor === undefined ? 0 : /^[0-9]{1,6}$/.test(cursor) ? Number(cursor) : -1;
    if (start < 0 || start > tools.length)
      return fail(ReasonCode.invalidValue, PipelineStage.normalization, { detail_code: "unknown_cursor", evidence: { field: "/cursor" } });
    const budget = toolLimit("list_tools", "catalog_budget_bytes");
    const page: Array<Record<string, unknown>> = [];
    let used = 0;
    let i = start;
    for (; i < tools.length; i++) {
      const item = listed(entry.server, tools[i] as UpstreamTool);
      const size = Buffer.byteLength(JSON.stringify(item));
      if (page.length > 0 && used + size > budget) break;
      page.push(item);
      used += size;
    }
    const result: Record<string, unknown> = { namespace, upstream: { server: entry.server.id, trust: "untrusted" }, tools: page };
    if (i < tools.length) {
      result["omitted"] = tools.length - i;
      result["next_cursor"] = String(i);
    }
    return { ok: true, result };
  }

  function binding(server: UpstreamServer, t: UpstreamTool) {
    return { server: server.id, tool: t.name, schema_hash: t.schemaHash, ...(server.project ? { project: server.project } : {}) };
  }

  function description(server: UpstreamServer, t: UpstreamTool): Record<string, unknown> {
    return {
      namespace: `mcp:${server.id}`,
      tool: t.name,
      description: t.description.slice(0, DESCRIPTION_MAX),
      input_schema: t.inputSchema,
      ...(t.annotations ? { annotations: t.annotations } : {}),
      ...(server.readOnlyTools.includes(t.name) ? { read_only: true } : {}),
      binding: binding(server, t),
    };
  }

  /** read_tool_manifest {namespace, tool}: the input schema and the binding mcp_tool takes. */
  async function readManifest(args: Namespaced<ToolInput<"read_tool_manifest">>, ctx: CallContext): Promise<Outcome> {
    const entry = namespaceServer(ctx.caller, args.namespace);
    if (!entry) return unknownNamespace("/namespace");
    const tools = await toolsOf(entry, ctx.caller, args.tool);
    if (!Array.isArray(tools)) return tools;
    const t = tools.find((x) => x.name === args.tool);
    if (!t) return missingTool(entry.server);
    return { ok: true, result: description(entry.server, t) };
  }

  async function resolveProject(selector: string, ctx: CallContext): Promise<Result<{ canonicalId: string }>> {
    const resolved = await deps.refResolver.resolveProject(
      { selector, recordUse: true },
      { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
    );
    if (resolved.failure || !resolved.project)
      return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution) };
    ctx.projectCanonicalId = resolved.project.canonicalId;
    return { ok: true, canonicalId: resolved.project.canonicalId };
  }

  /** mcp_tool {binding | server + tool, arguments, project?}. */
  async function callTool(args: ToolInput<"mcp_tool">, ctx: CallContext): Promise<Outcome> {
    // The Project first, as every tool resolves it: a foreign or unknown one is project_not_found.
    const selector = args.project;
    let canonicalProject: string | undefined;
    if (selector !== undefined) {
      const resolved = await resolveProject(selector, ctx);
      if (!resolved.ok) return { ok: false, failure: resolved.failure };
      canonicalProject = resolved.canonicalId;
    }
    const bound = args.binding;
    const named = args.server !== undefined && args.tool !== undefined ? { server: args.server, tool: args.tool } : undefined;
    const address = bound ?? named;
    if ((bound !== undefined) === (args.server !== undefined || args.tool !== undefined) || address === undefined)
      return fail(ReasonCode.invalidValue, PipelineStage.normalization, {
        detail_code: "binding_or_server_tool",
        evidence: { field: "/binding" },
        message: "Give either binding (from read_tool_manifest) or both server and tool.",
      });
    const { server: serverId, tool: toolName } = address;
    const entry = serverFor(ctx.caller, serverId);
    if (!entry) return unknownNamespace(bound ? "/binding/server" : "/server");
    const { server } = entry;
    if (!allowed(server, toolName, ctx.caller.principal.clientId)) return missingTool(server);
    // An operator-marked read-only tool changes nothing: its call is audited as a read.
    ctx.readOnlyTarget = server.readOnlyTools.includes(toolName);
    if (readOnlyCaller(ctx.caller) && !server.readOnlyTools.includes(toolName))
      return fail(ReasonCode.toolNotAdmitted, PipelineStage.admission, {
        detail_code: "upstream_tool_not_read_only",
        evidence: { server: server.id, tool: toolName },
        message: "You may call only upstream tools the operator marked read-only; this one is not.",
      });
    const mismatch = (evidence: Record<string, unknown>): Outcome =>
      fail(ReasonCode.bindingProjectMismatch, PipelineStage.authorization, {
        // The evidence names the tool: the failure carries its fresh description as follow-up.
        evidence: { server: server.id, tool: toolName, ...evidence },
        message: `Upstream ${server.id} is bound to one Project; this call names another. Nothing was sent.`,
      });
    if (bound?.project !== undefined && bound.project !== server.project) return mismatch({ binding_project: bound.project });
    if (canonicalProject !== undefined) {
      if (server.project !== undefined && canonicalProject !== server.project) return mismatch({ project: canonicalProject });
    } else if (server.project !== undefined) return mismatch({ field: "/project" });

    // The schema the arguments are checked against; a binding newer than the cache refetches once.
    // One read of the caller's credential (OAuth servers) for the schema and the call.
    const held: CallCredential = {};
    let tools = await toolsOf(entry, ctx.caller, toolName, false, held);
    if (!Array.isArray(tools)) return tools;
    let target = tools.find((t) => t.name === toolName);
    if (bound && target?.schemaHash !== bound.schema_hash) {
      tools = await toolsOf(entry, ctx.caller, toolName, true, held);
      if (!Array.isArray(tools)) return tools;
      target = tools.find((t) => t.name === toolName);
    }
    if (!target) return missingTool(server);
    if (bound && target.schemaHash !== bound.schema_hash)
      return fail(ReasonCode.upstreamSchemaChanged, PipelineStage.authorization, {
        evidence: { server: server.id, tool: toolName, schema_hash: target.schemaHash },
        message: "The upstream tool's input schema changed since this binding was described; nothing was sent. Read the fresh description.",
      });
    let validate = validators.get(target.schemaHash);
    if (!validate) {
      try {
        validate = validator.getValidator(target.inputSchema as Parameters<typeof validator.getValidator>[0]);
      } catch {
        return fail(ReasonCode.invalidValue, PipelineStage.normalization, {
          detail_code: "upstream_schema_unusable",
          evidence: { server: server.id, tool: toolName },
          message: "The upstream tool's input schema cannot be checked; nothing was sent.",
        });
      }
      validators.set(target.schemaHash, validate);
    }
    const callArgs = args.arguments;
    const verdict = validate(callArgs);
    if (!verdict.valid)
      return fail(ReasonCode.invalidValue, PipelineStage.normalization, {
        detail_code: "upstream_schema",
        evidence: { field: "/arguments", violation: verdict.errorMessage.slice(0, 300) },
        message: "The arguments do not match the upstream tool's input schema; nothing was sent.",
      });

    const slot = await entry.limiter.acquire(ctx.signal);
    if (!slot.ok)
      return fail(ReasonCode.rateLimited, PipelineStage.dispatch, {
        detail_code: `upstream_${slot.reason}`,
        evidence: { server: server.id, retry_after_ms: slot.retryAfterMs },
        message: `Upstream ${server.id} is at its call limit; nothing was sent.`,
      });
    const started = Date.now();
    let outcome: Outcome;
    let requestBytes = 0;
    let responseBytes = 0;
    try {
      requestBytes = Buffer.byteLength(JSON.stringify({ name: toolName, arguments: callArgs }));
      const called = await through(entry, ctx.caller, toolName, (c) => c.callTool(toolName, callArgs, ctx.signal), held);
      if (isOutcome(called)) outcome = called;
      else {
        const labelled = labelResult(server.id, toolName, called.result, server.maxResultBytes);
        responseBytes = labelled.bytes;
        outcome = { ok: true, result: labelled };
      }
    } catch (error) {
      // Sent without an answer: unknown, whatever the tool's marks (the upstream decides what it did).
      outcome = unavailable(server, error, true);
    } finally {
      slot.release();
    }
    // The upstream facts of the call, for its ActionAudit row and the log (never arguments or results).
    ctx.upstreamCall = { server: server.id, tool: toolName, requestBytes, responseBytes };
    deps.logger.info("mcp upstream call", {
      server: server.id,
      tool: toolName,
      client_id: ctx.caller.principal.clientId,
      outcome: outcome.ok ? "success" : outcome.failure.reason_code,
      outcome_unknown: !outcome.ok && outcome.failure.outcome_unknown,
      request_bytes: requestBytes,
      response_bytes: responseBytes,
      duration_ms: Date.now() - started,
    });
    return outcome;
  }

  async function close(): Promise<void> {
    await Promise.all([...servers.values()].map((s) => s.connection.close()));
    await access.close();
  }

  /** POST /mcp-upstream/oauth/revoke?server=<id>: see ./access.ts. */
  const revokeHandler = (authenticate: (token: string | undefined) => Promise<Caller | undefined>): HttpHandler =>
    access.revokeHandler(authenticate, (caller, id) => serverFor(caller, id)?.server);

  return {
    namespaces,
    listTools,
    readManifest,
    callTool,
    close,
    revokeHandler,
    servers: new Map([...servers].map(([id, e]) => [id, e.server])),
    enabled: servers.size > 0,
  };
}

export type UpstreamTools = ReturnType<typeof createUpstreamTools>;
