/**
 * Job records wired into broker dispatch, against real Redis and Postgres with real Runners
 * (the Runner's own executor spawning real processes): a Job that outlives its wait is
 * recorded; while its Runner lives it answers; when the Runner is gone the broker answers
 * from its records, and a Job whose Runner restarted without it is lost_after_reconcile with
 * outcome_unknown. Another tenant's Job id fails like a nonexistent one.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { createInProcessClient, createLogger, createRedis } from "@webcodex/platform";
import type { Database, Redis } from "@webcodex/platform";
import { createRefResolver } from "@webcodex/ref-resolver";
import {
  createJobStore,
  createLeaseStore,
  createPostgresFenceHighWaterMark,
  createRedisConcurrencyLimiter,
  createRedisLeaseBackend,
  createRedisLiveJobBackend,
  createRedisRunnerRegistry,
  createRunnerBroker,
} from "@webcodex/runner-broker";
import { createRunner, RUNNER_BUILD, startRegistration } from "@webcodex/runner";
import type { RegistrationLoop, Runner } from "@webcodex/runner";
import { backingServices, createProjectDir, createBrokerTestDatabase, hostPids, redisKeyPrefix, sleepTag, until } from "../support/index.js";
import type { BrokerTestDatabase } from "../support/index.js";

const logger = createLogger({ service: "test", level: "silent" });
const HEARTBEAT_MS = 200;
/** A Job's live lease: the Runner lease (two heartbeats) plus one heartbeat. */
const JOB_LEASE_MS = 3 * HEARTBEAT_MS;

describe("runner-broker Job records in dispatch (real Redis + Postgres, real Runners)", () => {
  let database: BrokerTestDatabase;
  let db: Database;
  let redis: Redis;
  let broker: Client<typeof RunnerBrokerService>;
  const endpoints = new Map<string, Runner>();
  const loops: RegistrationLoop[] = [];
  const runners: Runner[] = [];

  let redisUrl: string;
  /** A broker over real Redis (its own key prefix) and Postgres, reaching Runners by endpoint. */
  const newBroker = (prefix: string, concurrencyLimit: number) =>
    createInProcessClient(
      RunnerBrokerService,
      createRunnerBroker({
        registry: createRedisRunnerRegistry(redis, { lostAfterMs: HEARTBEAT_MS * 2, prefix }),
        leases: createLeaseStore(createRedisLeaseBackend(redis, { prefix }), createPostgresFenceHighWaterMark(db)),
        concurrency: createRedisConcurrencyLimiter(redis, { limit: concurrencyLimit, prefix }),
        // Over the limit, refuse at once: these tests observe saturation itself.
        admissionWaitMs: 0,
        jobs: createJobStore({ live: createRedisLiveJobBackend(redis, { prefix }), db }),
        refResolver: createInProcessClient(RefResolverService, createRefResolver({ db })),
        runnerClient: (url) => {
          // Resolved per call: a "restarted" Runner serves the same endpoint.
          const service = new Proxy(
            {},
            {
              get:
                (_t, method: string) =>
                (...a: unknown[]) =>
                  (endpoints.get(url)!.service as unknown as Record<string, (...x: unknown[]) => unknown>)[method]!(...a),
            },
          );
          return createInProcessClient(RunnerService, service as Runner["service"]);
        },
        heartbeatIntervalMs: HEARTBEAT_MS,
        logger,
      }),
    );

  before(async () => {
    database = await createBrokerTestDatabase();
    db = database.db;
    redisUrl = (await backingServices()).redisUrl;
    redis = createRedis(redisUrl);
    broker = newBroker(redisKeyPrefix(), 32);
  });
  after(async () => {
    for (const l of loops) l.stop();
    for (const r of runners) await r.close();
    redis.disconnect();
    await database.close();
  });

  /** Starts a real Runner on a directory and keeps it registered (heartbeats) with the broker. */
  const startRunner = async (o: {
    clientId: string;
    projectId: string;
    dir: string;
    runnerId: string;
    endpoint: string;
    via?: Client<typeof RunnerBrokerService>;
  }) => {
    const runner = createRunner({ root: o.dir, logger, runnerId: o.runnerId });
    runners.push(runner);
    endpoints.set(o.endpoint, runner);
    const loop = startRegistration({
      broker: o.via ?? broker,
      runnerId: runner.runnerId,
      clientId: o.clientId,
      projectId: o.projectId,
      rootIdentity: await runner.rootIdentity(),
      build: RUNNER_BUILD,
      capabilities: runner.capabilities,
      endpointUrl: o.endpoint,
      fence: runner.fence,
      logger,
    });
    loops.push(loop);
    await loop.registered;
    return { runner, loop, rootIdentity: await runner.rootIdentity() };
  };

  const call = async (project: string, rootIdentity: string, tool: string, args: Record<string, unknown>, via = broker) => {
    const res = await via.dispatch({ callId: `c-${Math.random()}`, projectCanonicalId: project, rootIdentity, tool, argumentsJson: JSON.stringify(args) });
    return { failure: res.failure, result: res.resultJson ? (JSON.parse(res.resultJson) as Record<string, unknown>) : {} };
  };

  const jobRow = async (project: string, jobId: string) =>
    (
      await db.query<{ state: string; outcome_unknown: boolean; exit_code: number | null; summary: Record<string, unknown> | null }>(
        "SELECT state, outcome_unknown, exit_code, summary FROM broker.jobs WHERE project_canonical_id = $1 AND job_id = $2",
        [project, jobId],
      )
    ).rows[0];

  it("a Job that outlives its wait is recorded; its live Runner answers and the terminal summary lands in Postgres", async () => {
    const dir = createProjectDir({ "a.txt": "a\n" }, { name: "jobs-ok" });
    const { rootIdentity } = await startRunner({ clientId: "tenant-j", projectId: "jobs-ok", dir, runnerId: "runner-ok", endpoint: "ep-ok" });
    const project = "agent:tenant-j:jobs-ok";
    const started = await call(project, rootIdentity, "run_shell", { command: "sleep 1; echo finished", wait_ms: 100 });
    assert.equal(started.result["execution_state"], "pending", JSON.stringify(started));
    const jobId = String(started.result["job_id"]);
    assert.equal((await jobRow(project, jobId))?.state, "running", "recorded before the pending answer returned");
    let done = await call(project, rootIdentity, "wait_for_job_terminal", { job_id: jobId, wait_ms: 5_000 });
    while (done.result["execution_state"] === "pending") done = await call(project, rootIdentity, "wait_for_job_terminal", { job_id: jobId, wait_ms: 5_000 });
    assert.equal(done.result["output"], "finished\n", "the owner's full terminal result");
    const row = await jobRow(project, jobId);
    assert.equal(row?.state, "succeeded");
    assert.equal(row?.exit_code, 0);
    assert.equal(row?.summary?.["runner_state"], "completed");
    assert.equal(JSON.stringify(row?.summary).includes("finished"), false, "no output in the durable summary");
  });

  it("a Runner that restarts without its Job: the Job is lost_after_reconcile with outcome_unknown as soon as it re-registers", async () => {
    const dir = createProjectDir({ "a.txt": "a\n" }, { name: "jobs-restart" });
    const first = await startRunner({ clientId: "tenant-j", projectId: "jobs-restart", dir, runnerId: "runner-restart", endpoint: "ep-restart" });
    const project = "agent:tenant-j:jobs-restart";
    // A Job runs in a pid namespace of its own: its process is found on the host by a tag.
    const tag = sleepTag();
    const started = await call(project, first.rootIdentity, "run_shell", { command: `sleep ${tag}`, wait_ms: 200 });
    assert.equal(started.result["execution_state"], "pending");
    const jobId = String(started.result["job_id"]);
    await until("the Job's process to run", () => hostPids(tag).length > 0, 5_000);
    // The Runner process dies and a new one comes back under the same id and endpoint.
    first.loop.stop();
    const restartedAt = Date.now();
    await startRunner({ clientId: "tenant-j", projectId: "jobs-restart", dir, runnerId: "runner-restart", endpoint: "ep-restart" });
    const lost = await until(
      "the restarted Runner's answer closes the Job",
      async () => {
        const r = await call(project, first.rootIdentity, "wait_for_job_terminal", { job_id: jobId, wait_ms: 0 });
        return r.result["execution_state"] === "lost_after_reconcile" ? r : undefined;
      },
      5_000,
    );
    assert.ok(Date.now() - restartedAt < 3 * HEARTBEAT_MS + 1_000, "closed on re-registration, not after a lease lapse");
    assert.equal(lost.failure, undefined, "an observation of a lost Job, not a tool failure");
    assert.equal(lost.result["outcome_unknown"], true);
    assert.equal(lost.result["state"], "lost_after_reconcile");
    const observed = await call(project, first.rootIdentity, "observe_jobs", { job_ids: [jobId] });
    assert.deepEqual(
      (observed.result["jobs"] as Array<Record<string, unknown>>).map((j) => [j["job_id"], j["state"], j["outcome_unknown"]]),
      [[jobId, "lost_after_reconcile", true]],
    );
    assert.deepEqual(await jobRow(project, jobId).then((r) => [r?.state, r?.outcome_unknown]), ["lost_after_reconcile", true]);
    await first.runner.close();
    await until("the old incarnation's process to be gone", () => hostPids(tag).length === 0, 5_000);
  });

  it("a Runner that is gone: the broker answers from its records, recovering until the live lease lapses, then lost_after_reconcile", async () => {
    const dir = createProjectDir({ "a.txt": "a\n" }, { name: "jobs-gone" });
    const first = await startRunner({ clientId: "tenant-j", projectId: "jobs-gone", dir, runnerId: "runner-gone-1", endpoint: "ep-gone-1" });
    const project = "agent:tenant-j:jobs-gone";
    const started = await call(project, first.rootIdentity, "run_shell", { command: "sleep 30", wait_ms: 100 });
    const jobId = String(started.result["job_id"]);
    const finished = await call(project, first.rootIdentity, "run_shell", { command: "sleep 0.3; exit 4", wait_ms: 50 });
    const finishedId = String(finished.result["job_id"]);
    await until("the heartbeat sync closes the finished Job", async () => (await jobRow(project, finishedId))?.state === "failed");
    // Heartbeats stop and the Runner stops answering (a crash that leaves no one to ask).
    first.loop.stop();
    endpoints.set("ep-gone-1", { service: { execute: () => Promise.reject(new Error("connect ECONNREFUSED")) } } as unknown as Runner);
    const early = await call(project, first.rootIdentity, "observe_jobs", { job_ids: [jobId] });
    assert.equal((early.result["jobs"] as Array<Record<string, unknown>>)[0]?.["state"], "recovering", JSON.stringify(early.result));
    const lost = await call(project, first.rootIdentity, "wait_for_job_terminal", { job_id: jobId, wait_ms: 10_000 });
    assert.equal(lost.result["execution_state"], "lost_after_reconcile", JSON.stringify(lost.result));
    assert.equal(lost.result["outcome_unknown"], true);
    const both = await call(project, first.rootIdentity, "observe_jobs", { job_ids: [finishedId, jobId] });
    const [f, l] = both.result["jobs"] as Array<Record<string, unknown>>;
    assert.deepEqual([f?.["state"], f?.["exit_code"], f?.["output_retained"]], ["completed", 4, false], "a terminal Job keeps its exit facts");
    assert.equal(l?.["state"], "lost_after_reconcile");
    const status = await broker.getFleetStatus({ clientId: "tenant-j", summaryOnly: true });
    assert.ok((status.summary?.jobs?.lostAfterReconcile ?? 0) >= 1, "counted by the one counting path");
    await first.runner.close();
  });

  it("a Project saturated by waiting calls does not starve the Job sync: running Jobs keep their live lease", async () => {
    const prefix = redisKeyPrefix();
    const busy = newBroker(prefix, 2);
    const dir = createProjectDir({ "a.txt": "a\n" }, { name: "jobs-busy" });
    const r = await startRunner({ clientId: "tenant-j", projectId: "jobs-busy", dir, runnerId: "runner-busy", endpoint: "ep-busy", via: busy });
    const project = "agent:tenant-j:jobs-busy";
    const started = await call(project, r.rootIdentity, "run_shell", { command: "sleep 2.5; echo ok", wait_ms: 50 }, busy);
    const key = { projectCanonicalId: project, jobId: String(started.result["job_id"]) };
    // Both admission slots are held by waits for longer than the Job's live lease (600 ms).
    const waits = [0, 1].map(() => call(project, r.rootIdentity, "wait_for_job_terminal", { job_id: key.jobId, wait_ms: 5_000 }, busy));
    const limiter = createRedisConcurrencyLimiter(redis, { limit: 2, prefix });
    await until("both waits hold an admission slot", async () => (await limiter.inFlight(project)) >= 2);
    assert.equal(
      (await call(project, r.rootIdentity, "observe_jobs", { job_ids: [key.jobId] }, busy)).failure?.reasonCode,
      "rate_limited",
      "the Project is saturated",
    );
    // Renewals land while saturated: the record is renewed past the first lease's end and is never
    // missing in between.
    const live = createRedisLiveJobBackend(redis, { prefix });
    const createdAt = (await live.get(key))?.createdAtMs ?? 0;
    await until("the sync renewed the live lease past its TTL", async () => {
      const job = await live.get(key);
      assert.ok(job, "the live lease never lapses");
      return job.updatedAtMs > createdAt + JOB_LEASE_MS;
    });
    for (const w of await Promise.all(waits)) assert.equal(w.result["output"], "ok\n");
  });

  it("another tenant's Job id gets exactly the answer of a nonexistent one", async () => {
    const dirA = createProjectDir({ "a.txt": "a\n" }, { name: "tenant-a" });
    const dirB = createProjectDir({ "b.txt": "b\n" }, { name: "tenant-b" });
    const a = await startRunner({ clientId: "tenant-a", projectId: "pa", dir: dirA, runnerId: "runner-a", endpoint: "ep-a" });
    const b = await startRunner({ clientId: "tenant-b", projectId: "pb", dir: dirB, runnerId: "runner-b", endpoint: "ep-b" });
    const theirs = await call("agent:tenant-b:pb", b.rootIdentity, "run_shell", { command: "sleep 2", wait_ms: 50 });
    const theirId = String(theirs.result["job_id"]);
    const missingId = "job_00000000000000000000";
    const asA = async (tool: string, id: string) => {
      const args = tool === "observe_jobs" ? { job_ids: [id] } : { job_id: id, wait_ms: 0 };
      return JSON.stringify(await call("agent:tenant-a:pa", a.rootIdentity, tool, args)).replaceAll(id, "<id>");
    };
    for (const tool of ["wait_for_job_terminal", "observe_jobs"]) {
      assert.equal(await asA(tool, theirId), await asA(tool, missingId), tool);
      assert.match(await asA(tool, theirId), /job_not_found/);
    }
  });
});
