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
 */
import type { Client } from "@connectrpc/connect";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import type { RefResolverService } from "@webcodex/proto";
import { failureFromWire, PipelineStage, ReasonCode, toolFailure, toolLimit } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { Caller } from "../auth.js";
import { hasScope, WebcodexScope } from "../auth/scopes.js";
import type { CallContext, Outcome } from "../call-context.js";
import type { UpstreamServer } from "./config.js";
import { createUpstreamConnection, UpstreamError } from "./connection.js";
import type { UpstreamConnection, UpstreamTool } from "./connection.js";
import { createUpstreamLimiter } from "./limiter.js";
import type { UpstreamLimiter } from "./limiter.js";
import { labelResult } from "./results.js";

export interface UpstreamToolsDeps {
  upstreams: readonly UpstreamServer[];
  refResolver: Client<typeof RefResolverService>;
  logger: Logger;
}

const NAMESPACE = /^mcp:([a-z0-9][a-z0-9_-]{0,62})$/;
const DESCRIPTION_MAX = 1024;

const fail = (reason: ReasonCode, stage: PipelineStage, options: Parameters<typeof toolFailure>[2]): Outcome => ({
  ok: false,
  failure: toolFailure(reason, stage, options),
});

const unknownNamespace = (field: string): Outcome =>
  fail(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "unknown_namespace",
    evidence: { field },
    message: "No upstream MCP server of this name is available to you; list_tools names the namespaces you may use.",
  });

/** Whether the caller may only call tools the operator marked read-only. */
export function readOnlyCaller(caller: Caller): boolean {
  return caller.admissionProfile === "read_only" || !hasScope(caller.scopes, WebcodexScope.write);
}

export function createUpstreamTools(deps: UpstreamToolsDeps) {
  const servers = new Map<string, { server: UpstreamServer; connection: UpstreamConnection; limiter: UpstreamLimiter }>();
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
  const allowed = (server: UpstreamServer, tool: string) =>
    !server.denyTools.includes(tool) && (server.allowTools.length === 0 || server.allowTools.includes(tool));

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

  function unavailable(server: UpstreamServer, error: unknown, effectful: boolean): Outcome {
    const e = error instanceof UpstreamError ? error : new UpstreamError("connection_lost", true, "the upstream call failed");
    if (e.detail === "rejected")
      return fail(ReasonCode.invalidValue, PipelineStage.execution, {
        detail_code: "upstream_rejected",
        evidence: { server: server.id, upstream_error_code: e.upstreamCode ?? 0 },
        message: "The upstream server answered with a protocol error and did not run the call.",
      });
    const unknown = effectful && e.sent;
    return fail(ReasonCode.upstreamUnavailable, PipelineStage.dispatch, {
      detail_code: e.detail,
      outcome_unknown: unknown,
      evidence: { server: server.id },
      message: `Upstream ${server.id}: ${e.message}; ${unknown ? "the call was sent and its effect is unknown: it is not re-sent" : "nothing was run"}.`,
    });
  }

  async function toolsOf(entry: { server: UpstreamServer; connection: UpstreamConnection }, fresh = false): Promise<UpstreamTool[] | Outcome> {
    try {
      return (await entry.connection.tools(fresh)).filter((t) => allowed(entry.server, t.name));
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
  async function listTools(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const namespace = args["namespace"] as string;
    const entry = namespaceServer(ctx.caller, namespace);
    if (!entry) return unknownNamespace("/namespace");
    const tools = await toolsOf(entry);
    if (!Array.isArray(tools)) return tools;
    const cursor = args["cursor"];
    const start = cursor === undefined ? 0 : /^[0-9]{1,6}$/.test(String(cursor)) ? Number(cursor) : -1;
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

  const missingTool = (server: UpstreamServer): Outcome =>
    fail(ReasonCode.unknownTool, PipelineStage.admission, {
      detail_code: "upstream_tool_not_found",
      evidence: { field: "/tool", server: server.id },
      message: `Upstream ${server.id} offers no tool of this name to you; list_tools with namespace mcp:${server.id} names them.`,
    });

  /** read_tool_manifest {namespace, tool}: the input schema and the binding mcp_tool takes. */
  async function readManifest(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const entry = namespaceServer(ctx.caller, args["namespace"] as string);
    if (!entry) return unknownNamespace("/namespace");
    const tools = await toolsOf(entry);
    if (!Array.isArray(tools)) return tools;
    const t = tools.find((x) => x.name === args["tool"]);
    if (!t) return missingTool(entry.server);
    return { ok: true, result: description(entry.server, t) };
  }

  async function resolveProject(selector: string, ctx: CallContext): Promise<{ ok: true; canonicalId: string } | { ok: false; failure: ToolFailure }> {
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
  async function callTool(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    // The Project first, as every tool resolves it: a foreign or unknown one is project_not_found.
    const selector = args["project"] as string | undefined;
    let canonicalProject: string | undefined;
    if (selector !== undefined) {
      const resolved = await resolveProject(selector, ctx);
      if (!resolved.ok) return { ok: false, failure: resolved.failure };
      canonicalProject = resolved.canonicalId;
    }
    const bound = args["binding"] as { server: string; tool: string; schema_hash: string; project?: string } | undefined;
    if (
      (bound !== undefined) === (args["server"] !== undefined || args["tool"] !== undefined) ||
      (bound === undefined && (args["server"] === undefined || args["tool"] === undefined))
    )
      return fail(ReasonCode.invalidValue, PipelineStage.normalization, {
        detail_code: "binding_or_server_tool",
        evidence: { field: "/binding" },
        message: "Give either binding (from read_tool_manifest) or both server and tool.",
      });
    const serverId = bound?.server ?? (args["server"] as string);
    const toolName = bound?.tool ?? (args["tool"] as string);
    const entry = serverFor(ctx.caller, serverId);
    if (!entry) return unknownNamespace(bound ? "/binding/server" : "/server");
    const { server } = entry;
    if (!allowed(server, toolName)) return missingTool(server);
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
    let tools = await toolsOf(entry);
    if (!Array.isArray(tools)) return tools;
    let target = tools.find((t) => t.name === toolName);
    if (bound && target?.schemaHash !== bound.schema_hash) {
      tools = await toolsOf(entry, true);
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
    const callArgs = args["arguments"] as Record<string, unknown>;
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
      const { result } = await entry.connection.callTool(toolName, callArgs, ctx.signal);
      const labelled = labelResult(server.id, toolName, result, server.maxResultBytes);
      responseBytes = labelled.bytes;
      outcome = { ok: true, result: labelled };
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
  }

  return { namespaces, listTools, readManifest, callTool, close, enabled: servers.size > 0 };
}

export type UpstreamTools = ReturnType<typeof createUpstreamTools>;
