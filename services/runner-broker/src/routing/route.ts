/**
 * Routing a call to a Project incarnation's Runner: the one routing test (the lease holder,
 * connected, serving this incarnation), the wait for a Runner that is starting (or that the
 * call starts through the provisioner), and why no Runner can be reached when none is.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseCanonicalProjectId, PipelineStage, ReasonCode, toolFailure, waitForProjectFollowUp } from "@webcodex/contracts";
import type { ToolFailure, Result } from "@webcodex/contracts";
import type { RunnerState } from "../runner-registry.js";
import type { BrokerContext } from "../broker-context.js";

/** How long a caller should wait before retrying when a Runner is starting. */
const RUNNER_STARTING_RETRY_MS = 2_000;

/**
 * A Runner that cannot start until something changes, with the pod's own condition: not an
 * endless runner_starting. Nothing ran; waiting for the Project is the follow-up.
 */
export function unschedulableFailure(condition: { type: string; reason: string; message: string; detailCode?: string }, canonicalId: string): ToolFailure {
  return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
    detail_code: condition.detailCode ?? "runner_unschedulable",
    evidence: { condition: { type: condition.type, reason: condition.reason, message: condition.message.slice(0, 500) } },
    message: `The project's Runner cannot start: ${condition.reason}. Nothing was run; your operator can see the cause in the evidence.`,
    follow_up: waitForProjectFollowUp(canonicalId),
  });
}

export type Routing = ReturnType<typeof createRouting>;

export function createRouting(ctx: BrokerContext) {
  const { deps, leases, startedAtMs, confirmedSinceMs, runnerStartWaitMs, transparentStartWaitMs } = ctx;

  const unavailable = async (canonicalId: string, holder: RunnerState | undefined): Promise<ToolFailure> => {
    const last = holder ?? (await deps.registry.lastForProject(canonicalId));
    if (last && last.connectionState === "lost") {
      return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
        detail_code: "runner_lost",
        evidence: { last_heartbeat_ms_ago: Math.max(0, Date.now() - last.lastHeartbeatMs) },
        message: "The project's Runner stopped heartbeating and is lost; nothing was run.",
      });
    }
    const workspace = parseCanonicalProjectId(canonicalId);
    if (deps.provisioner && workspace) {
      try {
        const r = await deps.provisioner.ensureRunner(workspace);
        const state = deps.provisioner.provisioningState ? await deps.provisioner.provisioningState(workspace) : { state: "starting" as const };
        if (state.state === "unschedulable") return unschedulableFailure(state.condition, canonicalId);
        // A refusal that no wait clears by itself (a tenant quota) is answered as such.
        if (state.state === "failed" && state.failure.reason_code === ReasonCode.quotaExceeded) return state.failure;
        return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
          detail_code: "runner_starting",
          evidence: { provisioning: r.action, retry_after_ms: RUNNER_STARTING_RETRY_MS },
          message: "A Runner for this project is starting; nothing was run. Wait for it, then retry.",
          follow_up: waitForProjectFollowUp(canonicalId),
        });
      } catch (error) {
        deps.logger.warn("runner provisioning failed", { project: canonicalId, error });
      }
    }
    return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
      detail_code: "no_live_runner",
      message: "No Runner is serving this project right now; nothing was run.",
    });
  };

  /**
   * The one routing test: the Project's lease holder, if it is connected and serves this
   * incarnation (same canonical id and root identity). Dispatch, the Attempt fence relay (both
   * through routeWaitingForStart) and runner_state use it.
   */
  const routableHolder = async (canonicalId: string, rootIdentity: string) => {
    const lease = await leases.current(canonicalId);
    const holder = lease ? await deps.registry.get(lease.owner) : undefined;
    if (!lease || !holder || holder.connectionState !== "connected" || holder.canonicalId !== canonicalId || holder.lastHeartbeatMs < confirmedSinceMs)
      return { holder, why: "not_routable" as const };
    if (holder.rootIdentity !== rootIdentity) return { holder, why: "other_incarnation" as const };
    return { holder, lease, why: "ok" as const };
  };

  /** Whether calls to a Project incarnation are routed now, else whether any Runner is known for it. */
  const projectRunnerState = async (canonicalId: string, rootIdentity: string): Promise<"ready" | "registered" | "none"> => {
    if ((await routableHolder(canonicalId, rootIdentity)).why === "ok") return "ready";
    return (await deps.registry.lastForProject(canonicalId)) ? "registered" : "none";
  };

  /**
   * Whether a Project's Runner may be starting: a Runner is registered and not lost but not
   * routable yet (its lease is pending), or this broker started moments ago and the Project
   * has had a Runner before (a lease fence was issued for it, so its Runner may be
   * re-registering after a restart). A Project no Runner ever served is answered at once,
   * whenever it is asked: exactly as another tenant's project, with no wait to tell them apart.
   */
  const runnerMayBeStarting = async (canonicalId: string, holder: RunnerState | undefined): Promise<boolean> => {
    const last = holder ?? (await deps.registry.lastForProject(canonicalId));
    if (last !== undefined && last.connectionState !== "lost") return true;
    if (Date.now() - startedAtMs >= runnerStartWaitMs) return false;
    return last !== undefined || (await leases.highestFence(canonicalId).catch(() => 1)) > 0;
  };

  /**
   * A call for a Project whose Runner is stopped (idle, or not yet started since a restart)
   * starts it through the provisioner, which knows the Project's workspace, and then waits
   * for it like any starting Runner. False when nothing was started: no provisioner, a Runner
   * that is not lost, or a workspace the provisioner does not have.
   */
  const startStoppedRunner = async (canonicalId: string, holder: RunnerState | undefined): Promise<boolean> => {
    const workspace = parseCanonicalProjectId(canonicalId);
    if (!deps.provisioner || !workspace || (holder && holder.connectionState !== "lost")) return false;
    const r = await deps.provisioner.ensureRunner(workspace).catch(() => undefined);
    if (r && r.action !== "exists") deps.logger.info("started the project's Runner for a call", { project: canonicalId, runner: r.name, action: r.action });
    // A start the provisioner refused (a tenant quota) is answered now, not after the start window.
    const state = r && deps.provisioner.provisioningState ? await deps.provisioner.provisioningState(workspace).catch(() => undefined) : undefined;
    if (state?.state === "failed" && state.failure.reason_code === ReasonCode.quotaExceeded) return false;
    return r !== undefined;
  };

  /**
   * The route to a Project incarnation's Runner: its lease holder by the one routing test, or
   * why no Runner can be reached (nothing was sent). When no Runner is routable but one may be
   * starting, waits for it (bounded by runnerStartWaitMs; nothing runs meanwhile). Dispatch and
   * the Attempt fence relay both route through it; `what` names the request in the log.
   */
  const routeWaitingForStart = async (
    canonicalId: string,
    rootIdentity: string,
    signal: AbortSignal,
    what: Record<string, string>,
  ): Promise<Result<{ holder: RunnerState; fence: number }>> => {
    const started = Date.now();
    let route = await routableHolder(canonicalId, rootIdentity);
    let waitedMs = 0;
    const startedNow = route.why === "not_routable" && (await startStoppedRunner(canonicalId, route.holder));
    if (startedNow || (route.why === "not_routable" && (await runnerMayBeStarting(canonicalId, route.holder)))) {
      // A Runner this call started (stopped for idleness) gets a process start's time, not a re-registration's.
      const deadline = started + (startedNow ? Math.max(runnerStartWaitMs, transparentStartWaitMs) : runnerStartWaitMs);
      for (let delay = 20; route.why === "not_routable" && !signal.aborted && Date.now() < deadline; delay = Math.min(delay * 2, 250)) {
        await sleep(Math.min(delay, Math.max(1, deadline - Date.now())), undefined, { signal }).catch(() => undefined);
        route = await routableHolder(canonicalId, rootIdentity);
      }
      waitedMs = Date.now() - started;
      if (route.why !== "not_routable")
        deps.logger.info("call waited for the project's Runner to start", { project: canonicalId, ...what, waited_ms: waitedMs });
    }
    if (route.why === "ok") return { ok: true, holder: route.holder, fence: route.lease.fence };
    if (route.why === "other_incarnation") {
      return {
        ok: false,
        failure: toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
          detail_code: "runner_serves_other_incarnation",
          message: "No Runner is serving this project right now; nothing was run.",
        }),
      };
    }
    const f = await unavailable(canonicalId, route.holder);
    return { ok: false, failure: waitedMs > 0 ? { ...f, evidence: { ...f.evidence, waited_for_runner_ms: waitedMs } } : f };
  };

  return { routableHolder, projectRunnerState, routeWaitingForStart };
}
