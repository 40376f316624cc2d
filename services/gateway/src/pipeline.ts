/**
 * The call pipeline, in one readable place:
 *   normalize → resolve + authorize → dispatch → record → project.
 * Audit sees the canonical result before the late model projection; the model sees sparse
 * success, or a structured failure with at most one follow-up.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import {
  callableThroughGateway, FailureStage, groupToolNamesByCategory, normalizeToolCall, projectSuccess, ReasonCode,
  rereadFollowUp, toolDefinition, toolFailure, toolRoute, waitForJobFollowUp,
} from "@webcodex/contracts";
import type { FailureStage as Stage, HostProfile, InputNormalization, ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { failureFromWire, principalHeaders } from "@webcodex/platform";
import type { Logger, Metrics } from "@webcodex/platform";
import type { Caller } from "./auth.js";
import type { AuditRecorder } from "./audit-recorder.js";
import type { AdmittedCatalog, CatalogCache } from "./catalog-cache.js";
import { handoffView, sessionCallFacts } from "./session-facts.js";

export interface PipelineDeps {
  catalogs: CatalogCache;
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  audit: AuditRecorder;
  hostProfile: HostProfile;
  serverInfo: { name: string; version: string; mode: "embedded" | "distributed" };
  logger: Logger;
  metrics?: Metrics;
  /** Longest a call waits for its Workflow Session record before answering anyway (default 1000 ms). */
  sessionRecordBudgetMs?: number;
}

export type Outcome = { ok: true; result: Record<string, unknown> } | { ok: false; failure: ToolFailure };

export interface ModelResult {
  structuredContent: Record<string, unknown>;
  isError: boolean;
}

interface CallContext {
  caller: Caller;
  catalog: AdmittedCatalog;
  signal: AbortSignal;
  stages: Record<string, number>;
  projectCanonicalId: string;
  /** Canonical wc_sess_* the call is recorded into (or targets), once resolved and authorized; else "". */
  sessionId: string;
}

const now = () => performance.now();

/** Maps a transport/dependency error to a failure that says what is known about the effect. */
function dependencyFailure(error: unknown, stage: Stage, effectful: boolean): ToolFailure {
  const ce = ConnectError.from(error);
  const notSent = ce.code === Code.Unavailable || ce.code === Code.Unimplemented;
  return toolFailure(ReasonCode.dependencyUnavailable, stage, {
    detail_code: Code[ce.code]?.toLowerCase() ?? "unknown",
    outcome_unknown: stage === FailureStage.dispatch && effectful && !notSent,
    message: `A platform dependency failed during ${stage}; ${stage === FailureStage.dispatch && effectful && !notSent ? "the effect is unknown: inspect before retrying" : "nothing was run"}.`,
  });
}

/** Recovery follow-ups the gateway can prove from a Runner failure. */
function withRecovery(failure: ToolFailure, project: string): ToolFailure {
  if (failure.follow_up) return failure;
  const path = typeof failure.evidence?.["path"] === "string" ? (failure.evidence["path"] as string) : undefined;
  if (path && (failure.reason_code === ReasonCode.staleReadRevision || failure.reason_code === ReasonCode.expectedMatchCountMismatch)) {
    return { ...failure, follow_up: rereadFollowUp(project, path) };
  }
  return failure;
}

export function createPipeline(deps: PipelineDeps) {
  const callsTotal = deps.metrics?.counter("webcodex_tool_calls_total", "Tool calls by tool and outcome");
  const callSeconds = deps.metrics?.histogram("webcodex_tool_call_seconds", "Tool call latency");

  async function runGatewayTool(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    switch (def.name) {
      case "list_tools": {
        const admitted = [...ctx.catalog.admitted.values()];
        const groups = groupToolNamesByCategory(admitted);
        const category = args["category"] as string | undefined;
        if (category !== undefined && !(category in groups)) return { ok: true, result: { categories: {} } };
        return { ok: true, result: { categories: category ? { [category]: groups[category as keyof typeof groups] } : groups } };
      }
      case "read_tool_manifest": {
        const target = ctx.catalog.admitted.get(args["tool"] as string);
        if (!target) return { ok: false, failure: toolFailure(ReasonCode.toolNotAdmitted, FailureStage.admission, { detail_code: "not_admitted", message: "No such admitted tool; see list_tools." }) };
        return { ok: true, result: { tool: target.name, category: target.category, description: target.description, input_schema: target.inputSchema, route: toolRoute(target) } };
      }
      case "get_runtime_status":
        return runtimeStatus(args, ctx);
      default:
        return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_gateway_handler" }) };
    }
  }

  async function runtimeStatus(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const focus = args["client_id"] as string | undefined;
    if (focus !== undefined && focus !== ctx.caller.principal.clientId) {
      return { ok: false, failure: toolFailure(ReasonCode.projectNotFound, FailureStage.authorization, { detail_code: "runner_not_visible" }) };
    }
    const fleet = await deps.broker.getFleetStatus({ clientId: ctx.caller.principal.clientId }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
    const connected = fleet.runners.filter((r) => r.connectionState === "connected");
    const generations = [...new Set(fleet.runners.map((r) => r.protocolGeneration))];
    const compact = args["summary_only"] === true || args["compact"] !== false;
    const status: Record<string, unknown> = {
      server: deps.serverInfo,
      host_profile: deps.hostProfile,
      runners: { total: fleet.runners.length, connected: connected.length, lost: fleet.runners.length - connected.length },
      projects: new Set(connected.map((r) => r.projectId)).size,
      protocol: { generations, aligned: generations.length <= 1 },
      audit_backlog: deps.audit.backlog(),
    };
    if (!compact) {
      status["runner_details"] = fleet.runners.map((r) => ({
        runner_id: r.runnerId, project_id: r.projectId, connection_state: r.connectionState, protocol_generation: r.protocolGeneration,
        build: r.build, capabilities: r.capabilities, last_heartbeat: new Date(Number(r.lastHeartbeatUnixMs)).toISOString(),
      }));
      status["catalog_version"] = ctx.catalog.version;
    }
    return { ok: true, result: status };
  }

  /**
   * A project tool call. With session_id, the Session is resolved against the resolved
   * Project (authority, visibility, lifecycle) before anything is dispatched, and the outcome
   * is recorded into it afterwards. Only the call's own session_id selects a Session.
   */
  async function runOnRunner(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    const started = now();
    const selector = args["project"] as string;
    const t = now();
    let resolved;
    try {
      resolved = await deps.refResolver.resolveProject({ selector }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.resolution, false) };
    } finally {
      ctx.stages["resolve"] = Math.round((now() - t) * 1000);
    }
    if (resolved.failure || !resolved.project) return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, FailureStage.resolution) };
    const project = resolved.project;
    ctx.projectCanonicalId = project.canonicalId;
    const sessionSelector = args["session_id"] as string | undefined;
    if (sessionSelector !== undefined) {
      const failure = await resolveSession(sessionSelector, project.canonicalId, ctx);
      if (failure) return { ok: false, failure };
    }
    const { project: _p, session_id: _s, ...runnerArgs } = args;
    const outcome = await dispatchToRunner(def, runnerArgs, selector, project, ctx, callId);
    if (ctx.sessionId !== "") await recordSessionCall(def, outcome, ctx, callId, Math.round(now() - started));
    return outcome;
  }

  /** Canonicalizes and authorizes a business session_id for `projectCanonicalId`; a failure means no dispatch. */
  async function resolveSession(selector: string, projectCanonicalId: string, ctx: CallContext): Promise<ToolFailure | undefined> {
    const t = now();
    try {
      const res = await deps.refResolver.resolveSession({ selector, projectCanonicalId, requireOpen: true }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
      if (res.failure || !res.session) return res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.invalidValue, FailureStage.resolution, { detail_code: "session_not_found" });
      ctx.sessionId = res.session.sessionId;
      return undefined;
    } catch (error) {
      return dependencyFailure(error, FailureStage.resolution, false);
    } finally {
      ctx.stages["resolve_session"] = Math.round((now() - t) * 1000);
    }
  }

  /**
   * Secondary to the business result: bounded by sessionRecordBudgetMs, independent of the
   * caller's cancellation, and a failure is logged, never returned.
   */
  async function recordSessionCall(def: ToolDefinition, outcome: Outcome, ctx: CallContext, callId: string, durationMs: number): Promise<void> {
    const t = now();
    const facts = sessionCallFacts(def, outcome);
    // A ref'd timer (AbortSignal.timeout is unref'd): the budget holds even on an idle loop.
    const budget = new AbortController();
    const timer = setTimeout(() => budget.abort(), deps.sessionRecordBudgetMs ?? 1_000);
    try {
      const res = await deps.refResolver.recordSessionCall(
        { sessionSelector: ctx.sessionId, projectCanonicalId: ctx.projectCanonicalId, call: { callId, tool: def.name, effect: def.effect, durationMs, ...facts } },
        { signal: budget.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      if (res.failure) deps.logger.warn("session call not recorded", { call_id: callId, session_id: ctx.sessionId, reason_code: res.failure.reasonCode, detail_code: res.failure.detailCode });
    } catch (error) {
      deps.logger.warn("session call not recorded", { call_id: callId, session_id: ctx.sessionId, error: ConnectError.from(error).message });
    } finally {
      clearTimeout(timer);
      ctx.stages["record_session"] = Math.round((now() - t) * 1000);
    }
  }

  async function dispatchToRunner(
    def: ToolDefinition, runnerArgs: Record<string, unknown>, selector: string, project: { canonicalId: string; rootIdentity: string }, ctx: CallContext, callId: string,
  ): Promise<Outcome> {
    const t = now();
    try {
      const res = await deps.broker.dispatch(
        { callId, projectCanonicalId: project.canonicalId, rootIdentity: project.rootIdentity, tool: def.name, argumentsJson: JSON.stringify(runnerArgs) },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      if (res.failure) return { ok: false, failure: withRecovery(failureFromWire(res.failure), selector) };
      return { ok: true, result: JSON.parse(res.resultJson) as Record<string, unknown> };
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, def.effect !== "read_only") };
    } finally {
      ctx.stages["dispatch"] = Math.round((now() - t) * 1000);
    }
  }

  async function runOnRefResolver(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    switch (def.name) {
      case "list_projects": {
        const res = await deps.refResolver.listProjects({}, options);
        return { ok: true, result: { projects: res.projects.map((p) => ({ project_ref: p.projectRef, project_id: p.project?.canonicalId ?? "", name: p.project?.name ?? "" })) } };
      }
      case "create_session": {
        const res = await deps.refResolver.createSession({ projectSelector: args["project"] as string, title: (args["title"] as string | undefined) ?? "" }, options);
        if (res.failure || !res.session) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_session" }) };
        ctx.projectCanonicalId = res.session.projectCanonicalId;
        ctx.sessionId = res.session.sessionId;
        return { ok: true, result: { session_ref: res.sessionRef, session_id: res.session.sessionId } };
      }
      case "read_session_handoff": {
        const res = await deps.refResolver.readSessionHandoff({ selector: args["session_id"] as string }, options);
        if (res.failure || !res.handoff) return { ok: false, failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handoff" }) };
        ctx.projectCanonicalId = res.handoff.session?.projectCanonicalId ?? "";
        ctx.sessionId = res.handoff.session?.sessionId ?? "";
        return { ok: true, result: handoffView(res.handoff) };
      }
      default:
        return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handler" }) };
    }
  }

  async function execute(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    switch (def.execution) {
      case "gateway":
        return runGatewayTool(def, args, ctx);
      case "ref_resolver": {
        const t = now();
        try {
          return await runOnRefResolver(def, args, ctx);
        } catch (error) {
          // create_session writes: a lost answer leaves its effect unknown.
          return { ok: false, failure: dependencyFailure(error, def.effect === "read_only" ? FailureStage.resolution : FailureStage.dispatch, def.effect !== "read_only") };
        } finally {
          ctx.stages["resolve"] = Math.round((now() - t) * 1000);
        }
      }
      case "runner":
        return runOnRunner(def, args, ctx, callId);
      case "broker":
        return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handler" }) };
    }
  }

  /** Builds the model result of an outcome: the late, pure projection. */
  function project(def: ToolDefinition | undefined, outcome: Outcome, normalization: InputNormalization | undefined, args: Record<string, unknown>): ModelResult {
    if (!outcome.ok) return { structuredContent: outcome.failure as unknown as Record<string, unknown>, isError: true };
    const result = def ? projectSuccess(def, outcome.result, normalization) : outcome.result;
    if (outcome.result["execution_state"] === "pending" && typeof outcome.result["job_id"] === "string") {
      result["follow_up"] = waitForJobFollowUp(args["project"] as string, outcome.result["job_id"], args["session_id"] as string | undefined);
    }
    return { structuredContent: result, isError: false };
  }

  /**
   * Runs one tools/call. `via` is set when call_runtime_tool forwards a Gateway tool: the
   * inner call goes through the very same steps and is the one audited.
   */
  async function call(caller: Caller, tool: string, rawArgs: unknown, signal: AbortSignal): Promise<ModelResult> {
    const started = Date.now();
    const t0 = now();
    const stages: Record<string, number> = {};
    const callId = randomUUID();
    let catalog: AdmittedCatalog;
    try {
      catalog = await deps.catalogs.get(caller.admissionProfile, deps.hostProfile);
    } catch (error) {
      return project(undefined, { ok: false, failure: dependencyFailure(error, FailureStage.admission, false) }, undefined, {});
    }

    // call_runtime_tool unwraps here so the inner call is normalized, authorized and audited as itself.
    if (tool === "call_runtime_tool" && catalog.admitted.has(tool)) {
      const outer = normalizeToolCall(tool, rawArgs, { isAdmitted: (n) => catalog.admitted.has(n) });
      if (!outer.ok) return project(undefined, { ok: false, failure: outer.failure }, undefined, {});
      const inner = outer.arguments["tool"] as string;
      if (!callableThroughGateway(inner)) {
        return project(undefined, { ok: false, failure: toolFailure(toolDefinition(inner) ? ReasonCode.presentationToolNotCallable : ReasonCode.unknownTool, FailureStage.admission, { detail_code: "not_gateway_callable", message: "Call this tool directly." }) }, undefined, {});
      }
      tool = inner;
      rawArgs = outer.arguments["arguments"];
    }

    let t = now();
    const normalized = normalizeToolCall(tool, rawArgs, { isAdmitted: (n) => catalog.admitted.has(n) });
    stages["normalize"] = Math.round((now() - t) * 1000);
    const def = normalized.ok ? toolDefinition(normalized.tool) : toolDefinition(tool);
    const ctx: CallContext = { caller, catalog, signal, stages, projectCanonicalId: "", sessionId: "" };
    const outcome: Outcome = normalized.ok ? await execute(def as ToolDefinition, normalized.arguments, ctx, callId) : { ok: false, failure: normalized.failure };

    t = now();
    const failure = outcome.ok ? undefined : outcome.failure;
    const effectful = def !== undefined && def.effect !== "read_only";
    const durationUs = Math.round((now() - t0) * 1000);
    await deps.audit.record(
      {
        callId,
        clientId: caller.principal.clientId,
        subject: caller.principal.subject,
        tool: def?.name ?? "unknown_tool",
        projectCanonicalId: ctx.projectCanonicalId,
        sessionId: ctx.sessionId,
        effect: def?.effect ?? "read_only",
        outcome: outcome.ok ? "success" : "failure",
        reasonCode: failure?.reason_code ?? "",
        stateChanged: failure ? failure.state_changed : effectful && outcome.ok && outcome.result["changed"] !== false,
        outcomeUnknown: failure?.outcome_unknown ?? false,
        // model_ergonomics: only canonical success reports a normalization code.
        inputNormalizationCode: outcome.ok && normalized.ok ? (normalized.normalization?.code ?? "") : "",
        startedAtUnixMs: BigInt(started),
        durationUs,
        stageDurationsUs: stages,
      },
      effectful && outcome.ok,
    );
    stages["record"] = Math.round((now() - t) * 1000);
    callsTotal?.inc({ tool: def?.name ?? "unknown_tool", outcome: outcome.ok ? "success" : failure?.reason_code ?? "failure" });
    callSeconds?.observe((now() - t0) / 1000, { tool: def?.name ?? "unknown_tool" });
    return project(def, outcome, normalized.ok ? normalized.normalization : undefined, normalized.ok ? normalized.arguments : {});
  }

  return { call };
}

export type Pipeline = ReturnType<typeof createPipeline>;
