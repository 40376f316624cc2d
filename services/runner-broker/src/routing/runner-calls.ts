/**
 * One call on the Project's Runner: capability admission (with the caller's literal call as a
 * fallback), the per-Project concurrency slot, the fenced Execute itself, and the Job desk that
 * records a started Job and answers for Jobs whose Runner is gone.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ConnectError } from "@connectrpc/connect";
import {
  capabilityMissingFailure,
  missingCapabilities,
  PipelineStage,
  ReasonCode,
  RunnerCapabilities,
  toolDefinition,
  toolFailure,
  failureToWire,
} from "@webcodex/contracts";
import type { DomainFailureInit, ToolDefinition, ToolFailure } from "@webcodex/contracts";
import { connectCodeName, provenNotSent } from "@webcodex/platform";
import type { RunnerState } from "../runner-registry.js";
import type { SlotAdmission } from "../admission/concurrency.js";
import { createJobDesk, JOB_START_TOOLS } from "../jobs/job-desk.js";
import type { BrokerContext } from "../broker-context.js";
import type { Routing } from "./route.js";

/** A call's answer as Dispatch returns it (a refusal carries its failure, nothing ran). */
export const failure = (f: ToolFailure) => ({ resultJson: "", failure: failureToWire(f) });

export type Answer = { resultJson: string; failure?: DomainFailureInit; answeredFallback?: boolean };
export interface RunnerCall {
  callId: string;
  tool: string;
  argumentsJson: string;
  rootIdentity: string;
  projectCanonicalId: string;
  /** The caller's call without a rewrite to another tool (see DispatchRequest.fallback). */
  fallback?: { tool: string; argumentsJson: string } | undefined;
  /** The Agent Attempt the call was admitted for (attempt_ref): the Runner checks its fence against the Task's mark. */
  attempt?: { taskId: string; fence: bigint } | undefined;
}

export type RunnerCalls = ReturnType<typeof createRunnerCalls>;

export function createRunnerCalls(ctx: BrokerContext, routing: Pick<Routing, "routeWaitingForStart">) {
  const { deps, runnerClient, limiter, leaseTtlMs, admissionWaitMs, dispatchTimeoutMs, toRunner } = ctx;
  const { routeWaitingForStart } = routing;

  /**
   * A concurrency slot for `call`, queueing up to admissionWaitMs (polling with a short
   * backoff, so it works the same for the in-process and the Redis limiter). Nothing has run
   * while a call waits; the caller's cancellation ends the wait.
   */
  const acquireSlot = async (call: RunnerCall, signal: AbortSignal): Promise<SlotAdmission> => {
    const ttlMs = dispatchTimeoutMs + 5_000;
    const deadline = Date.now() + admissionWaitMs;
    for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
      const slot = await limiter.tryAcquire(call.projectCanonicalId, call.callId, ttlMs);
      if (slot.admitted || signal.aborted || Date.now() + delay > deadline) return slot;
      await sleep(delay, undefined, { signal }).catch(() => undefined);
    }
  };

  /**
   * One call on one Runner under a fence, inside the Project's concurrency admission. The
   * caller's abort (MCP notifications/cancelled through the gateway) reaches the Runner, which
   * stops the process group of a run that has not returned yet.
   */
  const runOn = async (
    runner: RunnerState,
    fence: number,
    call: RunnerCall,
    signal: AbortSignal,
    unmetered = false,
  ): Promise<{ answer: Answer; reached: boolean }> => {
    const def = toolDefinition(call.tool);
    const slot = unmetered ? { admitted: true as const } : await acquireSlot(call, signal);
    if (!slot.admitted) {
      return {
        reached: true,
        answer: failure(
          toolFailure(ReasonCode.rateLimited, PipelineStage.dispatch, {
            detail_code: "project_concurrency_limit",
            evidence: { limit: limiter.limit, in_flight: slot.inFlight },
            message: "Too many calls are running on this project; nothing was run. Retry after one finishes.",
          }),
        ),
      };
    }
    try {
      const res = await runnerClient(runner.endpointUrl).execute(
        {
          callId: call.callId,
          tool: call.tool,
          argumentsJson: call.argumentsJson,
          rootIdentity: call.rootIdentity,
          fence: BigInt(fence),
          ...(call.attempt ? { attempt: { taskId: call.attempt.taskId, fence: call.attempt.fence } } : {}),
        },
        { timeoutMs: dispatchTimeoutMs, headers: toRunner(runner), signal },
      );
      return { reached: true, answer: { resultJson: res.resultJson, ...(res.failure ? { failure: res.failure } : {}) } };
    } catch (error) {
      const ce = ConnectError.from(error);
      // Refused before sending proves nothing ran; a break mid-call proves nothing either way.
      const notStarted = provenNotSent(error);
      const mayHaveEffect = def?.effect !== "read_only";
      if (signal.aborted) deps.logger.info("runner call cancelled by the caller", { runner_id: runner.runnerId, tool: call.tool });
      else deps.logger.warn("runner call failed", { runner_id: runner.runnerId, code: connectCodeName(ce.code), tool: call.tool });
      return {
        reached: false,
        answer: failure(
          toolFailure(notStarted ? ReasonCode.runnerUnavailable : ReasonCode.runnerLost, PipelineStage.dispatch, {
            detail_code: notStarted ? "runner_unreachable" : "runner_connection_lost",
            outcome_unknown: !notStarted && mayHaveEffect,
            message: notStarted ? "The project's Runner is not reachable; nothing was run." : "The connection to the Runner broke during the call.",
          }),
        ),
      };
    } finally {
      if (!unmetered)
        await limiter.release(call.projectCanonicalId, call.callId).catch((error: unknown) => deps.logger.warn("concurrency slot release failed", { error }));
    }
  };

  const desk = deps.jobs
    ? createJobDesk<DomainFailureInit>({
        jobs: deps.jobs,
        registry: deps.registry,
        // One heartbeat of slack over the Project lease: a Job outlives one missed sync.
        jobLeaseTtlMs: leaseTtlMs + deps.heartbeatIntervalMs,
        logger: deps.logger,
        call: (runner, tool, args, fence, signal, bookkeeping) =>
          runOn(
            runner,
            fence,
            { callId: randomUUID(), tool, argumentsJson: JSON.stringify(args), rootIdentity: runner.rootIdentity, projectCanonicalId: runner.canonicalId },
            signal ?? new AbortController().signal,
            bookkeeping,
          ),
      })
    : undefined;

  /** Routes a call to the Project's lease holder after capability admission. */
  const dispatchToHolder = async (req: RunnerCall, def: ToolDefinition, signal: AbortSignal): Promise<Answer> => {
    const overJobs = await deps.jobQuota?.check(req);
    if (overJobs) return failure(overJobs);
    const route = await routeWaitingForStart(req.projectCanonicalId, req.rootIdentity, signal, { tool: req.tool });
    if (!route.ok) return failure(route.failure);
    const { holder: runner, fence } = route;
    const have = RunnerCapabilities.fromWire(runner.capabilities);
    const missingFor = (d: ToolDefinition, argumentsJson: string) => missingCapabilities(d, JSON.parse(argumentsJson) as Record<string, unknown>, have);
    let call = req;
    let answeredFallback = false;
    let missing = missingFor(def, req.argumentsJson);
    // The canonical call was a rewrite this Runner cannot serve (e.g. run_shell login on a
    // Runner without bash_login_v1): run the caller's literal call, which is equivalent, instead.
    const fallbackDef = req.fallback ? toolDefinition(req.fallback.tool) : undefined;
    if (missing.length > 0 && req.fallback && fallbackDef && fallbackDef.effect === def.effect && fallbackDef.authority === def.authority) {
      call = { ...req, tool: req.fallback.tool, argumentsJson: req.fallback.argumentsJson, fallback: undefined };
      answeredFallback = true;
      missing = missingFor(fallbackDef, call.argumentsJson);
    }
    // A call made for an Agent Attempt runs only where the Runner checks the Attempt's fence.
    if (call.attempt && !have.has("attemptFencing")) missing = [...missing, "attemptFencing"];
    const flag = answeredFallback ? { answeredFallback } : {};
    if (missing.length > 0) {
      return {
        ...failure(capabilityMissingFailure(missing, runner.build, "The project's Runner does not implement this request; nothing was run.")),
        ...flag,
      };
    }
    const { answer } = await runOn(runner, fence, call, signal);
    if (desk && !answer.failure && JOB_START_TOOLS.has(call.tool)) {
      await desk.recordStarted({
        projectCanonicalId: call.projectCanonicalId,
        runner,
        callId: call.callId,
        tool: call.tool,
        fence,
        resultJson: answer.resultJson,
      });
    }
    return { ...answer, ...flag };
  };

  return { runOn, desk, dispatchToHolder };
}
