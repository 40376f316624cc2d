/**
 * The broker's configuration (RunnerBrokerDeps and its defaults) and the state its parts share,
 * derived once per broker: the Runner client cache, the lease store, the concurrency limiter,
 * the timings and the Runner credential checks, and the provisioning-time histogram.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerService } from "@webcodex/proto";
import type { Logger, Metrics } from "@webcodex/platform";
import type { ToolFailure } from "@webcodex/contracts";
import type { RunnerRegistry, RunnerState } from "./runner-registry.js";
import { createLeaseStore, createMemoryLeaseBackend } from "./leases/lease-store.js";
import type { LeaseStore } from "./leases/lease-store.js";
import { createMemoryFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createMemoryConcurrencyLimiter } from "./admission/concurrency.js";
import type { ConcurrencyLimiter } from "./admission/concurrency.js";
import type { JobStore } from "./jobs/job-store.js";
import type { JobContinuationStore } from "./jobs/job-continuations.js";
import type { Provisioner } from "./provisioning/provisioner.js";
import { runnerCredentialCheck, runnerCredentialHeaders } from "./runner-auth.js";

export const DEFAULT_PROJECT_CONCURRENCY = 16;
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

/** How long a call waits for a Runner it started (a process or pod start, not a re-registration). */
export const DEFAULT_TRANSPARENT_START_WAIT_MS = 15_000;

/** What the broker's parts share: its deps and what is derived from them once per broker. */
export type BrokerContext = ReturnType<typeof createBrokerContext>;

export function createBrokerContext(deps: RunnerBrokerDeps) {
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
  return {
    deps,
    runnerClient,
    provisioningSeconds,
    provisioningStarted,
    leases,
    limiter,
    leaseTtlMs,
    admissionWaitMs,
    dispatchTimeoutMs,
    authorizeRunner,
    toRunner,
    startedAtMs,
    confirmedSinceMs,
    runnerStartWaitMs,
    transparentStartWaitMs,
  };
}
