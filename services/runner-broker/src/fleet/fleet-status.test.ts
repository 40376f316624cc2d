import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { RUNNER_PROTOCOL_GENERATION, runnerCapabilityCatalog } from "@webcodex/contracts";
import type { Queryable } from "@webcodex/platform";
import { emptyJobCounts, fleetRows, observeFleet, summarizeFleet } from "./fleet-status.js";
import { createMemoryRunnerRegistry } from "../runner-registry.js";
import { createLeaseStore, createMemoryLeaseBackend } from "../leases/lease-store.js";
import { createMemoryFenceHighWaterMark } from "../leases/fence-hwm.js";
import { createMemoryConcurrencyLimiter } from "../admission/concurrency.js";
import { createJobStore } from "../jobs/job-store.js";
import { createMemoryLiveJobBackend } from "../jobs/live-job-backends.js";
import type { FleetObservation } from "./fleet-status.js";
import type { RunnerState } from "../runner-registry.js";

const baseline = runnerCapabilityCatalog.filter((r) => r.baselineV2).map((r) => r.wire);
const runner = (id: string, project: string, over: Partial<RunnerState> = {}): RunnerState => ({
  runnerId: id,
  clientId: "c",
  projectId: project,
  canonicalId: `agent:c:${project}`,
  rootIdentity: "root",
  protocolGeneration: RUNNER_PROTOCOL_GENERATION,
  build: "b1",
  capabilities: [...baseline],
  endpointUrl: "",
  registeredAtMs: 0,
  lastHeartbeatMs: 0,
  connectionState: "connected",
  ...over,
});

describe("fleet status counting", () => {
  const observation: FleetObservation = {
    runners: [
      runner("r1", "p1"),
      runner("r2", "p1"),
      runner("r3", "p2", { build: "b2", capabilities: ["read_files_v1"] }),
      runner("r4", "p3", { connectionState: "lost", protocolGeneration: 1 }),
    ],
    leases: new Map([
      ["agent:c:p1", { scope: "agent:c:p1", owner: "r1", fence: 3, ttlMs: 10 }],
      ["agent:c:p2", undefined],
      ["agent:c:p3", { scope: "agent:c:p3", owner: "r4", fence: 9, ttlMs: 10 }],
    ]),
    inFlight: new Map([
      ["agent:c:p1", 2],
      ["agent:c:p2", 0],
      ["agent:c:p3", 0],
    ]),
    jobs: { ...emptyJobCounts(), active: 3, running: 2, queued: 1, lostAfterReconcile: 1 },
    concurrencyLimit: 16,
  };

  it("counts runners, projects, standbys, alignment and faults from one observation", () => {
    const s = summarizeFleet(observation);
    assert.equal(s.runnersTotal, 4);
    assert.equal(s.runnersConnected, 3);
    assert.equal(s.runnersLost, 1);
    assert.equal(s.runnersStandby, 2, "r2 (lease held by r1) and r3 (no lease)");
    assert.equal(s.projectsTotal, 3);
    assert.equal(s.projectsRoutable, 1, "p3's holder is lost, p2 has no lease");
    assert.deepEqual(s.protocolGenerations, [RUNNER_PROTOCOL_GENERATION], "only connected Runners count for alignment");
    assert.equal(s.protocolAligned, true);
    assert.deepEqual(s.builds, ["b1", "b2"]);
    assert.equal(s.buildAligned, false);
    assert.equal(s.baselineFaults, 1);
    assert.deepEqual(s.connectionStates, { connected: 3, lost: 1 });
    assert.equal(s.inFlight, 2);
    assert.equal(s.jobs.lostAfterReconcile, 1);
  });

  it("counts recovered writes per Project, from the Runner serving it only", () => {
    assert.deepEqual(summarizeFleet(observation).recoveredWrites, {}, "no Runner reported any");
    const recovering: FleetObservation = {
      ...observation,
      runners: [
        runner("r1", "p1", { recoveredWrites: 2 }),
        runner("r2", "p1", { recoveredWrites: 5 }),
        runner("r3", "p2", { recoveredWrites: 1 }),
        runner("r4", "p3", { connectionState: "lost", recoveredWrites: 4 }),
      ],
    };
    // r2 is a standby of p1, r3 holds no lease, r4 is lost: only r1 serves its Project.
    assert.deepEqual(summarizeFleet(recovering).recoveredWrites, { "agent:c:p1": 2 });
  });

  it("builds full rows from the same observation", () => {
    const rows = fleetRows(observation);
    assert.deepEqual(
      rows.map((r) => [r.runnerId, r.leaseHeld, r.fence, r.baselineComplete, r.inFlight]),
      [
        ["r1", true, 3, true, 2],
        ["r2", false, 0, true, 2],
        ["r3", false, 0, false, 0],
        ["r4", true, 9, true, 0],
      ],
    );
  });
});

describe("fleet Job counts", () => {
  it("a live Job whose owning Runner is lost counts as recovering, not running", async () => {
    let t = 1_000;
    const now = () => t;
    const registry = createMemoryRunnerRegistry({ lostAfterMs: 200, now });
    const live = createMemoryLiveJobBackend({ now });
    // The lost-Job count comes from Postgres; none here.
    const db = { query: async () => ({ rows: [{ n: 0 }], rowCount: 1 }) } as unknown as Queryable;
    const jobs = createJobStore({ live, db });
    const reg = (id: string) => registry.register({ ...runner(id, id), registeredAtMs: t });
    await reg("alive");
    await reg("dying");
    const job = (jobId: string, runnerId: string) =>
      live.put(
        {
          projectCanonicalId: `agent:c:${runnerId}`,
          jobId,
          clientId: "c",
          runnerId,
          tool: "run_shell",
          fence: 1,
          state: "running",
          createdAtMs: t,
          updatedAtMs: t,
        },
        10_000,
      );
    await job("j1", "alive");
    await job("j2", "dying");
    await job("j3", "dying");
    const observe = () =>
      observeFleet({
        registry,
        jobs,
        clientId: "c",
        leases: createLeaseStore(createMemoryLeaseBackend({ now }), createMemoryFenceHighWaterMark()),
        limiter: createMemoryConcurrencyLimiter({ limit: 4 }),
      });
    assert.deepEqual((await observe()).jobs, { active: 3, running: 3, queued: 0, recovering: 0, lostAfterReconcile: 0 });
    t += 300;
    await registry.heartbeat("alive");
    assert.deepEqual(
      (await observe()).jobs,
      { active: 3, running: 1, queued: 0, recovering: 2, lostAfterReconcile: 0 },
      "the dying Runner's Jobs are recovering",
    );
  });
});
