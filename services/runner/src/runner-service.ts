/**
 * The RunnerService: executes canonical tool calls in one workspace. It advertises the
 * capabilities its handlers implement (less any withheld by configuration) and refuses a call
 * whose prerequisites are not among them.
 * Mutating calls are fenced: a call carrying a fence lower than the highest this Runner has
 * seen (from a dispatch or from the broker's lease grants) is rejected before it runs; one made
 * for an Agent Attempt is also refused (fence_stale) when a higher fence of the same Task has
 * reached this Runner (the durable per-Task mark of AttemptFenceStore).
 */
import { timingSafeEqual, hash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ExecuteRequest, RunnerService } from "@webcodex/proto";
import {
  capabilityMissingFailure,
  PipelineStage,
  failureToWire,
  isToolFailureError,
  missingCapabilities,
  readAgentTaskFollowUp,
  ReasonCode,
  RUNNER_PROTOCOL_GENERATION,
  RunnerCapabilities,
  runnerCapabilityCatalog,
  toolDefinition,
  toolFailure,
} from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { ROUTE_CREDENTIAL_HEADER, RUNNER_TOKEN_HEADER, verifyRouteCredential } from "@webcodex/platform";
import type { Logger, RouteGrant } from "@webcodex/platform";
import type { AttemptFenceStore } from "./attempt-fences.js";
import { withCall } from "./call-context.js";

export type ToolHandler = (args: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;

export interface RunnerHandlers {
  /** Canonical tool name → handler. */
  tools: Record<string, ToolHandler>;
  /** What this Runner advertises from the start; a call needing anything else (or in `probed`) is refused before its handler runs. */
  capabilities: readonly RunnerCapabilityId[];
  /**
   * What it advertises besides once its runtime probes answered (the validation rows, each only
   * when its toolchain runs). A call needing one of these that arrives before then waits for
   * the probes instead of being refused.
   */
  probed?: Promise<readonly RunnerCapabilityId[]>;
}

/** Everything `handlers` advertise, in catalog order, once their probes answered. */
export async function advertisedCapabilities(handlers: RunnerHandlers): Promise<readonly RunnerCapabilityId[]> {
  const all = new Set<RunnerCapabilityId>([...handlers.capabilities, ...((await handlers.probed) ?? [])]);
  return runnerCapabilityCatalog.filter((row) => all.has(row.id)).map((row) => row.id);
}

/**
 * The highest fencing token this Runner has seen for its Project. Shared by the
 * RunnerService (fences carried by dispatches) and the registration loop (fences the broker
 * granted or reports for the Project), so a Runner that lost its lease while paused learns
 * the newer fence on its next heartbeat and refuses stale mutating calls from then on.
 */
export interface FenceGuard {
  /** 0 until a fence is seen. */
  readonly highest: number;
  /** Raises the floor (never lowers it). */
  observe(fence: number): void;
  /** Admits a mutating call's fence (raising the floor) unless it is below the floor. */
  admit(fence: number): boolean;
  /**
   * The lease this Runner holds, as its registration loop last learned it: the fence and the
   * time (this process's clock) before which the lease cannot have passed to another Runner.
   * `fence` 0: not held.
   */
  holdLease(fence: number, validUntilMs: number): void;
  /** Whether a direct call on a route with `fence` may run now: that fence is the lease held, still valid, and no higher fence was seen. */
  routable(fence: number, nowMs: number): boolean;
}

export function createFenceGuard(): FenceGuard {
  let highest = 0;
  let held = { fence: 0, validUntilMs: 0 };
  return {
    get highest() {
      return highest;
    },
    observe(fence) {
      if (Number.isFinite(fence) && fence > highest) highest = fence;
    },
    admit(fence) {
      if (fence < highest) return false;
      highest = fence;
      return true;
    },
    holdLease(fence, validUntilMs) {
      held = { fence, validUntilMs };
      if (fence > highest) highest = fence;
    },
    routable(fence, nowMs) {
      return fence > 0 && fence === held.fence && fence >= highest && nowMs < held.validUntilMs;
    },
  };
}

export interface RunnerServiceDeps {
  runnerId: string;
  build: string;
  rootIdentity: () => Promise<string>;
  handlers: RunnerHandlers;
  logger: Logger;
  /** Shared with the registration loop; a private guard is used when absent. */
  fence?: FenceGuard;
  /** When set, Execute and Describe require it in RUNNER_TOKEN_HEADER. */
  runnerToken?: string;
  /** Per-Task Attempt fence marks; without it a call made for an Attempt is refused (nothing can check its fence). */
  attemptFences?: AttemptFenceStore;
  /** Calls on routes (direct from a gateway) that run at once in this workspace; more queue (default 16). */
  routeConcurrency?: number;
  /** How long a route call over the limit queues before it is refused rate_limited (default 5000 ms). */
  routeAdmissionWaitMs?: number;
  /** The clock route expiries and lease validity are read on (default Date.now). */
  now?: () => number;
}

/** A RaiseAttemptFence answer that raised nothing, with the structured reason. */
const notRaised = (reason: ToolFailure["reason_code"], detailCode: string, message: string) => ({
  highest: 0n,
  failure: failureToWire(toolFailure(reason, PipelineStage.dispatch, { detail_code: detailCode, message })),
});

const digest = (s: string) => hash("sha256", s, "buffer");

/** The call's arguments for the capability check; unparseable ones fail later, where the handler would get them. */
function argumentsForCheck(argumentsJson: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(argumentsJson);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

type ExecuteAnswer = { resultJson: string; failure?: ReturnType<typeof failureToWire> };

/**
 * The direct calls running at once, and a FIFO of those waiting for a slot (each gives up
 * after `waitMs` or when its caller cancels). Nothing has run while a call waits.
 */
function createRouteSlots(limit: number, waitMs: number) {
  let running = 0;
  const waiting: Array<() => void> = [];
  return {
    limit,
    inFlight: () => running,
    async acquire(signal: AbortSignal): Promise<boolean> {
      if (running < limit) {
        running += 1;
        return true;
      }
      return new Promise<boolean>((resolve) => {
        const grant = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", giveUp);
          running += 1;
          resolve(true);
        };
        const giveUp = () => {
          clearTimeout(timer);
          const i = waiting.indexOf(grant);
          if (i >= 0) waiting.splice(i, 1);
          resolve(false);
        };
        const timer = setTimeout(giveUp, waitMs);
        signal.addEventListener("abort", giveUp, { once: true });
        waiting.push(grant);
      });
    },
    release(): void {
      running -= 1;
      waiting.shift()?.();
    },
  };
}

export function createRunnerService(deps: RunnerServiceDeps): ServiceImpl<typeof RunnerService> {
  const advertisedAtStart = new RunnerCapabilities(deps.handlers.capabilities);
  const advertised = advertisedCapabilities(deps.handlers).then((ids) => new RunnerCapabilities(ids));
  /** The capabilities a call needs that this Runner does not advertise (awaiting the probes only when it needs more than the start-up set). */
  const missingFor = async (tool: string, args: Record<string, unknown>): Promise<RunnerCapabilityId[]> => {
    const missing = missingCapabilities(toolDefinition(tool), args, advertisedAtStart);
    return missing.length === 0 || deps.handlers.probed === undefined ? missing : missingCapabilities(toolDefinition(tool), args, await advertised);
  };
  const fence = deps.fence ?? createFenceGuard();
  const expected = deps.runnerToken ? digest(deps.runnerToken) : undefined;
  const authorize = (headers: Headers) => {
    if (!expected) return;
    const got = headers.get(RUNNER_TOKEN_HEADER);
    if (!got || !timingSafeEqual(digest(got), expected)) throw new ConnectError("runner token required", Code.Unauthenticated);
  };
  /**
   * The storage side of Attempt fencing: the gateway admitted the call's attempt_ref, but a
   * takeover may have reached this Runner since. Nothing is written or run when refused.
   */
  const admitAttempt = async (taskId: string, attemptFence: number, tool: string, callId: string): Promise<ToolFailure | undefined> => {
    if (!deps.attemptFences) {
      return toolFailure(ReasonCode.capabilityMissing, PipelineStage.dispatch, {
        detail_code: "attempt_fencing_unavailable",
        message: "This Runner cannot check Attempt fences; nothing was run.",
      });
    }
    let admission;
    try {
      admission = await deps.attemptFences.admit(taskId, attemptFence);
    } catch (error) {
      deps.logger.error("attempt fence mark unavailable; call refused", { tool, call_id: callId, task_id: taskId, error: String(error) });
      return toolFailure(ReasonCode.internal, PipelineStage.dispatch, {
        detail_code: "attempt_fence_store_unavailable",
        message: "The Runner could not record the Attempt's fence; nothing was run.",
      });
    }
    if (admission.admitted) return undefined;
    if (admission.why === "invalid_task_id")
      return toolFailure(ReasonCode.invalidValue, PipelineStage.dispatch, { detail_code: "task_not_found", message: "No such task for this caller." });
    deps.logger.warn("stale attempt fence rejected", { tool, call_id: callId, task_id: taskId, attempt_fence: attemptFence, current_fence: admission.highest });
    return toolFailure(ReasonCode.fenceStale, PipelineStage.authorization, {
      detail_code: "attempt_superseded",
      evidence: { attempt_fence: attemptFence, current_fence: admission.highest },
      message: "This attempt no longer holds its task's fence; nothing was done.",
      follow_up: readAgentTaskFollowUp(taskId),
    });
  };
  /** One call once its caller is authorized (Runner credential) or its route admitted. */
  const executeAdmitted = async (req: ExecuteRequest, signal: AbortSignal): Promise<ExecuteAnswer> => {
    const handler = deps.handlers.tools[req.tool];
    if (!handler)
      return {
        resultJson: "",
        failure: failureToWire(toolFailure(ReasonCode.capabilityMissing, PipelineStage.dispatch, { detail_code: "tool_not_implemented" })),
      };
    // The broker routes by Project; a call for another root is refused before anything runs.
    if (req.rootIdentity && req.rootIdentity !== (await deps.rootIdentity())) {
      return {
        resultJson: "",
        failure: failureToWire(toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, { detail_code: "root_identity_mismatch" })),
      };
    }
    // The broker checks prerequisites before dispatch; this holds the line for a capability
    // the Runner withholds (or a caller that skipped the broker): nothing runs without it.
    const missing = await missingFor(req.tool, argumentsForCheck(req.argumentsJson));
    if (missing.length > 0) {
      return {
        resultJson: "",
        failure: failureToWire(capabilityMissingFailure(missing, deps.build, "This Runner does not offer a capability the call needs; nothing was run.")),
      };
    }
    const callFence = Number(req.fence);
    const mutating = toolDefinition(req.tool)?.effect !== "read_only";
    if (mutating && !fence.admit(callFence)) {
      deps.logger.warn("stale fence rejected", { tool: req.tool, call_id: req.callId, fence: callFence, highest: fence.highest });
      return {
        resultJson: "",
        failure: failureToWire(
          toolFailure(ReasonCode.fenceRejected, PipelineStage.dispatch, {
            detail_code: "stale_fence",
            evidence: { fence: callFence, highest_seen: fence.highest },
            message: "The call carried a stale lease fence; nothing was run.",
          }),
        ),
      };
    }
    if (!mutating) fence.observe(callFence);
    if (mutating && req.attempt) {
      const refused = await admitAttempt(req.attempt.taskId, Number(req.attempt.fence), req.tool, req.callId);
      if (refused) return { resultJson: "", failure: failureToWire(refused) };
    }
    try {
      const args = JSON.parse(req.argumentsJson) as Record<string, unknown>;
      const result = await withCall(req.callId, () => handler(args, signal));
      return { resultJson: JSON.stringify(result) };
    } catch (error) {
      if (isToolFailureError(error)) return { resultJson: "", failure: failureToWire(error.failure) };
      deps.logger.error("tool handler failed", { tool: req.tool, call_id: req.callId, error });
      return {
        resultJson: "",
        // A read changes nothing, so its outcome is never unknown: it simply failed.
        failure: failureToWire(toolFailure(ReasonCode.internal, PipelineStage.execution, { detail_code: "runner_internal_error", outcome_unknown: mutating })),
      };
    }
  };
  const clock = deps.now ?? Date.now;
  const slots = createRouteSlots(deps.routeConcurrency ?? 16, deps.routeAdmissionWaitMs ?? 5_000);
  /**
   * A direct call (a route credential instead of the Runner credential): genuine for this
   * Runner, not expired, and made under the lease this Runner holds now; anything else is
   * refused before anything runs. A stale route is fence_rejected with nothing done, so the
   * gateway may drop it, ask the broker again and re-send.
   */
  // Credentials whose MAC verified: a gateway presents the same one on every call of a route
  // (a minute by default), and its grant is a function of the string alone (this Runner's id and
  // credential do not change), so the HMAC is computed once per route, not once per call.
  // Expiry, fence and lease are still checked on every call.
  const verified = new Map<string, RouteGrant>();
  const grantOf = (credential: string): RouteGrant | undefined => {
    const known = verified.get(credential);
    if (known || !deps.runnerToken) return known;
    const grant = verifyRouteCredential(deps.runnerToken, deps.runnerId, credential);
    if (grant) {
      if (verified.size >= 64) verified.clear();
      verified.set(credential, grant);
    }
    return grant;
  };
  const routeRefusal = (headers: Headers, callFence: number): ToolFailure | undefined => {
    const credential = headers.get(ROUTE_CREDENTIAL_HEADER) ?? "";
    const grant = grantOf(credential);
    if (!grant || grant.fence !== callFence) throw new ConnectError("route credential not valid for this Runner", Code.Unauthenticated);
    const at = clock();
    if (grant.expiresAtMs > at && fence.routable(grant.fence, at)) return undefined;
    deps.logger.info("stale route refused", { route_fence: grant.fence, highest: fence.highest, expired: grant.expiresAtMs <= at });
    return toolFailure(ReasonCode.fenceRejected, PipelineStage.dispatch, {
      detail_code: "route_stale",
      evidence: { route_fence: grant.fence, highest_seen: fence.highest },
      message: "The call's route no longer names this Runner's lease; nothing was done.",
    });
  };
  return {
    async execute(req, ctx) {
      if (ctx.requestHeader.has(ROUTE_CREDENTIAL_HEADER)) {
        const stale = routeRefusal(ctx.requestHeader, Number(req.fence));
        if (stale) return { resultJson: "", failure: failureToWire(stale) };
        // Per-Project concurrency for direct calls lives here: this Runner serves one workspace.
        if (!(await slots.acquire(ctx.signal)))
          return {
            resultJson: "",
            failure: failureToWire(
              toolFailure(ReasonCode.rateLimited, PipelineStage.dispatch, {
                detail_code: "project_concurrency_limit",
                evidence: { limit: slots.limit, in_flight: slots.inFlight() },
                message: "Too many calls are running on this project; nothing was run. Retry after one finishes.",
              }),
            ),
          };
        try {
          // The lease may have moved while the call queued: checked again, still before anything runs.
          const staleAfterWait = routeRefusal(ctx.requestHeader, Number(req.fence));
          if (staleAfterWait) return { resultJson: "", failure: failureToWire(staleAfterWait) };
          return await executeAdmitted(req, ctx.signal);
        } finally {
          slots.release();
        }
      }
      authorize(ctx.requestHeader);
      return executeAdmitted(req, ctx.signal);
    },
    /**
     * A new Attempt of a Task started: its fence becomes the Task's mark here (durably) before
     * the Attempt is handed to its caller, so a call of an earlier Attempt that arrives from now
     * on is refused even before the new Attempt's first call reaches this Runner.
     */
    async raiseAttemptFence(req, ctx) {
      authorize(ctx.requestHeader);
      const taskId = req.attempt?.taskId ?? "";
      const raised = Number(req.attempt?.fence ?? 0n);
      if (!deps.attemptFences) {
        return notRaised(ReasonCode.capabilityMissing, "attempt_fencing_unavailable", "This Runner cannot check Attempt fences.");
      }
      try {
        const highest = await deps.attemptFences.raise(taskId, raised);
        if (highest === undefined) return notRaised(ReasonCode.invalidValue, "task_not_found", "No such task.");
        return { highest: BigInt(highest) };
      } catch (error) {
        deps.logger.error("attempt fence mark could not be raised", { task_id: taskId, attempt_fence: raised, error: String(error) });
        return notRaised(ReasonCode.internal, "attempt_fence_store_unavailable", "The Runner could not record the Attempt's fence.");
      }
    },
    async describe(_req, ctx) {
      authorize(ctx.requestHeader);
      return {
        runnerId: deps.runnerId,
        rootIdentity: await deps.rootIdentity(),
        protocolGeneration: RUNNER_PROTOCOL_GENERATION,
        build: deps.build,
        capabilities: (await advertised).toWire(),
      };
    },
  };
}
