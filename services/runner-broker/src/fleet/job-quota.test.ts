/** The per-tenant concurrent-Jobs quota: counted from the Job records' live states, enforced by the broker before dispatch. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import { RunnerBrokerService, RunnerService } from "@webcodex/proto";
import type { RefResolverService } from "@webcodex/proto";
import { RUNNER_PROTOCOL_GENERATION, RunnerCapabilities, failureFromWire, followUpTarget, runnerCapabilityCatalog } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import type { Queryable } from "@webcodex/platform";
import { createRunnerBroker } from "../broker.js";
import { createMemoryRunnerRegistry } from "../runner-registry.js";
import { createLeaseStore, createMemoryLeaseBackend } from "../leases/lease-store.js";
import { createMemoryFenceHighWaterMark } from "../leases/fence-hwm.js";
import { createJobStore } from "../jobs/job-store.js";
import type { JobRecord } from "../jobs/job-store.js";
import { createMemoryLiveJobBackend } from "../jobs/live-job-backends.js";
import { createConcurrentJobsQuota } from "./job-quota.js";

const logger = createLogger({ service: "test", level: "silent" });

/** Job records whose live states are in memory; openProjectJobs answers from the same live states. */
function jobsOf() {
  const live = createMemoryLiveJobBackend();
  // Counting reads lost Jobs from Postgres: none here.
  const db = { query: async () => ({ rows: [{ n: 0 }], rowCount: 1 }) } as unknown as Queryable;
  const store = createJobStore({ live, db });
  const start = (clientId: string, project: string, jobId: string) =>
    live.put(
      {
        projectCanonicalId: `agent:${clientId}:${project}`,
        jobId,
        clientId,
        runnerId: `r-${project}`,
        tool: "run_shell",
        fence: 1,
        state: "running",
        createdAtMs: 0,
        updatedAtMs: 0,
      },
      60_000,
    );
  const end = (clientId: string, project: string, jobId: string) => live.remove({ projectCanonicalId: `agent:${clientId}:${project}`, jobId }, 1);
  const jobs = {
    counts: store.counts,
    async openProjectJobs(projectCanonicalId: string, limit: number): Promise<JobRecord[]> {
      const mine = (await live.list({})).filter((j) => j.projectCanonicalId === projectCanonicalId).slice(0, limit);
      return mine.map((j) => ({ ...j, state: "running", createdAtMs: 0 }) as unknown as JobRecord);
    },
  };
  return { jobs, start, end };
}

describe("concurrent-Jobs quota", () => {
  it("refuses a Job-starting tool at the limit with limit, use and a wait for this project's Job; other tools and tenants pass", async () => {
    const { jobs, start, end } = jobsOf();
    const quota = createConcurrentJobsQuota({ limit: 2, jobs })!;
    await start("acme", "p1", "j1");
    assert.equal(await quota.check({ tool: "run_shell", projectCanonicalId: "agent:acme:p2" }), undefined, "1 of 2");
    await start("acme", "p2", "j2");
    await start("other", "p1", "j3");
    const refused = await quota.check({ tool: "run_process", projectCanonicalId: "agent:acme:p1" });
    assert.equal(refused?.reason_code, "quota_exceeded");
    assert.equal(refused?.detail_code, "concurrent_jobs");
    assert.deepEqual(refused?.evidence, { quota: "concurrent_jobs", limit: 2, use: 2 }, "the other tenant's Job does not count");
    assert.deepEqual(followUpTarget(refused!.follow_up!), { tool: "wait_for_job_terminal", arguments: { project: "agent:acme:p1", job_id: "j1" } });
    const elsewhere = await quota.check({ tool: "run_shell", projectCanonicalId: "agent:acme:p3" });
    assert.equal(elsewhere?.detail_code, "concurrent_jobs");
    assert.equal(elsewhere?.follow_up, undefined, "no open Job of that project to wait for");
    assert.equal(await quota.check({ tool: "read_files", projectCanonicalId: "agent:acme:p1" }), undefined, "not a Job-starting tool");
    assert.equal(await quota.check({ tool: "run_shell", projectCanonicalId: "agent:other:p1" }), undefined);
    await end("acme", "p1", "j1");
    assert.equal(await quota.check({ tool: "run_shell", projectCanonicalId: "agent:acme:p1" }), undefined, "a Job ended: room again");
  });

  it("0 (the default) or no Job records: no quota", () => {
    assert.equal(createConcurrentJobsQuota({ limit: 0, jobs: jobsOf().jobs }), undefined);
    assert.equal(createConcurrentJobsQuota({ limit: 3, jobs: undefined }), undefined);
  });

  it("the broker refuses before dispatch: the Runner sees no call, and nothing starts until a Job ends", async () => {
    const { jobs, start, end } = jobsOf();
    const calls: string[] = [];
    const runner = createInProcessClient(RunnerService, {
      async execute(req) {
        calls.push(req.tool);
        return { resultJson: JSON.stringify({ ok: true }) };
      },
      async describe() {
        return { runnerId: "r1" };
      },
      async raiseAttemptFence(req) {
        return { highest: req.attempt?.fence ?? 0n };
      },
    });
    const refResolver = {
      registerProject: async (req: { clientId: string; projectId: string; rootIdentity: string }) => ({
        project: { canonicalId: `agent:${req.clientId}:${req.projectId}`, rootIdentity: req.rootIdentity },
        newIncarnation: false,
      }),
    } as unknown as Client<typeof RefResolverService>;
    const broker = createInProcessClient(
      RunnerBrokerService,
      createRunnerBroker({
        registry: createMemoryRunnerRegistry({ lostAfterMs: 60_000 }),
        leases: createLeaseStore(createMemoryLeaseBackend(), createMemoryFenceHighWaterMark()),
        refResolver,
        runnerClient: () => runner,
        heartbeatIntervalMs: 1_000,
        logger,
        jobQuota: createConcurrentJobsQuota({ limit: 1, jobs })!,
      }),
    );
    const all = runnerCapabilityCatalog.map((r) => r.id) as RunnerCapabilityId[];
    await broker.registerRunner({
      runnerId: "r1",
      clientId: "acme",
      projectId: "p1",
      rootIdentity: "root-1",
      protocolGeneration: RUNNER_PROTOCOL_GENERATION,
      build: "b1",
      capabilities: new RunnerCapabilities(all).toWire(),
      endpointUrl: "r1",
    });
    const dispatch = (tool: string, args: Record<string, unknown>) =>
      broker.dispatch({ callId: `c-${Math.random()}`, projectCanonicalId: "agent:acme:p1", rootIdentity: "root-1", tool, argumentsJson: JSON.stringify(args) });
    await start("acme", "p9", "j1");
    const refused = await dispatch("run_shell", { command: "sleep 100" });
    assert.ok(refused.failure);
    const f = failureFromWire(refused.failure);
    assert.equal(f.reason_code, "quota_exceeded");
    assert.equal(f.detail_code, "concurrent_jobs");
    assert.equal(f.state_changed, false);
    assert.deepEqual(calls, [], "nothing reached the Runner");
    const read = await dispatch("read_files", { files: [{ path: "a.txt" }] });
    assert.equal(read.failure, undefined);
    await end("acme", "p9", "j1");
    const ran = await dispatch("run_shell", { command: "true" });
    assert.equal(ran.failure, undefined);
    assert.deepEqual(calls, ["read_files", "run_shell"]);
  });
});
