/**
 * The RPCs on a call's path to a Runner: Dispatch (relayed through the broker, Job waits and
 * observations through the Job desk, continuation facts recorded), GetRoute (a direct route
 * for the gateway to call the Runner itself), and RaiseProjectAttemptFence.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import {
  capabilityMissingFailure,
  parseCanonicalProjectId,
  PipelineStage,
  ReasonCode,
  RunnerCapabilities,
  toolDefinition,
  toolFailure,
  failureToWire,
} from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { connectCodeName, mintRouteCredential, provenNotSent } from "@webcodex/platform";
import { JOB_OBSERVE_TOOLS } from "../jobs/job-desk.js";
import { runnerCredential } from "../runner-auth.js";
import { DEFAULT_ROUTE_TTL_MS } from "../broker-context.js";
import type { BrokerContext } from "../broker-context.js";
import type { Routing } from "../routing/route.js";
import type { RunnerCalls } from "../routing/runner-calls.js";

/** How long the broker waits for a Runner to record a raised Attempt fence. */
const RAISE_FENCE_TIMEOUT_MS = 10_000;

export function createCallRpcs(
  ctx: BrokerContext,
  routing: Pick<Routing, "routeWaitingForStart">,
  calls: Pick<RunnerCalls, "desk" | "dispatchToHolder">,
): Pick<ServiceImpl<typeof RunnerBrokerService>, "raiseProjectAttemptFence" | "getRoute" | "dispatch"> {
  const { deps, runnerClient, dispatchTimeoutMs, toRunner } = ctx;
  const { routeWaitingForStart } = routing;
  const { desk, dispatchToHolder } = calls;

  return {
    /**
     * Tells the Project's lease holder that a Task's Attempt fence rose, and answers once that
     * Runner recorded it durably. Routed as a Dispatch to the same incarnation is (a Runner
     * serving another root is not told), waiting for a Runner that may be starting as a call
     * does. Any failure means no Runner was told: the gateway then does not hand out the Attempt.
     */
    async raiseProjectAttemptFence(req, ctx) {
      const attempt = req.attempt;
      if (!req.projectCanonicalId || !req.rootIdentity || !attempt?.taskId || attempt.fence <= 0n)
        throw new ConnectError("project_canonical_id, root_identity and attempt (task_id, fence) are required", Code.InvalidArgument);
      const notTold = (f: ToolFailure) => ({ highest: 0n, failure: failureToWire(f) });
      const route = await routeWaitingForStart(req.projectCanonicalId, req.rootIdentity, ctx.signal, { relay: "attempt_fence" });
      if (!route.ok) return notTold(route.failure);
      const runner = route.holder;
      if (!RunnerCapabilities.fromWire(runner.capabilities).has("attemptFencing"))
        return notTold(capabilityMissingFailure(["attemptFencing"], runner.build, "The project's Runner cannot check Attempt fences."));
      try {
        const res = await runnerClient(runner.endpointUrl).raiseAttemptFence(
          { attempt: { taskId: attempt.taskId, fence: attempt.fence } },
          { timeoutMs: Math.min(dispatchTimeoutMs, RAISE_FENCE_TIMEOUT_MS), headers: toRunner(runner), signal: ctx.signal },
        );
        return res.failure ? { highest: 0n, failure: res.failure } : { highest: res.highest };
      } catch (error) {
        deps.logger.warn("attempt fence not delivered to the runner", { runner_id: runner.runnerId, code: connectCodeName(ConnectError.from(error).code) });
        return notTold(
          toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
            detail_code: provenNotSent(error) ? "runner_unreachable" : "runner_connection_lost",
            message: "The project's Runner could not be told the Attempt's fence.",
          }),
        );
      }
    },

    /**
     * A route to the Project's lease holder for a gateway to call it directly (same routing
     * and wait as Dispatch), or "relay" when direct calls cannot be made here. The route's
     * credential is keyed by that Runner's own credential, for the lease's fence, and expires
     * after routeTtlMs; the Runner itself admits a direct call only under the lease it holds.
     */
    async getRoute(req, ctx) {
      if (!req.projectCanonicalId || !req.rootIdentity) throw new ConnectError("project_canonical_id and root_identity are required", Code.InvalidArgument);
      const called = deps.provisioner?.noteCall ? parseCanonicalProjectId(req.projectCanonicalId) : undefined;
      if (called) deps.provisioner?.noteCall?.(called);
      if (!deps.runnerToken || deps.directRoutes === false) return { route: { kind: "relay" } };
      const route = await routeWaitingForStart(req.projectCanonicalId, req.rootIdentity, ctx.signal, { relay: "route" });
      if (!route.ok) return { failure: failureToWire(route.failure) };
      const runner = route.holder;
      const observeCalls = deps.continuations ? await deps.continuations.awaitsModelCall(req.projectCanonicalId).catch(() => true) : false;
      const expiresAtMs = Date.now() + (deps.routeTtlMs ?? DEFAULT_ROUTE_TTL_MS);
      return {
        route: {
          kind: "direct",
          runnerId: runner.runnerId,
          endpointUrl: runner.endpointUrl,
          fence: BigInt(route.fence),
          expiresAtUnixMs: BigInt(expiresAtMs),
          credential: mintRouteCredential(runnerCredential(deps.runnerToken, runner), { runnerId: runner.runnerId, fence: route.fence, expiresAtMs }),
          capabilities: runner.capabilities,
          build: runner.build,
          observeCalls,
        },
      };
    },

    async dispatch(req, ctx) {
      const def = toolDefinition(req.tool);
      if (!def) throw new ConnectError("unknown tool", Code.InvalidArgument);
      // A call keeps its Project's Runner from an idle stop.
      const called = deps.provisioner?.noteCall ? parseCanonicalProjectId(req.projectCanonicalId) : undefined;
      if (called) deps.provisioner?.noteCall?.(called);
      // Every Dispatch is a model call (card helpers use RecordJobContinuation): after an
      // accepted continuation dispatch, the first one is the fresh turn. The facts this call
      // established go back to the gateway for the call's audit row.
      const facts: Array<{ subject: string; id: string; fact: string }> = [];
      if (deps.continuations) {
        const fresh = await deps.continuations
          .observeModelCall(req.projectCanonicalId)
          .catch((error: unknown) => (deps.logger.warn("fresh turn not recorded", { error }), [] as string[]));
        for (const id of fresh) facts.push({ subject: "job", id, fact: "fresh_turn_observed" });
      }
      const withFacts = async <A extends object>(answer: Promise<A>) => ({ ...(await answer), continuationFacts: facts });
      if (desk && JOB_OBSERVE_TOOLS.has(req.tool)) {
        const args = JSON.parse(req.argumentsJson) as Record<string, unknown>;
        if (req.tool === "wait_for_job_terminal" && deps.continuations && typeof args["job_id"] === "string") {
          const jobId = args["job_id"];
          if (
            await deps.continuations
              .observeConsume({ projectCanonicalId: req.projectCanonicalId, jobId })
              .catch((error: unknown) => (deps.logger.warn("consume not recorded", { error }), false))
          ) {
            facts.push({ subject: "job", id: jobId, fact: "consumed" });
          }
        }
        if (req.tool === "wait_for_job_terminal")
          return withFacts(desk.wait(req.projectCanonicalId, args, ctx.signal, () => dispatchToHolder(req, def, ctx.signal)));
        return withFacts(
          desk.observe(req.projectCanonicalId, args, ctx.signal, (jobIds) =>
            dispatchToHolder({ ...req, argumentsJson: JSON.stringify({ ...args, job_ids: jobIds }) }, def, ctx.signal),
          ),
        );
      }
      return withFacts(dispatchToHolder(req, def, ctx.signal));
    },
  };
}
