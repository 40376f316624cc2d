/**
 * The runner-broker service: Runner registration (protocol generation, build, capabilities,
 * Runner credentials), the Project lease each Runner holds (fenced, renewed by heartbeats),
 * routing a call to the lease holder with the lease's fence, admission before dispatch
 * (capability prerequisites, per-Project concurrency: a refusal is structured and nothing
 * runs), fleet status from one counting path, and provisioning Runners on demand.
 *
 * One concept over 400 lines: the broker's RPC surface (registration, leases and routing share the
 * registry and lease state); jobs, fleet, leases and provisioning live in their folders.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client, HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import {
  canonicalProjectId,
  capabilityMissingFailure,
  PipelineStage,
  missingCapabilities,
  parseCanonicalProjectId,
  ReasonCode,
  RunnerCapabilities,
  runnerCapabilityWire,
  toolDefinition,
  toolFailure,
  waitForProjectFollowUp,
  failureToWire,
} from "@webcodex/contracts";
import type { ToolDefinition, ToolFailure, DomainFailureInit } from "@webcodex/contracts";
import { connectCodeName, mintRouteCredential, principalFromHeaders, principalHeaders, provenNotSent } from "@webcodex/platform";
import type { Logger, Metrics } from "@webcodex/platform";
import type { RunnerRegistry, RunnerState } from "./runner-registry.js";
import { createLeaseStore, createMemoryLeaseBackend, FenceUnavailableError } from "./leases/lease-store.js";
import type { LeaseStore } from "./leases/lease-store.js";
import { createMemoryFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createMemoryConcurrencyLimiter } from "./admission/concurrency.js";
import type { ConcurrencyLimiter, SlotAdmission } from "./admission/concurrency.js";
import type { JobStore } from "./jobs/job-store.js";
import { createJobDesk, JOB_OBSERVE_TOOLS, JOB_START_TOOLS } from "./jobs/job-desk.js";
import type { ContinuationAction, JobContinuationRecord, JobContinuationStore } from "./jobs/job-continuations.js";
import type { Provisioner, ProjectWorkspace } from "./provisioning/provisioner.js";
import { fleetRows, observeFleet, summarizeFleet } from "./fleet/fleet-status.js";
import { runnerCredential, runnerCredentialCheck, runnerCredentialHeaders } from "./runner-auth.js";

export const DEFAULT_PROJECT_CONCURRENCY = 16;
/** How long the broker waits for a Runner to record a raised Attempt fence. */
const RAISE_FENCE_TIMEOUT_MS = 10_000;
/** How long registration waits for a reused address to say which Runner answers there. */
const REPLACED_HOLDER_CHECK_MS = 2_000;
/** A burst over the limit queues this long: calls ahead of it usually finish or go pending sooner. */
export const DEFAULT_ADMISSION_WAIT_MS = 5_000;

export interface RunnerBrokerDeps {
  /** Where the provisioning time (ensure → the Runner registered) is observed; none: not measured. */
  metrics?: Metrics;
  registry: RunnerRegistry;
  refResolver: Client<typeof RefResolverService>;
  /** Client of the RunnerService at `endpointUrl` (cached per URL by the broker). */
  runnerClient: (endpointUrl: string) => Client<typeof RunnerService>;
  heartbeatIntervalMs: number;
  logger: Logger;
  /** Deadline for one Runner call. */
  dispatchTimeoutMs?: number;
  /** Project leases and fences. Default: an in-process store (embedded mode). */
  leases?: LeaseStore;
  /** Lease TTL; default two heartbeat intervals (a Runner is lost after the same time). */
  leaseTtlMs?: number;
  /** Per-Project concurrency admission. Default: in-process, DEFAULT_PROJECT_CONCURRENCY. */
  concurrency?: ConcurrencyLimiter;
  /**
   * How long a call over the Project's concurrency limit queues for a slot before it is
   * refused (rate_limited). Default DEFAULT_ADMISSION_WAIT_MS; 0 refuses at once.
   */
  admissionWaitMs?: number;
  /** Job records: opened for Jobs that outlive their wait, answered for when the owning Runner is gone, counted in fleet status. */
  jobs?: JobStore;
  jobQuota?: { check(call: { tool: string; projectCanonicalId: string }): Promise<ToolFailure | undefined> }; // fleet/job-quota.ts
  /** Job continuation records (presented cards, dispatch, fresh turn, consume); needs `jobs`. */
  continuations?: JobContinuationStore;
  /** Starts Runners where none runs (on dispatch, and EnsureProjectRunner). */
  provisioner?: Provisioner;
  /**
   * Key the per-Runner credentials are derived from (WEBCODEX_RUNNER_TOKEN, held by the broker
   * only): each Runner's credential is required on its RegisterRunner/Heartbeat and sent to it.
   */
  runnerToken?: string;
  /**
   * How long a call waits for a Project's Runner that is starting (the broker itself just
   * started and Runners are registering, or a registered Runner is not routable yet) before
   * it fails `runner_unavailable`. Default three heartbeat intervals, at most 15 s.
   */
  runnerStartWaitMs?: number;
  /**
   * How long a call waits for a Runner it started (one stopped for idleness): the transparent
   * start. Default DEFAULT_TRANSPARENT_START_WAIT_MS; never less than runnerStartWaitMs.
   */
  transparentStartWaitMs?: number;
  /** The registry's clock (heartbeat times are compared with this broker's start on it). Default Date.now. */
  now?: () => number;
  /**
   * Whether GetRoute issues direct routes (a gateway calls the Runner itself). Needs
   * `runnerToken` (a route credential is keyed by the Runner's credential); default true.
   */
  directRoutes?: boolean;
  /** How long an issued route may be used at most (its credential's expiry). Default DEFAULT_ROUTE_TTL_MS. */
  routeTtlMs?: number;
}

/** A direct route's credential expires this long after issue unless set otherwise. */
export const DEFAULT_ROUTE_TTL_MS = 60_000;

const failure = (f: ToolFailure) => ({ resultJson: "", failure: failureToWire(f) });

/** How long a call waits for a Runner it started (a process or pod start, not a re-registration). */
export const DEFAULT_TRANSPARENT_START_WAIT_MS = 15_000;

/** How long a caller should wait before retrying when a Runner is starting. */
const RUNNER_STARTING_RETRY_MS = 2_000;

/**
 * A Runner that cannot start until something changes, with the pod's own condition: not an
 * endless runner_starting. Nothing ran; waiting for the Project is the follow-up.
 */
function unschedulableFailure(condition: { type: string; reason: string; message: string; detailCode?: string }, canonicalId: string): ToolFailure {
  return toolFailure(ReasonCode.runnerUnavailable, PipelineStage.dispatch, {
    detail_code: condition.detailCode ?? "runner_unschedulable",
    evidence: { condition: { type: condition.type, reason: condition.reason, message: condition.message.slice(0, 500) } },
    message: `The project's Runner cannot start: ${condition.reason}. Nothing was run; your operator can see the cause in the evidence.`,
    follow_up: waitForProjectFollowUp(canonicalId),
  });
}

export function createRunnerBroker(deps: RunnerBrokerDeps): ServiceImpl<typeof RunnerBrokerService> {
  const clients = new Map<string, Client<typeof RunnerService>>();
  const runnerClient = (url: string) => {
    let c = clients.get(url);
    if (!c) {
      c = deps.runnerClient(url);
      clients.set(url, c);
    }
    return c;
  };
  // Provisioning time: from the request that started a Runner for a workspace to that Runner's
  // registration (one observation per start; a start that never registers is not observed).
  const provisioningSeconds = deps.metrics?.histogram(
    "webcodex_runner_provisioning_seconds",
    "Time from a Runner's provisioning request to its registration",
    [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600],
  );
  const provisioningStarted = new Map<string, number>();
  const leases = deps.leases ?? createLeaseStore(createMemoryLeaseBackend(), createMemoryFenceHighWaterMark());
  const limiter = deps.concurrency ?? createMemoryConcurrencyLimiter({ limit: DEFAULT_PROJECT_CONCURRENCY });
  const leaseTtlMs = deps.leaseTtlMs ?? deps.heartbeatIntervalMs * 2;
  const admissionWaitMs = deps.admissionWaitMs ?? DEFAULT_ADMISSION_WAIT_MS;
  const dispatchTimeoutMs = deps.dispatchTimeoutMs ?? 660_000;
  // Each Runner's credential is bound to its workspace (runner-auth.ts).
  const authorizeRunner = runnerCredentialCheck(deps.runnerToken);
  const toRunner = (runner: RunnerState) => runnerCredentialHeaders(deps.runnerToken, runner);
  const startedAtMs = Date.now();
  // A Runner is routed (and reported ready) only once a heartbeat or registration reached the
  // broker after this broker started: a record from before a restart may name a dead Runner.
  const confirmedSinceMs = (deps.now ?? Date.now)();
  const runnerStartWaitMs = deps.runnerStartWaitMs ?? Math.min(3 * deps.heartbeatIntervalMs, 15_000);
  const transparentStartWaitMs = deps.transparentStartWaitMs ?? DEFAULT_TRANSPARENT_START_WAIT_MS;

  /** Grants or keeps the Project lease for a Runner; a fence store outage leaves it unleased. */
  const claimLease = async (scope: string, runnerId: string, strict: boolean) => {
    try {
      const a = await leases.acquire(scope, runnerId, leaseTtlMs);
      if (a.held && a.fresh) deps.logger.info("project lease granted", { runner_id: runnerId, project: scope, fence: a.lease.fence });
      return a.held ? { held: true, fence: a.lease.fence } : { held: false, fence: 0 };
    } catch (error) {
      if (!(error instanceof FenceUnavailableError)) throw error;
      deps.logger.warn("project lease not granted: fence store unavailable", { runner_id: runnerId, project: scope, error });
      if (strict) throw new ConnectError("fence store unavailable", Code.Unavailable, undefined, undefined, error);
      return { held: false, fence: 0 };
    }
  };

  /**
   * A Runner registering while another holds its Project's lease takes the Project with the
   * next fence now, instead of after the lease lapses, when the holder is provably gone: it was
   * replaced at its own address (a restarted process or pod: the address answers as the
   * registering Runner; two processes cannot listen on one address), or it was not seen alive
   * since this broker started (or is lost) and its address refuses connections (nothing
   * listens there). A holder that answers as itself, or does not answer in time, keeps its lease.
   */
  const releaseReplacedHolder = async (canonicalId: string, runnerId: string, endpointUrl: string): Promise<void> => {
    const lease = await leases.current(canonicalId).catch(() => undefined);
    if (!lease || lease.owner === runnerId) return;
    const holder = await deps.registry.get(lease.owner);
    if (!holder || holder.canonicalId !== canonicalId) return;
    // A refused address proves a holder gone only if this broker never saw it alive (a record
    // from before a restart) or it is lost: a live holder may be between listening and registering.
    const unseen = holder.lastHeartbeatMs < confirmedSinceMs || holder.connectionState === "lost";
    if (!unseen && holder.endpointUrl !== endpointUrl) return;
    const answer = await (async () => runnerClient(holder.endpointUrl).describe({}, { timeoutMs: REPLACED_HOLDER_CHECK_MS, headers: toRunner(holder) }))()
      .then((a) => ({ runnerId: a.runnerId, refused: false }))
      .catch((error: unknown) => ({ runnerId: undefined, refused: provenNotSent(error) }));
    const why =
      answer.refused && unseen
        ? "its address refuses connections"
        : holder.endpointUrl === endpointUrl && answer.runnerId === runnerId
          ? "replaced at its address"
          : "";
    if (!why) return;
    const released = await leases.release(canonicalId, lease.owner, lease.fence).catch(() => false);
    if (released) deps.logger.info(`project lease released: its Runner is gone (${why})`, { project: canonicalId, replaced: lease.owner, by: runnerId });
  };

  const projectFence = async (scope: string, held: number) => Math.max(held, await leases.highestFence(scope));

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

  const ownWorkspace = (ctx: HandlerContext, w: ProjectWorkspace) => {
    const principal = principalFromHeaders(ctx.requestHeader);
    if (principal.clientId !== w.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
    if (!w.projectId) throw new ConnectError("project_id is required", Code.InvalidArgument);
  };

  type Answer = { resultJson: string; failure?: DomainFailureInit; answeredFallback?: boolean };
  interface RunnerCall {
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
  ): Promise<{ ok: true; holder: RunnerState; fence: number } | { ok: false; failure: ToolFailure }> => {
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

  return {
    async registerRunner(req, ctx) {
      if (!req.runnerId || !req.clientId || !req.projectId || !req.rootIdentity)
        throw new ConnectError("runner_id, client_id, project_id and root_identity are required", Code.InvalidArgument);
      // The credential must be the one of the workspace the Runner claims to serve.
      authorizeRunner(ctx.requestHeader, req);
      // The Runner's Project becomes known under its client id; a new root opens a new incarnation.
      const registered = await deps.refResolver.registerProject(
        { clientId: req.clientId, projectId: req.projectId, rootIdentity: req.rootIdentity, name: req.projectId, recoveredWrites: req.recoveredWrites },
        { headers: principalHeaders({ clientId: req.clientId, subject: `runner:${req.runnerId}` }) },
      );
      const canonicalId = registered.project?.canonicalId ?? canonicalProjectId(req.clientId, req.projectId);
      const startedMs = provisioningStarted.get(canonicalProjectId(req.clientId, req.projectId));
      if (startedMs !== undefined) {
        provisioningStarted.delete(canonicalProjectId(req.clientId, req.projectId));
        provisioningSeconds?.observe((Date.now() - startedMs) / 1000);
      }
      await deps.registry.register({
        runnerId: req.runnerId,
        clientId: req.clientId,
        projectId: req.projectId,
        canonicalId,
        rootIdentity: req.rootIdentity,
        protocolGeneration: req.protocolGeneration,
        build: req.build,
        capabilities: [...req.capabilities],
        endpointUrl: req.endpointUrl,
        registeredAtMs: Date.now(),
        ...(req.containment === "" ? {} : { containment: req.containment, separateJobUid: req.separateJobUid }),
        ...(req.sandbox === "" ? {} : { sandbox: req.sandbox }),
        ...(req.recoveredWrites.length === 0 ? {} : { recoveredWrites: req.recoveredWrites.length }),
      });
      await releaseReplacedHolder(canonicalId, req.runnerId, req.endpointUrl);
      const lease = await claimLease(canonicalId, req.runnerId, true);
      // A Runner registering again (restarted, or forgotten by the broker) is asked about the
      // Jobs it owned: the ones it no longer has are lost_after_reconcile at once.
      if (desk) {
        const self = await deps.registry.get(req.runnerId);
        if (self) void desk.sync(self);
      }
      const missingBaseline = RunnerCapabilities.fromWire(req.capabilities).missingBaseline();
      deps.logger.info("runner registered", {
        runner_id: req.runnerId,
        project: canonicalId,
        protocol_generation: req.protocolGeneration,
        build: req.build,
        capabilities: req.capabilities.length,
        lease_held: lease.held,
        fence: lease.fence,
        ...(missingBaseline.length > 0 ? { missing_baseline: missingBaseline.map(runnerCapabilityWire) } : {}),
      });
      return {
        heartbeatIntervalMs: deps.heartbeatIntervalMs,
        leaseHeld: lease.held,
        fence: BigInt(lease.fence),
        projectFence: BigInt(await projectFence(canonicalId, lease.fence)),
        leaseTtlMs: leaseTtlMs,
        projectCanonicalId: canonicalId,
      };
    },

    async heartbeat(req, ctx) {
      const registered = await deps.registry.get(req.runnerId);
      if (!registered) return { known: false };
      authorizeRunner(ctx.requestHeader, registered);
      if (!(await deps.registry.heartbeat(req.runnerId))) return { known: false };
      const runner = await deps.registry.get(req.runnerId);
      if (!runner) return { known: false };
      const scope = runner.canonicalId;
      const claimed = Number(req.fence);
      // Renew by compare-and-set on (runner, fence); otherwise try to take the lease (a
      // standby whose holder was lost, or a holder whose lease lapsed or was wiped).
      const lease =
        claimed > 0 && (await leases.renew(scope, req.runnerId, claimed, leaseTtlMs))
          ? { held: true, fence: claimed }
          : await claimLease(scope, req.runnerId, false);
      // Jobs keep their live lease only while this Runner confirms it still runs them.
      if (desk) void desk.sync(runner);
      return { known: true, leaseHeld: lease.held, fence: BigInt(lease.fence), projectFence: BigInt(await projectFence(scope, lease.fence)) };
    },

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

    async recordJobContinuation(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const project = parseCanonicalProjectId(req.projectCanonicalId);
      if (!project || project.clientId !== principal.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
      const notFound = {
        jobJson: "",
        applied: false,
        failure: failureToWire(
          toolFailure(ReasonCode.jobNotFound, PipelineStage.resolution, {
            detail_code: "no_job_record",
            evidence: { field: "/job_id" },
            message: "No Job with this id is running or recorded in this project (a run that finished within its wait has no Job).",
          }),
        ),
      };
      if (!desk || !deps.jobs || !deps.continuations) return notFound;
      const key = { projectCanonicalId: req.projectCanonicalId, jobId: req.jobId };
      const rec = await deps.jobs.get(key);
      if (!rec || rec.clientId !== principal.clientId) return notFound;
      let applied = true;
      let record: JobContinuationRecord | undefined;
      if (req.action === "read") record = await deps.continuations.get(key);
      else if (["present", "claim", "accepted", "rejected", "uncertain"].includes(req.action))
        ({ applied, record } = await deps.continuations.apply(key, principal.clientId, req.action as ContinuationAction));
      else throw new ConnectError("unknown continuation action", Code.InvalidArgument);
      const observed = await desk.observe(req.projectCanonicalId, { job_ids: [req.jobId] }, ctx.signal, (jobIds) =>
        dispatchToHolder(
          {
            callId: randomUUID(),
            tool: "observe_jobs",
            argumentsJson: JSON.stringify({ job_ids: jobIds }),
            rootIdentity: req.rootIdentity,
            projectCanonicalId: req.projectCanonicalId,
          },
          toolDefinition("observe_jobs") as ToolDefinition,
          ctx.signal,
        ),
      );
      const job = observed.failure
        ? { job_id: req.jobId, state: "unknown" }
        : ((JSON.parse(observed.resultJson) as { jobs?: unknown[] }).jobs?.[0] ?? { job_id: req.jobId, state: "unknown" });
      return {
        jobJson: JSON.stringify(job),
        applied,
        ...(record
          ? {
              continuation: {
                dispatch: record.dispatch,
                presentedAtUnixMs: BigInt(record.presentedAtMs),
                dispatchAtUnixMs: BigInt(record.dispatchAtMs ?? 0),
                freshTurnAtUnixMs: BigInt(record.freshTurnAtMs ?? 0),
                consumedAtUnixMs: BigInt(record.consumedAtMs ?? 0),
              },
            }
          : {}),
      };
    },

    async listProjectJobs(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const project = parseCanonicalProjectId(req.projectCanonicalId);
      if (!project || project.clientId !== principal.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
      if (!deps.jobs) return { jobs: [], truncated: false };
      const limit = 20;
      const open = await deps.jobs.openProjectJobs(req.projectCanonicalId, limit + 1);
      return {
        jobs: open.slice(0, limit).map((j) => ({ jobId: j.jobId, state: j.state, tool: j.tool, createdAtUnixMs: BigInt(j.createdAtMs) })),
        truncated: open.length > limit,
      };
    },

    async getFleetStatus(req) {
      const observation = await observeFleet({
        registry: deps.registry,
        leases,
        limiter,
        ...(deps.jobs ? { jobs: deps.jobs } : {}),
        ...(req.clientId ? { clientId: req.clientId } : {}),
      });
      const s = summarizeFleet(observation);
      const summary = {
        runnersTotal: s.runnersTotal,
        runnersConnected: s.runnersConnected,
        runnersLost: s.runnersLost,
        runnersStandby: s.runnersStandby,
        projectsTotal: s.projectsTotal,
        projectsRoutable: s.projectsRoutable,
        jobs: {
          active: s.jobs.active,
          running: s.jobs.running,
          queued: s.jobs.queued,
          recovering: s.jobs.recovering,
          lostAfterReconcile: s.jobs.lostAfterReconcile,
        },
        serverProtocolGeneration: s.serverProtocolGeneration,
        protocolGenerations: s.protocolGenerations,
        builds: s.builds,
        protocolAligned: s.protocolAligned,
        buildAligned: s.buildAligned,
        baselineFaults: s.baselineFaults,
        connectionStates: s.connectionStates,
        projectConcurrencyLimit: s.projectConcurrencyLimit,
        inFlight: s.inFlight,
        containmentModes: s.containmentModes,
        separateJobUidRunners: s.separateJobUidRunners,
        recoveredWrites: s.recoveredWrites,
      };
      // Sparse status branches here, before any row is built.
      if (req.summaryOnly) return { summary };
      return {
        summary,
        runners: fleetRows(observation).map((r) => ({
          runnerId: r.runnerId,
          clientId: r.clientId,
          projectId: r.projectId,
          connectionState: r.connectionState,
          protocolGeneration: r.protocolGeneration,
          build: r.build,
          capabilities: r.capabilities,
          lastHeartbeatUnixMs: BigInt(r.lastHeartbeatMs),
          projectCanonicalId: r.canonicalId,
          leaseHeld: r.leaseHeld,
          fence: BigInt(r.fence),
          baselineComplete: r.baselineComplete,
          inFlight: r.inFlight,
          containment: r.containment ?? "",
          separateJobUid: r.separateJobUid === true,
          sandbox: r.sandbox ?? "",
          recoveredWrites: r.recoveredWrites ?? 0,
        })),
      };
    },

    async getProjectRunnerStates(req) {
      const states: Record<string, string> = {};
      await Promise.all(
        req.projects.map(async (p) => {
          states[p.projectCanonicalId] = await projectRunnerState(p.projectCanonicalId, p.rootIdentity);
        }),
      );
      return { states };
    },

    async ensureProjectRunner(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      if (!deps.provisioner) throw new ConnectError("no Runner provisioner is configured", Code.FailedPrecondition);
      const source = req.sourceGitUrl
        ? { git: { url: req.sourceGitUrl, ...(req.sourceGitRef ? { ref: req.sourceGitRef } : {}) } }
        : req.createWorkspace
          ? {}
          : undefined;
      const requestedMs = Date.now();
      const r = await deps.provisioner.ensureRunner(w, source ? { source } : {});
      if (r.action !== "exists" && provisioningSeconds) provisioningStarted.set(canonicalProjectId(w.clientId, w.projectId), requestedMs);
      return { action: r.action, runnerName: r.name };
    },

    async getProjectProvisioning(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      const state = deps.provisioner?.provisioningState ? await deps.provisioner.provisioningState(w) : { state: "unknown" as const };
      if (state.state === "failed") return { state: state.state, failure: failureToWire(state.failure) };
      if (state.state === "unschedulable")
        return { state: state.state, failure: failureToWire(unschedulableFailure(state.condition, canonicalProjectId(w.clientId, w.projectId))) };
      return { state: state.state };
    },

    async removeProjectRunner(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      if (!deps.provisioner) throw new ConnectError("no Runner provisioner is configured", Code.FailedPrecondition);
      const removed = await deps.provisioner.removeRunner(w, { keepWorkspace: req.keepWorkspace });
      // Its Runner is gone for good: no longer listed, counted or routed to.
      await deps.registry.forgetProject(canonicalProjectId(w.clientId, w.projectId));
      return { removed };
    },
  };
}
