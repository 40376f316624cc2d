/**
 * The tools the ref-resolver serves (execution "ref_resolver"): list_projects (with each
 * Project's runner_state), Workflow Sessions, update_project, and the agent tools.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import { PipelineStage, ReasonCode, toolFailure, failureFromWire } from "@webcodex/contracts";
import type { ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { CallContext, Outcome } from "../call-context.js";
import { handoffView } from "../session-facts.js";
import type { RunnerStates } from "./runner-states.js";

export interface RefResolverToolsDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  serverInfo: { mode: "embedded" | "distributed" };
  runnerStates: RunnerStates;
}

export function createRefResolverTools(deps: RefResolverToolsDeps) {
  async function runOnRefResolver(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    switch (def.name) {
      case "list_projects": {
        const res = await deps.refResolver.listProjects({}, options);
        const states = await deps.runnerStates(
          res.projects.flatMap((p) => (p.project ? [p.project] : [])),
          ctx,
        );
        const listed = res.projects.map((p) => {
          const id = p.project?.canonicalId ?? "";
          return { project_ref: p.projectRef, project_id: id, name: p.project?.name ?? "", runner_state: states[id] ?? "unknown" };
        });
        // Embedded mode serves one project root per process: a project of an earlier run that no
        // Runner here can serve (runner_state none) is not offered to the model, which would pick
        // it and fail. Its ref is kept for when it is served again.
        return { ok: true, result: { projects: deps.serverInfo.mode === "embedded" ? listed.filter((p) => p.runner_state !== "none") : listed } };
      }
      case "create_session": {
        const res = await deps.refResolver.createSession(
          { projectSelector: args["project"] as string, title: (args["title"] as string | undefined) ?? "" },
          options,
        );
        if (res.failure || !res.session)
          return {
            ok: false,
            failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_session" }),
          };
        ctx.projectCanonicalId = res.session.projectCanonicalId;
        ctx.sessionId = res.session.sessionId;
        return { ok: true, result: { session_ref: res.sessionRef, session_id: res.session.sessionId } };
      }
      case "update_project": {
        const res = await deps.refResolver.updateProject({ selector: args["project"] as string, visibility: args["visibility"] as string }, options);
        if (res.failure || !res.project)
          return {
            ok: false,
            failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_project" }),
          };
        ctx.projectCanonicalId = res.project.canonicalId;
        return { ok: true, result: { project_id: res.project.canonicalId, visibility: res.project.visibility, ...(res.changed ? {} : { unchanged: true }) } };
      }
      case "close_session": {
        const res = await deps.refResolver.closeSession({ selector: args["session_id"] as string }, options);
        if (res.failure || !res.session)
          return {
            ok: false,
            failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_session" }),
          };
        ctx.projectCanonicalId = res.session.projectCanonicalId;
        ctx.sessionId = res.session.sessionId;
        return { ok: true, result: { session_id: res.session.sessionId, state: res.session.state, ...(res.closedNow ? {} : { closed_now: false }) } };
      }
      case "read_session_handoff": {
        const res = await deps.refResolver.readSessionHandoff({ selector: args["session_id"] as string }, options);
        if (res.failure || !res.handoff)
          return {
            ok: false,
            failure: res.failure ? failureFromWire(res.failure) : toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_handoff" }),
          };
        ctx.projectCanonicalId = res.handoff.session?.projectCanonicalId ?? "";
        ctx.sessionId = res.handoff.session?.sessionId ?? "";
        return { ok: true, result: handoffView(res.handoff) };
      }
      default: {
        if (def.category !== "agents") return { ok: false, failure: toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_handler" }) };
        const res = await deps.refResolver.callAgentTool({ tool: def.name, argumentsJson: JSON.stringify(args) }, options);
        ctx.projectCanonicalId = res.projectCanonicalId;
        if (res.continuationFacts?.length) ctx.continuationFacts = res.continuationFacts;
        if (res.failure) return { ok: false, failure: failureFromWire(res.failure) };
        const result = JSON.parse(res.resultJson) as Record<string, unknown>;
        if (def.name === "start_agent_task_attempt") {
          const refused = await tellRunnerTheFence(res.projectCanonicalId, result, options);
          if (refused) return { ok: false, failure: refused };
        }
        return { ok: true, result };
      }
    }
  }

  /**
   * A new Attempt is handed to its caller only once the Project's Runner recorded its fence: from
   * then on the Runner refuses every call of the Task's earlier Attempts, also one the gateway
   * admitted just before the takeover and that reaches the Runner before the new Attempt's
   * first call. When the Runner cannot be told, the start fails (the Attempt is recorded; the
   * same call with the same idempotency_key returns it once the Runner is told).
   */
  async function tellRunnerTheFence(
    projectCanonicalId: string,
    started: Record<string, unknown>,
    options: { signal: AbortSignal; headers: Record<string, string> },
  ): Promise<ToolFailure | undefined> {
    const taskId = String(started["task_id"] ?? "");
    const fence = BigInt(Number(started["attempt_fence"] ?? 0));
    let why: string;
    try {
      const res = await deps.broker.raiseProjectAttemptFence({ projectCanonicalId, attempt: { taskId, fence } }, options);
      if (!res.failure) return undefined;
      why = res.failure.detailCode || res.failure.reasonCode;
    } catch (error) {
      why = error instanceof Error ? "broker_unreachable" : "broker_failed";
    }
    return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
      detail_code: "attempt_fence_not_delivered",
      state_changed: true,
      evidence: { task_id: taskId, runner_detail: why },
      message:
        "The Attempt was recorded, but the project's Runner could not be told its fence, so it is not handed out yet. Repeat this call with the same idempotency_key once a Runner serves the project.",
    });
  }

  return { runOnRefResolver };
}
