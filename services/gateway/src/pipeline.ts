/**
 * The call pipeline, in one readable place:
 *   admit → normalize → resolve + authorize → execute → capture → project → record.
 * The audit record is captured from the canonical result before the late model projection;
 * the model sees sparse success, or a structured failure with at most one follow-up.
 *
 * One verb per layer: the pipeline `call`s; its execute stage `execute`s a normalized call,
 * which is `run` where its tool runs (`runOnGateway`, `runOnRefResolver`, `runOnRunner`,
 * under ./execute/); a Runner's call is `dispatch`ed through the broker.
 */
import { randomUUID } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import { CallOutcome, PipelineStage, forwardedCall, normalizeToolCall, ReasonCode, toolDefinition, toolFailure, failureFromWire } from "@webcodex/contracts";
import { DEFAULT_MODEL_WORKFLOW_POLICY } from "@webcodex/contracts";
import type { HostProfile, InputNormalization, ModelWorkflowPolicy, StageTimings, ToolDefinition } from "@webcodex/contracts";
import { argumentShape, measureCanonical, measureProjection, principalHeaders, traceContextFromMeta, withSpan } from "@webcodex/platform";
import type { ArgumentShapeSketch, Logger, Metrics, ShapeSchema } from "@webcodex/platform";
import type { Caller } from "./auth.js";
import { auditNotDurableFailure, captureCall } from "./audit-capture.js";
import type { ActionRecordInit, AuditRecorder } from "./audit-recorder.js";
import { dependencyCause, dependencyFailure, micros, now, timedStage } from "./call-context.js";
import { createCallMetrics } from "./call-metrics.js";
import type { CallContext, Outcome } from "./call-context.js";
import type { CatalogCache } from "./catalog-cache.js";
import { projectSelector, withRecovery } from "./failure-recovery.js";
import { validationVerdict } from "./session-facts.js";
import { createPresentation } from "./presentation.js";
import type { ResolveProject } from "./presentation.js";
import { createJobAttention } from "./job-attention.js";
import type { JobAttention } from "./job-attention.js";
import { createGatewayTools } from "./execute/gateway-tools.js";
import { createRefResolverTools } from "./execute/ref-resolver-tools.js";
import { createRunnerStates } from "./execute/runner-states.js";
import { createRunnerTools } from "./execute/runner-tools.js";
import type { RouteTable } from "./execute/routes.js";
import type { ResolutionCache } from "./execute/call-scope.js";
import type { AttemptDispatchHold } from "./execute/runner-tools.js";
import { createSkills } from "./skills/skills.js";
import type { UpstreamTools } from "./upstream/upstream-tools.js";
import { createCodeCells } from "./code-mode/cell.js";
import { createAdmission } from "./pipeline-admission.js";
import { projectForModel } from "./model-projection.js";
import type { ModelResult } from "./model-projection.js";

export type { ModelResult } from "./model-projection.js";
import type { SandboxPool } from "./code-mode/sandbox.js";

export interface PipelineDeps {
  catalogs: CatalogCache;
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  audit: AuditRecorder;
  /** The Host profile of callers whose token names none. */
  hostProfile: HostProfile;
  serverInfo: { name: string; version: string; mode: "embedded" | "distributed" };
  logger: Logger;
  metrics?: Metrics;
  /** Deployment facts reported by presentation cards (default: DEFAULT_MODEL_WORKFLOW_POLICY). */
  workflowPolicy?: ModelWorkflowPolicy;
  /** Longest a call waits for its Workflow Session record before answering anyway (default 1000 ms). */
  sessionRecordBudgetMs?: number;
  /** The Jobs callers started and have not seen end (default: a fresh in-process watch list). */
  jobAttention?: JobAttention;
  /** Upstream MCP servers (list_tools/read_tool_manifest namespaces, mcp_tool); absent: none. */
  upstreamTools?: UpstreamTools | undefined;
  /** Test hook: holds an admitted attempt_ref call before its dispatch. */
  attemptDispatchHold?: AttemptDispatchHold | undefined;
  /** Direct routes to Runners (distributed mode); absent: every Runner call goes through the broker. */
  routes?: RouteTable | undefined;
  /** Resolved Projects kept for the resolver's TTL (distributed mode); absent: every Runner call asks the resolver. */
  resolutionCache?: ResolutionCache | undefined;
  /** The directory of per-tenant skill catalogs (list_skills, read_skill); absent: none. */
  skillCatalogsDir?: string | undefined;
  /** The Code Mode sandbox workers (default: a pool of this pipeline's own). */
  sandbox?: SandboxPool;
}

/** What a call made inside another call carries: the call_id of the run_code_cell it ran in. */
export interface CallParent {
  parentCallId: string;
}

/** What the pipeline sets on a call's span: codes and identifiers only. */
type CallSpan = { setAttribute(key: string, value: string): unknown } | undefined;

/** What the MCP request itself says about a call, for its span (never arguments). */
export interface McpRequestFacts {
  /** The client's JSON-RPC request id. */
  requestId?: string | number;
  /** The request's params._meta (traceparent, tracestate). */
  meta?: Record<string, unknown>;
  sessionId?: string;
}

export function createPipeline(deps: PipelineDeps) {
  const callMetrics = deps.metrics ? createCallMetrics(deps.metrics) : undefined;
  const presentation = createPresentation({
    refResolver: deps.refResolver,
    broker: deps.broker,
    policy: deps.workflowPolicy ?? DEFAULT_MODEL_WORKFLOW_POLICY,
    routes: deps.routes,
  });

  /** Resolves and authorizes a Project selector for a presentation call, recording it for audit. */
  const resolveFor =
    (ctx: CallContext): ResolveProject =>
    async (selector) => {
      const resolved = await timedStage(ctx.stages, PipelineStage.resolution, () =>
        deps.refResolver.resolveProject({ selector, recordUse: true }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) }),
      );
      if (resolved.failure || !resolved.project)
        return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution) };
      ctx.projectCanonicalId = resolved.project.canonicalId;
      return { ok: true, canonicalId: resolved.project.canonicalId, rootIdentity: resolved.project.rootIdentity };
    };

  const attention = deps.jobAttention ?? createJobAttention();
  const runnerStates = createRunnerStates(deps);
  const { runOnGateway } = createGatewayTools({ ...deps, runnerStates });
  const { runOnRefResolver } = createRefResolverTools({ ...deps, runnerStates });
  const { runOnRunner } = createRunnerTools({ ...deps, attention });
  const skills = createSkills({ tenantCatalogsDir: deps.skillCatalogsDir, runOnRunner });
  // Code Mode: a cell's child calls come back through `call` as that principal, with the cell as parent.
  const { admit, normalizeContext } = createAdmission(deps);
  const cells = createCodeCells({ ...deps, call: (caller, tool, args, signal, parent) => call(caller, tool, args, signal, undefined, parent) });

  /** Runs a normalized call where its tool runs (a presentation tool the gateway composes first). */
  async function run(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    if (def.category === "presentation") {
      const presented = presentation.run(
        def,
        args,
        resolveFor(ctx),
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
        (facts) => (ctx.continuationFacts = facts),
      );
      if (presented) return presented;
    }
    const skilled = skills.run(def, args, ctx, callId);
    if (skilled) return skilled;
    if (cells.runs(def)) return cells.run(args, ctx, callId);
    switch (def.execution) {
      case "gateway":
        return runOnGateway(def, args, ctx);
      case "ref_resolver":
        return runOnRefResolver(def, args, ctx);
      case "runner":
        return runOnRunner(def, args, ctx, callId);
      case "broker":
        return { ok: false, failure: toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_handler" }) };
    }
  }

  /** Runs a normalized call; an unexpected throw becomes a failure so the call is still audited. */
  async function execute(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    try {
      return await run(def, args, ctx, callId);
    } catch (error) {
      const effectful = def.effect !== "read_only";
      // Logged with its cause once the call's outcome is known (callInSpan).
      if (error instanceof ConnectError) return { ok: false, failure: dependencyFailure(error, PipelineStage.dispatch, effectful) };
      deps.logger.error("tool call failed unexpectedly", { tool: def.name, error });
      return { ok: false, failure: toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "unhandled_error", outcome_unknown: effectful }) };
    }
  }

  /**
   * Runs one tools/call in a `tools/call` span with a child span per stage. Every call, refused
   * or not, produces exactly one ActionAudit record, captured from the canonical outcome before
   * the Host sees anything; an effectful call is acknowledged only once its record is durable.
   */
  function call(caller: Caller, tool: string, rawArgs: unknown, signal: AbortSignal, mcp?: McpRequestFacts, parent?: CallParent): Promise<ModelResult> {
    // OpenTelemetry MCP semantic conventions: `tools/call {tool}`, a child of the trace context
    // the client sent in params._meta (else of the HTTP request's). Never arguments or results.
    const attributes: Record<string, string> = {
      "webcodex.client_id": caller.principal.clientId,
      "mcp.method.name": "tools/call",
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": forwardedCall(tool, rawArgs).tool,
      ...(mcp?.requestId !== undefined ? { "jsonrpc.request.id": String(mcp.requestId) } : {}),
      ...(mcp?.sessionId !== undefined ? { "mcp.session.id": mcp.sessionId } : {}),
    };
    return withSpan(
      `tools/call ${attributes["gen_ai.tool.name"]}`,
      attributes,
      (span) => callInSpan(caller, tool, rawArgs, signal, span, parent),
      traceContextFromMeta(mcp?.meta),
    );
  }

  async function callInSpan(
    caller: Caller,
    requestedTool: string,
    requestedArgs: unknown,
    signal: AbortSignal,
    span: CallSpan,
    parent: CallParent | undefined,
  ): Promise<ModelResult> {
    const started = Date.now();
    const t0 = now();
    const stages: StageTimings = {};
    const callId = randomUUID();

    const admission = await admit(caller, requestedTool, requestedArgs);
    const { tool, args: rawArgs } = admission;
    // The shape of the arguments as received (after unwrapping, before normalization).
    const shape: ArgumentShapeSketch | undefined = argumentShape(rawArgs, toolDefinition(tool)?.inputSchema as ShapeSchema | undefined);

    let def = toolDefinition(tool);
    let outcome: Outcome;
    let normalization: InputNormalization | undefined;
    let args: Record<string, unknown> = {};
    let projectCanonicalId = "";
    let sessionId = "";
    let jobAttention: CallContext["attention"];
    let continuationFacts: CallContext["continuationFacts"];
    let upstreamCall: CallContext["upstreamCall"];
    let readOnlyTarget: boolean | undefined;
    let onDelivered: CallContext["onDelivered"];
    if (!admission.ok) {
      outcome = { ok: false, failure: admission.failure };
    } else {
      const catalog = admission.catalog;
      const normalized = await timedStage(stages, PipelineStage.normalization, () => normalizeToolCall(tool, rawArgs, normalizeContext(catalog)));
      if (!normalized.ok) {
        outcome = { ok: false, failure: normalized.failure };
      } else {
        def = toolDefinition(normalized.tool) as ToolDefinition;
        normalization = normalized.normalization;
        args = normalized.arguments;
        const ctx: CallContext = {
          caller,
          catalog,
          signal,
          stages,
          projectCanonicalId: "",
          sessionId: "",
          literal: normalized.literal,
          ...(parent ? { parentCallId: parent.parentCallId } : {}),
        };
        outcome = await execute(def, args, ctx, callId);
        // The Runner could not serve the rewrite, so the literal call ran: it is what is
        // audited, projected and reported, with no rewrite code.
        if (ctx.ranLiteral && normalized.literal) {
          def = ctx.ranLiteral;
          normalization = normalized.literal.normalization;
          args = normalized.literal.arguments;
        }
        // Canonical from here on: audit and Session evidence read it, projections copy it.
        if (outcome.ok) Object.freeze(outcome.result);
        projectCanonicalId = ctx.projectCanonicalId;
        sessionId = ctx.sessionId;
        jobAttention = ctx.attention;
        continuationFacts = ctx.continuationFacts;
        upstreamCall = ctx.upstreamCall;
        readOnlyTarget = ctx.readOnlyTarget;
        onDelivered = ctx.onDelivered;
      }
    }

    if (!outcome.ok && outcome.failure.reason_code === ReasonCode.dependencyUnavailable) {
      // Every dependency failure is in the operator's log with its cause (the caller sees none).
      const f = outcome.failure;
      deps.logger.warn("tool call dependency failed", {
        tool,
        stage: f.failure_stage,
        detail_code: f.detail_code,
        outcome_unknown: f.outcome_unknown,
        cause: dependencyCause(f) ?? "unknown",
      });
    }
    // Every failure with a known repair carries it (the reason-code table says which); a
    // workspace inspection only for a tool that can change the workspace.
    if (!outcome.ok) outcome = { ok: false, failure: withRecovery(outcome.failure, projectSelector(args, rawArgs), def?.name ?? tool) };

    // Audit capture, from the canonical outcome before the late model projection: nothing a
    // projection adds (input_normalization, follow_up) can reach the record or its sizes.
    const canonicalBytes = outcome.ok ? measureCanonical(outcome.result) : undefined;
    const { captured, durable } = captureCall({
      callId,
      caller,
      def,
      outcome,
      normalization,
      projectCanonicalId,
      sessionId,
      startedAtUnixMs: started,
      shape,
      readOnlyTarget,
    });
    const { stateChanged, outcomeUnknown, tool: toolName } = captured;

    // The late, pure projection: a new object; the canonical result stays as captured.
    const projected = await timedStage(stages, PipelineStage.projection, () => projectForModel(def, outcome, normalization, args));
    const resultSize = outcome.ok ? measureProjection(canonicalBytes, projected.structuredContent, args) : undefined;
    const validation = outcome.ok ? validationVerdict(outcome.result) : undefined;
    const record: ActionRecordInit = {
      ...captured,
      ...(validation ? { validation } : {}),
      ...(continuationFacts ? { continuationFacts } : {}),
      ...(upstreamCall
        ? {
            upstream: {
              server: upstreamCall.server,
              tool: upstreamCall.tool,
              requestBytes: BigInt(upstreamCall.requestBytes),
              responseBytes: BigInt(upstreamCall.responseBytes),
            },
          }
        : {}),
      ...(parent ? { parentCallId: parent.parentCallId } : {}),
      durationUs: micros(t0),
      // A copy: the record stage's own time is not part of the record (batched records are serialized later).
      stageDurationsUs: { ...stages },
      ...(resultSize ? { resultSize } : {}),
    };

    let result = projected;
    try {
      await timedStage(stages, PipelineStage.record, () => deps.audit.record(record, durable));
    } catch (error) {
      if (!durable) {
        deps.logger.warn("audit record not queued", { tool: toolName, error });
      } else {
        deps.logger.error("effectful call not acknowledged: its audit record is not durable", { tool: toolName, error });
        result = { structuredContent: auditNotDurableFailure(outcome, stateChanged, outcomeUnknown) as unknown as Record<string, unknown>, isError: true };
      }
    }

    // Passive job attention rides on a successful result only, and counts as seen once delivered.
    if (!result.isError && jobAttention) {
      const { key, items } = jobAttention;
      result = {
        ...result,
        structuredContent: { ...result.structuredContent, job_attention: { items } },
        delivered: () =>
          attention.seen(
            key,
            items.map((i) => i.job_id),
          ),
      };
    }

    // A cell's result forwards the job attention of its children: seen once the cell's result is.
    if (onDelivered) {
      const own = result.delivered;
      result = {
        ...result,
        delivered: () => {
          own?.();
          onDelivered?.();
        },
      };
    }

    const reasonCode = result.isError ? String(result.structuredContent["reason_code"] ?? "") : "";
    span?.setAttribute("webcodex.tool", toolName);
    if (reasonCode) {
      span?.setAttribute("webcodex.reason_code", reasonCode);
      // semconv: error.type names the class of failure (a tool error is a result, not a throw).
      span?.setAttribute("error.type", reasonCode);
    }
    callMetrics?.observeCall({
      tool: toolName,
      outcome: result.isError ? CallOutcome.failure : CallOutcome.success,
      reasonCode,
      durationSeconds: (now() - t0) / 1000,
      stagesUs: stages,
    });
    return result;
  }

  return { call };
}

export type Pipeline = ReturnType<typeof createPipeline>;
