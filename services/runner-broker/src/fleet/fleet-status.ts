/**
 * Fleet status from one canonical counting path. `observeFleet` gathers the facts once
 * (registrations, each Project's lease, calls in flight, Job counts); `summarizeFleet`
 * counts them (sparse status) and `fleetRows` builds the full diagnostic rows from the same
 * observation. Sparse status never builds rows: the broker branches before `fleetRows`.
 */
import { RUNNER_PROTOCOL_GENERATION, RunnerCapabilities } from "@webcodex/contracts";
import type { ConcurrencyLimiter } from "../admission/concurrency.js";
import type { FleetSummary } from "@webcodex/proto";
import type { JobCounts, JobStore } from "../jobs/job-store.js";
import type { Lease, LeaseStore } from "../leases/lease-store.js";
import type { RunnerRegistry, RunnerState } from "../runner-registry.js";

export interface FleetObservation {
  runners: RunnerState[];
  /** Project canonical id → its current lease (absent: none). */
  leases: Map<string, Lease | undefined>;
  inFlight: Map<string, number>;
  jobs: JobCounts;
  concurrencyLimit: number;
}

/**
 * The fleet summary as the broker computes it: the FleetSummary message's fields, derived
 * from the generated type so a proto change breaks the build here, with job counts always set.
 */
export type FleetSummaryFacts = Omit<FleetSummary, "$typeName" | "$unknown" | "jobs"> & { jobs: JobCounts };

export interface FleetRow extends RunnerState {
  leaseHeld: boolean;
  fence: number;
  baselineComplete: boolean;
  inFlight: number;
}

export const emptyJobCounts = (): JobCounts => ({ active: 0, running: 0, queued: 0, recovering: 0, lostAfterReconcile: 0 });

export async function observeFleet(deps: {
  registry: RunnerRegistry;
  leases: LeaseStore;
  limiter: ConcurrencyLimiter;
  jobs?: JobStore;
  clientId?: string;
}): Promise<FleetObservation> {
  const all = await deps.registry.list();
  const runners = all.filter((r) => !deps.clientId || r.clientId === deps.clientId);
  const projects = [...new Set(runners.map((r) => r.canonicalId))];
  const connected = new Set(all.filter((r) => r.connectionState === "connected").map((r) => r.runnerId));
  const [leases, inFlight, jobs] = await Promise.all([
    Promise.all(projects.map((p) => deps.leases.current(p))),
    Promise.all(projects.map((p) => deps.limiter.inFlight(p))),
    deps.jobs
      ? deps.jobs.counts(deps.clientId ? { clientId: deps.clientId } : {}, { ownerConnected: (id) => connected.has(id) })
      : Promise.resolve(emptyJobCounts()),
  ]);
  return {
    runners,
    leases: new Map(projects.map((p, i) => [p, leases[i]])),
    inFlight: new Map(projects.map((p, i) => [p, inFlight[i] ?? 0])),
    jobs,
    concurrencyLimit: deps.limiter.limit,
  };
}

const holds = (o: FleetObservation, r: RunnerState) => o.leases.get(r.canonicalId)?.owner === r.runnerId;

const baselineComplete = (r: RunnerState) =>
  r.protocolGeneration < RUNNER_PROTOCOL_GENERATION || RunnerCapabilities.fromWire(r.capabilities).missingBaseline().length === 0;

export function summarizeFleet(o: FleetObservation): FleetSummaryFacts {
  const connected = o.runners.filter((r) => r.connectionState === "connected");
  const generations = [...new Set(connected.map((r) => r.protocolGeneration))].sort((a, b) => a - b);
  const builds = [...new Set(connected.map((r) => r.build))].sort();
  const connectionStates: Record<string, number> = {};
  for (const r of o.runners) connectionStates[r.connectionState] = (connectionStates[r.connectionState] ?? 0) + 1;
  const routable = new Set(connected.filter((r) => holds(o, r)).map((r) => r.canonicalId));
  const containmentModes: Record<string, number> = {};
  for (const r of connected) if (r.containment) containmentModes[r.containment] = (containmentModes[r.containment] ?? 0) + 1;
  // Per Project, what its serving Runner's start-up recovery finished (only Projects with any).
  const recoveredWrites: Record<string, number> = {};
  for (const r of connected) if (holds(o, r) && (r.recoveredWrites ?? 0) > 0) recoveredWrites[r.canonicalId] = r.recoveredWrites ?? 0;
  return {
    runnersTotal: o.runners.length,
    runnersConnected: connected.length,
    runnersLost: o.runners.length - connected.length,
    runnersStandby: connected.filter((r) => !holds(o, r)).length,
    projectsTotal: o.leases.size,
    projectsRoutable: routable.size,
    jobs: o.jobs,
    serverProtocolGeneration: RUNNER_PROTOCOL_GENERATION,
    protocolGenerations: generations,
    builds,
    protocolAligned: generations.every((g) => g === RUNNER_PROTOCOL_GENERATION),
    buildAligned: builds.length <= 1,
    baselineFaults: connected.filter((r) => !baselineComplete(r)).length,
    connectionStates,
    projectConcurrencyLimit: o.concurrencyLimit,
    inFlight: [...o.inFlight.values()].reduce((a, b) => a + b, 0),
    containmentModes,
    separateJobUidRunners: connected.filter((r) => r.separateJobUid === true).length,
    recoveredWrites,
  };
}

export function fleetRows(o: FleetObservation): FleetRow[] {
  return o.runners.map((r) => {
    const lease = o.leases.get(r.canonicalId);
    const held = lease?.owner === r.runnerId;
    return { ...r, leaseHeld: held, fence: held ? lease.fence : 0, baselineComplete: baselineComplete(r), inFlight: o.inFlight.get(r.canonicalId) ?? 0 };
  });
}
