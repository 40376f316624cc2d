/**
 * The tools the ref-resolver serves (execution "ref_resolver"): list_projects (with each
 * Project's runner_state), Workflow Sessions, update_project, and the agent tools.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { DomainFailure, RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import { pageFields, PipelineStage, ReasonCode, toolFailure, failureFromWire } from "@webcodex/contracts";
import type { AgentToolName, PresentationToolName, RefResolverToolName, ToolDefinition, ToolFailure, ToolInput } from "@webcodex/contracts";
import { connectCodeName, principalHeaders } from "@webcodex/platform";
import { dependencyFailure, timedStage } from "../call-context.js";
import type { CallContext, Outcome } from "../call-context.js";
import { handoffView } from "../session-facts.js";
import type { RunnerStates } from "./runner-states.js";

export interface RefResolverToolsDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  serverInfo: { mode: "embedded" | "distributed" };
  runnerStates: RunnerStates;
}

/**
 * What evidence.runner_detail says about a peer that did not answer the fence relay:
 * `<peer>_unreachable` for Unavailable, else `<peer>_<Connect code>` (e.g. broker_permission_denied).
 */
export function unansweredRelayDetail(peer: "broker" | "ref_resolver", error: unknown): string {
  const code = ConnectError.from(error).code;
  return `${peer}_${code === Code.Unavailable ? "unreachable" : connectCodeName(code)}`;
}

/**
 * A handler for every ref-resolver tool other than the agent tools (forwarded whole to the
 * ref-resolver's agent store, which keys its own handlers by AgentToolName) and the presentation
 * tools (composed by presentation.ts first), taking that tool's arguments typed from its input
 * schema: a ref-resolver tool added to the catalog, or a handler removed, does not compile.
 */
export type RefResolverToolHandlers = {
  [N in Exclude<RefResolverToolName, AgentToolName | PresentationToolName>]: (args: ToolInput<N>, ctx: CallContext) => Promise<Outcome>;
};

/** A handler called with a normalized call's arguments (validated against the tool's input schema). */
type WireHandler = (args: Record<string, unknown>, ctx: CallContext) => Promise<Outcome>;

export function createRefResolverTools(deps: RefResolverToolsDeps) {
  /**
   * A ref-resolver tool call. The ref-resolver's part is the call's resolution stage; a started
   * Attempt is then handed out only once the Project's Runner recorded its fence, and that
   * relay (through the broker, to the Runner) is the call's dispatch stage.
   */
  async function runOnRefResolver(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    let outcome: Outcome;
    try {
      outcome = await timedStage(ctx.stages, PipelineStage.resolution, () => callRefResolver(def, args, ctx));
    } catch (error) {
      // create_session writes: a lost answer leaves its effect unknown.
      return {
        ok: false,
        failure: dependencyFailure(error, def.effect === "read_only" ? PipelineStage.resolution : PipelineStage.dispatch, def.effect !== "read_only"),
      };
    }
    if (!outcome.ok || def.name !== "start_agent_task_attempt") return outcome;
    const started = outcome.result;
    const refused = await timedStage(ctx.stages, PipelineStage.dispatch, () => tellRunnerTheFence(ctx.projectCanonicalId, started, ctx));
    return refused ? { ok: false, failure: refused } : outcome;
  }

  /**
   * Embedded mode: the Projects a Runner of this process is known for (the broker's fleet
   * rows), or undefined when the broker cannot answer (then nothing is left out).
   */
  async function servedHere(ctx: CallContext): Promise<string[] | undefined> {
    try {
      const fleet = await deps.broker.getFleetStatus(
        { clientId: ctx.caller.principal.clientId },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return [...new Set(fleet.runners.map((r) => r.projectCanonicalId))];
    } catch {
      return undefined;
    }
  }

  const callOptions = (ctx: CallContext) => ({ signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) });

  /** A refusal the resolver sent, or `missing` when it answered without the record asked for. */
  const refused = (failure: DomainFailure | undefined, missing: string) => ({
    ok: false as const,
    failure: failure ? failureFromWire(failure) : toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: missing }),
  });

  const handlers: RefResolverToolHandlers = {
    async list_projects(args, ctx) {
      // Embedded mode serves only the project roots of this process: a project of an earlier
      // run that no Runner here serves is not offered to the model (which would pick it and
      // fail), nor counted as omitted. Its ref is kept for when it is served again.
      const served = deps.serverInfo.mode === "embedded" ? await servedHere(ctx) : undefined;
      const res = await deps.refResolver.listProjects(
        {
          name: args.name ?? "",
          limit: args.limit ?? 0,
          cursor: args.cursor ?? "",
          ...(served ? { onlyCanonicalIds: served, restrictToOnly: true } : {}),
        },
        callOptions(ctx),
      );
      if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
      const states = await deps.runnerStates(
        res.projects.flatMap((p) => (p.project ? [p.project] : [])),
        ctx,
      );
      const projects = res.projects.map((p) => {
        const id = p.project?.canonicalId ?? "";
        return { project_ref: p.projectRef, project_id: id, name: p.project?.name ?? "", runner_state: states[id] ?? "unknown" };
      });
      return { ok: true, result: { projects, ...pageFields(res.omitted, res.nextCursor || undefined) } };
    },
    async create_session(args, ctx) {
      const res = await deps.refResolver.createSession({ projectSelector: args.project, title: args.title ?? "" }, callOptions(ctx));
      if (res.failure || !res.session) return refused(res.failure, "no_session");
      ctx.projectCanonicalId = res.session.projectCanonicalId;
      ctx.sessionId = res.session.sessionId;
      return { ok: true, result: { session_ref: res.sessionRef, session_id: res.session.sessionId } };
    },
    async update_project(args, ctx) {
      const res = await deps.refResolver.updateProject({ selector: args.project, visibility: args.visibility }, callOptions(ctx));
      if (res.failure || !res.project) return refused(res.failure, "no_project");
      ctx.projectCanonicalId = res.project.canonicalId;
      return { ok: true, result: { project_id: res.project.canonicalId, visibility: res.project.visibility, ...(res.changed ? {} : { unchanged: true }) } };
    },
    async close_session(args, ctx) {
      const res = await deps.refResolver.closeSession({ selector: args.session_id }, callOptions(ctx));
      if (res.failure || !res.session) return refused(res.failure, "no_session");
      ctx.projectCanonicalId = res.session.projectCanonicalId;
      ctx.sessionId = res.session.sessionId;
      return { ok: true, result: { session_id: res.session.sessionId, state: res.session.state, ...(res.closedNow ? {} : { closed_now: false }) } };
    },
    async read_session_handoff(args, ctx) {
      const res = await deps.refResolver.readSessionHandoff({ selector: args.session_id }, callOptions(ctx));
      if (res.failure || !res.handoff) return refused(res.failure, "no_handoff");
      ctx.projectCanonicalId = res.handoff.session?.projectCanonicalId ?? "";
      ctx.sessionId = res.handoff.session?.sessionId ?? "";
      return { ok: true, result: handoffView(res.handoff) };
    },
  };

  /**
   * A ref-resolver tool's handler with the call's normalized arguments (the one place they are
   * taken as the tool's ToolInput), or an agent tool forwarded to the ref-resolver's agent store.
   */
  async function callRefResolver(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const handler = Object.hasOwn(handlers, def.name) ? (handlers[def.name as keyof RefResolverToolHandlers] as WireHandler) : undefined;
    if (handler) return handler(args, ctx);
    if (def.category !== "agents") return { ok: false, failure: toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_handler" }) };
    const res = await deps.refResolver.callAgentTool({ tool: def.name, argumentsJson: JSON.stringify(args) }, callOptions(ctx));
    ctx.projectCanonicalId = res.projectCanonicalId;
    if (res.continuationFacts?.length) ctx.continuationFacts = res.continuationFacts;
    if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
    return { ok: true, result: JSON.parse(res.resultJson) as Record<string, unknown> };
  }

  /**
   * A new Attempt is handed to its caller only once the Project's Runner recorded its fence: from
   * then on the Runner refuses every call of the Task's earlier Attempts, also one the gateway
   * admitted just before the takeover and that reaches the Runner before the new Attempt's
   * first call. The Runner told is the one the Attempt's workspace calls are dispatched to (the
   * Project resolved as those calls resolve it: its live root identity), and it must answer a
   * mark at least the new fence. When it cannot be told, the start fails (the Attempt is
   * recorded; the same call with the same idempotency_key returns it once the Runner is told).
   */
  async function tellRunnerTheFence(projectCanonicalId: string, started: Record<string, unknown>, ctx: CallContext): Promise<ToolFailure | undefined> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const taskId = String(started["task_id"] ?? "");
    const fence = BigInt(Number(started["attempt_fence"] ?? 0));
    const why = await relayFence(projectCanonicalId, { taskId, fence }, options);
    if (why === undefined) return undefined;
    return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
      detail_code: "attempt_fence_not_delivered",
      state_changed: true,
      evidence: { task_id: taskId, runner_detail: why },
      message:
        "The Attempt was recorded, but the project's Runner could not be told its fence, so it is not handed out yet. Repeat this call with the same idempotency_key once a Runner serves the project.",
    });
  }

  /** Tells the Project's Runner the Attempt's fence; undefined once it recorded it, else why not (evidence.runner_detail). */
  async function relayFence(
    projectCanonicalId: string,
    attempt: { taskId: string; fence: bigint },
    options: { signal: AbortSignal; headers: Record<string, string> },
  ): Promise<string | undefined> {
    let rootIdentity: string;
    try {
      const resolved = await deps.refResolver.resolveProject({ selector: projectCanonicalId }, options);
      if (!resolved.project) return resolved.failure?.detailCode || resolved.failure?.reasonCode || ReasonCode.projectNotFound;
      rootIdentity = resolved.project.rootIdentity;
    } catch (error) {
      return unansweredRelayDetail("ref_resolver", error);
    }
    try {
      const res = await deps.broker.raiseProjectAttemptFence({ projectCanonicalId, rootIdentity, attempt }, options);
      if (res.failure) return res.failure.detailCode || res.failure.reasonCode;
      // An answer without a mark at least this fence is not a recorded fence.
      return res.highest < attempt.fence ? "fence_not_recorded" : undefined;
    } catch (error) {
      return unansweredRelayDetail("broker", error);
    }
  }

  return { runOnRefResolver, handled: Object.keys(handlers) };
}
