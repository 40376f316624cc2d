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

export interface PipelineDeps {
  catalogs: CatalogCache;
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  audit: AuditRecorder;
  hostProfile: HostProfile;
  serverInfo: { name: string; version: string; mode: "embedded" | "distributed" };
  logger: Logger;
  metrics?: Metrics;
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

  /**
   * get_runtime_status: projected from the broker's canonical fleet summary (one counting
   * path for both modes). Compact asks the broker for the summary only, so no Runner row is
   * built; compact: false adds the diagnostic rows, catalog version and audit backlog.
   */
  async function runtimeStatus(args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const focus = args["client_id"] as string | undefined;
    if (focus !== undefined && focus !== ctx.caller.principal.clientId) {
      return { ok: false, failure: toolFailure(ReasonCode.projectNotFound, FailureStage.authorization, { detail_code: "runner_not_visible" }) };
    }
    const compact = args["summary_only"] === true || args["compact"] !== false;
    let fleet;
    try {
      fleet = await deps.broker.getFleetStatus({ clientId: ctx.caller.principal.clientId, summaryOnly: compact }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, FailureStage.dispatch, false) };
    }
    const s = fleet.summary;
    const jobs = s?.jobs;
    const status: Record<string, unknown> = {
      server: deps.serverInfo,
      host_profile: deps.hostProfile,
      runners: { total: s?.runnersTotal ?? 0, connected: s?.runnersConnected ?? 0, lost: s?.runnersLost ?? 0, standby: s?.runnersStandby ?? 0 },
      projects: { total: s?.projectsTotal ?? 0, routable: s?.projectsRoutable ?? 0 },
      jobs: {
        active: jobs?.active ?? 0, running: jobs?.running ?? 0, queued: jobs?.queued ?? 0,
        recovering: jobs?.recovering ?? 0, lost_after_reconcile: jobs?.lostAfterReconcile ?? 0,
      },
      protocol: { server_generation: s?.serverProtocolGeneration ?? 0, generations: s?.protocolGenerations ?? [], aligned: s?.protocolAligned ?? true },
      build: { builds: s?.builds ?? [], aligned: s?.buildAligned ?? true },
      connection_states: { ...(s?.connectionStates ?? {}) },
      concurrency: { project_limit: s?.projectConcurrencyLimit ?? 0, in_flight: s?.inFlight ?? 0 },
    };
    if ((s?.baselineFaults ?? 0) > 0) status["baseline_faults"] = s?.baselineFaults;
    if (compact) return { ok: true, result: status };
    status["runner_details"] = fleet.runners.map((r) => ({
      runner_id: r.runnerId, project_id: r.projectId, project_canonical_id: r.projectCanonicalId, connection_state: r.connectionState,
      protocol_generation: r.protocolGeneration, build: r.build, capabilities: r.capabilities, baseline_complete: r.baselineComplete,
      lease_held: r.leaseHeld, fence: Number(r.fence), in_flight: r.inFlight, last_heartbeat: new Date(Number(r.lastHeartbeatUnixMs)).toISOString(),
    }));
    status["catalog_version"] = ctx.catalog.version;
    status["audit_backlog"] = deps.audit.backlog();
    return { ok: true, result: status };
  }

  async function runOnRunner(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    const selector = args["project"] as string;
    let t = now();
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
    const { project: _p, session_id: _s, ...runnerArgs } = args;
    t = now();
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

  async function execute(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    switch (def.execution) {
      case "gateway":
        return runGatewayTool(def, args, ctx);
      case "ref_resolver": {
        if (def.name !== "list_projects") return { ok: false, failure: toolFailure(ReasonCode.internal, FailureStage.dispatch, { detail_code: "no_handler" }) };
        const t = now();
        try {
          const res = await deps.refResolver.listProjects({}, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });
          return { ok: true, result: { projects: res.projects.map((p) => ({ project_ref: p.projectRef, project_id: p.project?.canonicalId ?? "", name: p.project?.name ?? "" })) } };
        } catch (error) {
          return { ok: false, failure: dependencyFailure(error, FailureStage.resolution, false) };
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
      result["follow_up"] = waitForJobFollowUp(args["project"] as string, outcome.result["job_id"]);
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
    const ctx: CallContext = { caller, catalog, signal, stages, projectCanonicalId: "" };
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
        sessionId: "",
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
