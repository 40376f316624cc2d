/**
 * The tools a Project's Runner runs (execution "runner"), reached through the broker: the
 * Project is resolved and authorized, the call's Workflow Session and attempt_ref admitted,
 * the call dispatched, and the outcome recorded into its Session. Passive job attention
 * rides along.
 */
import { randomUUID } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import {
  isJournaledTool,
  PipelineStage,
  PipelineSubStage,
  ReasonCode,
  runnerArguments,
  toolDefinition,
  toolFailure,
  failureFromWire,
} from "@webcodex/contracts";
import type { GatewayArguments, ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import { dependencyFailure, keepingCause, now, subStageDone, timedStage } from "../call-context.js";
import type { CallContext, Outcome, ProjectAddress } from "../call-context.js";
import { attentionItems, jobFactsOf, jobsOfCall, watchKey } from "../job-attention.js";
import type { JobAttention, JobAttentionItem } from "../job-attention.js";
import { resolveCallProject } from "./call-scope.js";
import type { ResolutionCache } from "./call-scope.js";
import type { RouteTable } from "./routes.js";

/** The Attempt a workspace call was admitted for, as the dispatch carries it to the Runner. */
type AttemptFence = { taskId: string; fence: bigint };

/**
 * A test hook run between an attempt_ref call's admission and its dispatch (it may hold the
 * call there), so a test can land a takeover in that window. Only a test harness sets it
 * (GatewayTestHooks); no setting or environment variable of a service does.
 */
export type AttemptDispatchHold = (callId: string, signal: AbortSignal) => Promise<void>;
import { sessionCallFacts } from "../session-facts.js";

export interface RunnerToolsDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  logger: Logger;
  /** Longest a call waits for its Workflow Session record before answering anyway (default 1000 ms). */
  sessionRecordBudgetMs?: number | undefined;
  attention: JobAttention;
  /** Test hook: holds an admitted attempt_ref call before its dispatch. */
  attemptDispatchHold?: AttemptDispatchHold | undefined;
  /** Direct routes to Runners (distributed mode); without them every call is dispatched through the broker. */
  routes?: RouteTable | undefined;
  /** Resolved Projects kept for the resolver's TTL (distributed mode); without it every call asks the resolver. */
  resolutionCache?: ResolutionCache | undefined;
}

export function createRunnerTools(deps: RunnerToolsDeps) {
  /**
   * The watched Jobs of this caller and project that have ended, from one observe_jobs on the
   * project's Runner; secondary to the call, so a failure means no attention this time.
   */
  async function endedJobs(jobIds: string[], project: ProjectAddress, ctx: CallContext): Promise<JobAttentionItem[]> {
    try {
      const res = await deps.broker.dispatch(
        {
          callId: randomUUID(),
          projectCanonicalId: project.canonicalId,
          rootIdentity: project.rootIdentity,
          tool: "observe_jobs",
          argumentsJson: JSON.stringify({ job_ids: jobIds }),
        },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return res.failure ? [] : attentionItems(JSON.parse(res.resultJson));
    } catch (error) {
      deps.logger.debug("job attention not observed", { error: ConnectError.from(error).message });
      return [];
    }
  }

  /**
   * A project tool call. With session_id, the Session is resolved against the resolved
   * Project (authority, visibility, lifecycle) before anything is dispatched, and the outcome
   * is recorded into it afterwards. Only the call's own session_id selects a Session.
   */
  async function runOnRunner(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext, callId: string): Promise<Outcome> {
    const started = now();
    // The gateway's own arguments (normalizeToolCall validated them against def's input schema); a Runner tool names its Project.
    const { project: selector = "", session_id: sessionSelector, attempt_ref: attemptRef }: GatewayArguments = args;
    const scope = await resolveCallProject(deps.refResolver, selector, ctx, deps.resolutionCache);
    if (!scope.ok) return scope;
    const project = scope.project;
    if (sessionSelector !== undefined) {
      const failure = await resolveSession(sessionSelector, project.canonicalId, ctx);
      if (failure) return { ok: false, failure };
    }
    // attempt_ref: admitted only while that Attempt holds its Task's fence; else nothing runs.
    // The admitted (task, fence) travels with the dispatch: the Runner refuses it too once a
    // takeover's higher fence has reached it (the storage side of the fence).
    let attempt: AttemptFence | undefined;
    if (attemptRef !== undefined) {
      const admitted = await admitAttempt(attemptRef, project.canonicalId, ctx);
      if ("failure" in admitted) return { ok: false, failure: admitted.failure };
      attempt = admitted.attempt;
      await deps.attemptDispatchHold?.(callId, ctx.signal);
    }
    const key = watchKey(ctx.caller.principal.clientId, ctx.caller.principal.subject, project.canonicalId);
    const watched = deps.attention.watched(key, jobsOfCall(def.name, args));
    const [dispatched, items] = await Promise.all([
      dispatch(def, runnerArguments(args), project, ctx, callId, attempt),
      watched.length > 0 ? endedJobs(watched, project, ctx) : Promise.resolve([]),
    ]);
    // A write transaction cut off mid-call is finished by the Runner's start-up recovery, which
    // records it under this call id; read_workspace_changes reports it as recovered_writes, and
    // the Session handoff shows it on this call once the restarted Runner has registered.
    const outcome: Outcome =
      !dispatched.ok && dispatched.failure.outcome_unknown && isJournaledTool(def.name)
        ? { ok: false, failure: keepingCause(dispatched.failure, { ...dispatched.failure, evidence: { ...dispatched.failure.evidence, call_id: callId } }) }
        : dispatched;
    if (outcome.ok) {
      const facts = jobFactsOf((ctx.ranLiteral ?? def).name, args, outcome.result);
      if (facts.started !== undefined) deps.attention.watch(key, facts.started);
      if (facts.ended.length > 0) deps.attention.seen(key, facts.ended);
    }
    if (items.length > 0) ctx.attention = { key, items };
    if (ctx.sessionId !== "") await recordSessionCall(ctx.ranLiteral ?? def, outcome, ctx, callId, Math.round(now() - started), args);
    return outcome;
  }

  /** Re-runs an attempt_ref's owner, lifecycle, lease, fence and generation checks for this Project; a failure means no dispatch. */
  async function admitAttempt(attemptRef: string, projectCanonicalId: string, ctx: CallContext): Promise<{ failure: ToolFailure } | { attempt: AttemptFence }> {
    const t = now();
    try {
      const res = await deps.refResolver.admitAttemptRef(
        { attemptRef, projectCanonicalId },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return res.failure ? { failure: failureFromWire(res.failure) } : { attempt: { taskId: res.taskId, fence: res.attemptFence } };
    } catch (error) {
      return { failure: dependencyFailure(error, PipelineStage.authorization, false) };
    } finally {
      subStageDone(ctx.stages, PipelineSubStage.attemptAdmission, t);
    }
  }

  /** Canonicalizes and authorizes a business session_id for `projectCanonicalId`; a failure means no dispatch. */
  async function resolveSession(selector: string, projectCanonicalId: string, ctx: CallContext): Promise<ToolFailure | undefined> {
    const t = now();
    try {
      const res = await deps.refResolver.resolveSession(
        { selector, projectCanonicalId, requireOpen: true },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      if (res.failure || !res.session)
        return res.failure
          ? failureFromWire(res.failure)
          : toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, { detail_code: "session_not_found" });
      ctx.sessionId = res.session.sessionId;
      return undefined;
    } catch (error) {
      return dependencyFailure(error, PipelineStage.resolution, false);
    } finally {
      subStageDone(ctx.stages, PipelineSubStage.sessionResolution, t);
    }
  }

  /**
   * Secondary to the business result: bounded by sessionRecordBudgetMs, independent of the
   * caller's cancellation, and a failure is logged, never returned.
   */
  async function recordSessionCall(
    def: ToolDefinition,
    outcome: Outcome,
    ctx: CallContext,
    callId: string,
    durationMs: number,
    args: Record<string, unknown>,
  ): Promise<void> {
    const t = now();
    const facts = sessionCallFacts(def, outcome, args);
    // A ref'd timer (AbortSignal.timeout is unref'd): the budget holds even on an idle loop.
    const budget = new AbortController();
    const timer = setTimeout(() => budget.abort(), deps.sessionRecordBudgetMs ?? 1_000);
    try {
      const res = await deps.refResolver.recordSessionCall(
        {
          sessionSelector: ctx.sessionId,
          projectCanonicalId: ctx.projectCanonicalId,
          call: { callId, tool: def.name, effect: def.effect, durationMs, ...facts, ...(ctx.parentCallId ? { parentCallId: ctx.parentCallId } : {}) },
        },
        { signal: budget.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      if (res.failure)
        deps.logger.warn("session call not recorded", {
          call_id: callId,
          session_id: ctx.sessionId,
          reason_code: res.failure.reasonCode,
          detail_code: res.failure.detailCode,
        });
    } catch (error) {
      deps.logger.warn("session call not recorded", { call_id: callId, session_id: ctx.sessionId, error: ConnectError.from(error).message });
    } finally {
      clearTimeout(timer);
      subStageDone(ctx.stages, PipelineSubStage.sessionRecord, t);
    }
  }

  /**
   * The dispatch stage: on a direct route the gateway calls the Project's Runner itself;
   * otherwise the broker runs the call on it (or, for a rewrite it cannot serve, the literal call).
   */
  async function dispatch(
    def: ToolDefinition,
    runnerArgs: Record<string, unknown>,
    project: ProjectAddress,
    ctx: CallContext,
    callId: string,
    attempt?: AttemptFence,
  ): Promise<Outcome> {
    const fallback = ctx.literal ? { tool: ctx.literal.tool, argumentsJson: JSON.stringify(runnerArguments(ctx.literal.arguments)) } : undefined;
    const headers = principalHeaders(ctx.caller.principal);
    try {
      const answer = await timedStage(ctx.stages, PipelineStage.dispatch, async () => {
        const routed = deps.routes
          ? await deps.routes.call(
              {
                callId,
                projectCanonicalId: project.canonicalId,
                rootIdentity: project.rootIdentity,
                def,
                args: runnerArgs,
                attempt,
                hasFallback: fallback !== undefined,
                signal: ctx.signal,
              },
              headers,
            )
          : ({ relay: true } as const);
        if (!routed.relay) return routed;
        return deps.broker.dispatch(
          {
            callId,
            projectCanonicalId: project.canonicalId,
            rootIdentity: project.rootIdentity,
            tool: def.name,
            argumentsJson: JSON.stringify(runnerArgs),
            ...(fallback ? { fallback } : {}),
            ...(attempt ? { attempt } : {}),
          },
          { signal: ctx.signal, headers },
        );
      });
      if ("relay" in answer) {
        if (answer.failure) return { ok: false, failure: answer.failure };
        return { ok: true, result: JSON.parse(answer.resultJson) as Record<string, unknown> };
      }
      if (answer.answeredFallback && ctx.literal) ctx.ranLiteral = toolDefinition(ctx.literal.tool);
      if (answer.continuationFacts?.length) ctx.continuationFacts = answer.continuationFacts;
      if (answer.failure) return { ok: false, failure: failureFromWire(answer.failure) };
      return { ok: true, result: JSON.parse(answer.resultJson) as Record<string, unknown> };
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, PipelineStage.dispatch, def.effect !== "read_only") };
    }
  }

  return { runOnRunner };
}
