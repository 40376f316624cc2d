/**
 * Runner-broker leases, fences and Job records against real Redis and Postgres: the lease
 * race, a paused Runner's stale-fenced writes, fences after Redis loses its data, and fenced
 * Job records with reconciliation.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import type { Client } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { RUNNER_PROTOCOL_GENERATION } from "@webcodex/contracts";
import { createInProcessClient, createLogger, createRedis } from "@webcodex/platform";
import type { Database, Redis } from "@webcodex/platform";
import { createRefResolver } from "@webcodex/ref-resolver";
import {
  createJobStore,
  createLeaseStore,
  createPostgresFenceHighWaterMark,
  createRedisLeaseBackend,
  createRedisLiveJobBackend,
  createRedisRunnerRegistry,
  createRunnerBroker,
} from "@webcodex/runner-broker";
import type { LeaseStore } from "@webcodex/runner-broker";
import { createFenceGuard, createRunnerService, startRegistration } from "@webcodex/runner";
import type { FenceGuard } from "@webcodex/runner";
import { backingServices, createBrokerTestDatabase, redisKeyPrefix, until } from "../support/index.js";
import type { BrokerTestDatabase } from "../support/index.js";
import { freePort } from "../support/ports.js";

const logger = createLogger({ service: "test", level: "silent" });

/** A broker client whose calls can be held, like a Runner process that is paused (SIGSTOP). */
function pausable(broker: Client<typeof RunnerBrokerService>) {
  let gate: Promise<void> | undefined;
  let open: () => void = () => undefined;
  const hold = async () => {
    while (gate) await gate;
  };
  const client = {
    registerRunner: async (...a: Parameters<typeof broker.registerRunner>) => {
      await hold();
      return broker.registerRunner(...a);
    },
    heartbeat: async (...a: Parameters<typeof broker.heartbeat>) => {
      await hold();
      return broker.heartbeat(...a);
    },
  } as unknown as Client<typeof RunnerBrokerService>;
  return {
    client,
    pause: () => {
      gate = new Promise((r) => (open = r));
    },
    resume: () => {
      gate = undefined;
      open();
    },
  };
}

describe("runner-broker leases and fences (real Redis + Postgres)", () => {
  let database: BrokerTestDatabase;
  let db: Database;
  let redis: Redis;
  let redisUrl: string;

  before(async () => {
    database = await createBrokerTestDatabase();
    db = database.db;
    redisUrl = (await backingServices()).redisUrl;
    redis = createRedis(redisUrl);
    await until("redis ready", async () => redis.status === "ready");
  });
  after(async () => {
    redis.disconnect();
    await database.close();
  });

  /** One broker replica: its own Redis connection, shared Redis keys and Postgres. */
  const replica = (prefix: string, heartbeatIntervalMs = 100) => {
    const conn = createRedis(redisUrl);
    const leases = createLeaseStore(createRedisLeaseBackend(conn, { prefix }), createPostgresFenceHighWaterMark(db));
    const impl = createRunnerBroker({
      registry: createRedisRunnerRegistry(conn, { lostAfterMs: heartbeatIntervalMs * 2, prefix }),
      leases,
      refResolver: createInProcessClient(RefResolverService, createRefResolver({ db })),
      runnerClient: () => {
        throw new Error("no runner client in this test");
      },
      heartbeatIntervalMs,
      logger,
    });
    const ready = until("redis ready", async () => conn.status === "ready");
    return { broker: createInProcessClient(RunnerBrokerService, impl), leases, ready, close: () => conn.disconnect() };
  };

  const registration = (runnerId: string) => ({
    runnerId,
    clientId: "tenant-a",
    projectId: "race",
    rootIdentity: "root-1",
    protocolGeneration: RUNNER_PROTOCOL_GENERATION,
    build: "test",
    capabilities: ["read_files_v1", "search_texts_v1", "apply_text_edit_v1"],
    endpointUrl: `http://${runnerId}`,
  });

  it("two Runners racing for one Project through two broker replicas: exactly one holds the lease", async () => {
    const prefix = redisKeyPrefix();
    const [b1, b2] = [replica(prefix), replica(prefix)];
    try {
      await Promise.all([b1.ready, b2.ready]);
      for (let round = 0; round < 5; round++) {
        const project = `race-${round}`;
        const [a, b] = await Promise.all([
          b1.broker.registerRunner({ ...registration(`ra-${round}`), projectId: project }),
          b2.broker.registerRunner({ ...registration(`rb-${round}`), projectId: project }),
        ]);
        assert.equal(Number(a.leaseHeld) + Number(b.leaseHeld), 1, `round ${round}: exactly one holder`);
        const winner = a.leaseHeld ? a : b;
        const holder = await b1.leases.current(winner.projectCanonicalId);
        assert.equal(holder?.owner, a.leaseHeld ? `ra-${round}` : `rb-${round}`);
        assert.equal(BigInt(holder?.fence ?? 0), winner.fence);
        assert.equal((a.leaseHeld ? b : a).projectFence, winner.fence, "the loser is told the winner's fence");
      }
      // And the raw store under contention: 16 replicas, one grant.
      const stores: Array<{ leases: LeaseStore; ready: Promise<unknown>; close(): void }> = Array.from({ length: 16 }, () => replica(prefix));
      await Promise.all(stores.map((s) => s.ready));
      const results = await Promise.all(stores.map((s, i) => s.leases.acquire("agent:tenant-a:contended", `r${i}`, 5_000)));
      assert.equal(results.filter((r) => r.held).length, 1);
      for (const s of stores) s.close();
    } finally {
      b1.close();
      b2.close();
    }
  });

  it("a Runner paused past its lease TTL has its stale-fenced writes rejected after it resumes", async () => {
    const prefix = redisKeyPrefix();
    const interval = 150;
    const r = replica(prefix, interval);
    await r.ready;
    const edits: string[] = [];
    const runner = (id: string, fence: FenceGuard) =>
      createInProcessClient(
        RunnerService,
        createRunnerService({
          runnerId: id,
          build: "test",
          rootIdentity: async () => "root-1",
          logger,
          fence,
          handlers: {
            capabilities: ["readFiles", "searchTexts", "applyTextEdit"],
            tools: {
              edit_project_files: async () => {
                edits.push(id);
                return { changed: true };
              },
              read_files: async () => ({ items: [] }),
            },
          },
        }),
      );
    const fenceA = createFenceGuard();
    const fenceB = createFenceGuard();
    const runnerA = runner("ra", fenceA);
    const runnerB = runner("rb", fenceB);
    const linkA = pausable(r.broker);
    const base = {
      clientId: "tenant-a",
      projectId: "paused",
      rootIdentity: "root-1",
      build: "test",
      capabilities: ["readFiles", "searchTexts", "applyTextEdit"] as const,
      logger,
    };
    const loopA = startRegistration({ ...base, broker: linkA.client, runnerId: "ra", endpointUrl: "http://ra", fence: fenceA });
    let loopB: ReturnType<typeof startRegistration> | undefined;
    try {
      await loopA.registered;
      await until("A holds the lease", async () => loopA.lease().held);
      const fenceOfA = loopA.lease().fence;
      const edit = (fence: number) => ({
        callId: `c-${Math.random()}`,
        tool: "edit_project_files",
        argumentsJson: JSON.stringify({ changes: [] }),
        rootIdentity: "root-1",
        fence: BigInt(fence),
      });
      assert.equal((await runnerA.execute(edit(fenceOfA))).failure, undefined, "A writes under its fence");

      // A pauses: its heartbeats stop reaching the broker. B registers as a standby and takes
      // the lease once A's TTL (two heartbeat intervals) has passed.
      linkA.pause();
      loopB = startRegistration({ ...base, broker: r.broker, runnerId: "rb", endpointUrl: "http://rb", fence: fenceB });
      await loopB.registered;
      const fenceOfB = (await until("B takes the lease", async () => loopB!.lease().held && loopB!.lease())).fence;
      assert.ok(fenceOfB > fenceOfA, "B's fence is above A's");
      assert.equal((await r.leases.current("agent:tenant-a:paused"))?.owner, "rb");

      // A resumes: its held heartbeat (carrying its old fence) now reaches the broker.
      linkA.resume();
      await until("A learns it lost the lease", async () => !loopA.lease().held && fenceA.highest >= fenceOfB);
      assert.equal(await r.leases.renew("agent:tenant-a:paused", "ra", fenceOfA, 1_000), false, "A cannot renew by compare-and-set");

      edits.length = 0;
      for (const target of [runnerA, runnerB]) {
        const res = await target.execute(edit(fenceOfA));
        assert.equal(res.failure?.reasonCode, "fence_rejected");
        assert.equal(res.failure?.detailCode, "stale_fence");
        assert.equal(res.failure?.stateChanged, false);
      }
      assert.deepEqual(edits, [], "no stale-fenced write ran anywhere");
      assert.equal((await runnerB.execute(edit(fenceOfB))).failure, undefined, "the new holder writes under its fence");
      assert.equal((await runnerA.execute({ ...edit(fenceOfA), tool: "read_files" })).failure, undefined, "reads are not fenced");
      assert.deepEqual(edits, ["rb"]);
    } finally {
      loopA.stop();
      loopB?.stop();
      r.close();
    }
  });

  it("after Redis loses its data (FLUSHALL) a new grant's fence is above every earlier one", async () => {
    // A private redis-server, so FLUSHALL wipes nothing of other tests; with no binary, the
    // broker's keys are deleted instead (the same loss, seen by this broker).
    const priv = await startPrivateRedis();
    const url = priv?.url ?? redisUrl;
    const prefix = redisKeyPrefix();
    const conn = createRedis(url);
    const hwm = createPostgresFenceHighWaterMark(db);
    const leases = createLeaseStore(createRedisLeaseBackend(conn, { prefix }), hwm);
    try {
      await until("redis", async () => (await conn.ping().catch(() => "")) === "PONG");
      const scope = `agent:tenant-a:flush-${Date.now()}`;
      const issued: number[] = [];
      for (let i = 0; i < 5; i++) {
        const a = await leases.acquire(scope, `r${i}`, 60_000);
        assert.ok(a.held);
        issued.push(a.lease.fence);
        assert.ok(await leases.release(scope, `r${i}`, a.lease.fence));
      }
      const held = await leases.acquire(scope, "holder", 60_000);
      assert.ok(held.held);
      issued.push(held.lease.fence);

      if (priv) await conn.flushall();
      else await deleteKeys(conn, `${prefix}*`);
      assert.equal(await conn.get(`${prefix}fence:{${scope}}`), null, "the counter is gone");
      assert.equal(await leases.current(scope), undefined, "and so is the lease");

      const next = await leases.acquire(scope, "newcomer", 60_000);
      assert.ok(next.held);
      assert.ok(next.lease.fence > Math.max(...issued), `fence ${next.lease.fence} > ${Math.max(...issued)}`);
      assert.equal(await leases.renew(scope, "holder", held.lease.fence, 60_000), false, "the pre-loss holder cannot renew");

      // A stale counter (an old snapshot restored) cannot make fences go backwards either.
      await leases.release(scope, "newcomer", next.lease.fence);
      await conn.set(`${prefix}fence:{${scope}}`, "1");
      const afterRestore = await leases.acquire(scope, "third", 60_000);
      assert.ok(afterRestore.held && afterRestore.lease.fence > next.lease.fence, "write-through refused the stale fence and re-seeded");
      assert.equal(await hwm.read(scope), afterRestore.held ? afterRestore.lease.fence : -1);
    } finally {
      conn.disconnect();
      await priv?.stop();
    }
  });

  it("Job records: fenced live writes, one terminal summary in Postgres, lost_after_reconcile after the live state vanishes", async () => {
    const prefix = redisKeyPrefix();
    const jobs = createJobStore({ live: createRedisLiveJobBackend(redis, { prefix }), db });
    const base = { projectCanonicalId: "agent:tenant-j:p", clientId: "tenant-j", tool: "run_shell" };
    const j1 = { ...base, jobId: "job-1" };
    const j2 = { ...base, jobId: "job-2" };
    const j3 = { ...base, jobId: "job-3" };

    assert.deepEqual(await jobs.start({ ...j1, runnerId: "ra", fence: 5, callId: "call-1" }, 60_000), { ok: true, adopted: false });
    assert.deepEqual(await jobs.update(j1, 5, { state: "running" }, 60_000), { ok: true, adopted: false });
    await jobs.start({ ...j2, runnerId: "ra", fence: 5, state: "running" }, 60_000);
    await jobs.start({ ...j3, runnerId: "ra", fence: 5 }, 60_000);
    assert.deepEqual(await jobs.counts({ clientId: "tenant-j" }), { active: 3, running: 2, queued: 1, recovering: 0, lostAfterReconcile: 0 });

    // A new lease holder (fence 6) adopts job-1; the old owner's writes are refused.
    assert.deepEqual(await jobs.update(j1, 6, { state: "recovering", runnerId: "rb" }, 60_000), { ok: true, adopted: true });
    assert.deepEqual(await jobs.update(j1, 5, { state: "running" }, 60_000), { ok: false, reason: "stale_fence", fence: 6 });
    assert.deepEqual(await jobs.finish(j1, 5, { state: "succeeded", exitCode: 0 }), { ok: false, reason: "stale_fence", fence: 6 });
    assert.deepEqual(await jobs.finish(j1, 6, { state: "failed", exitCode: 2, summary: { output_lines: 3 } }), { ok: true, adopted: false });
    assert.deepEqual(
      await jobs.finish(j1, 6, { state: "succeeded", exitCode: 0 }),
      { ok: false, reason: "already_terminal", state: "failed" },
      "terminal once",
    );
    const rec = await jobs.get(j1);
    assert.equal(rec?.state, "failed");
    assert.deepEqual(rec?.terminal && { exitCode: rec.terminal.exitCode, outcomeUnknown: rec.terminal.outcomeUnknown, summary: rec.terminal.summary }, {
      exitCode: 2,
      outcomeUnknown: false,
      summary: { output_lines: 3 },
    });
    assert.equal(rec?.runnerId, "rb");
    assert.equal(rec?.fence, 6);

    // job-2's live state vanishes (Runner gone, lease expired, or Redis lost): reconciliation
    // reports it lost with outcome unknown, never as success. job-3 is still live.
    await redis.del(`${prefix}job:{${j2.projectCanonicalId}}:${j2.jobId}`);
    const lost = await jobs.reconcile({ clientId: "tenant-j", graceMs: 0 });
    assert.deepEqual(lost, [{ projectCanonicalId: j2.projectCanonicalId, jobId: "job-2" }]);
    const r2 = await jobs.get(j2);
    assert.equal(r2?.state, "lost_after_reconcile");
    assert.equal(r2?.terminal?.outcomeUnknown, true);
    assert.deepEqual(await jobs.counts({ clientId: "tenant-j" }), { active: 1, running: 0, queued: 1, recovering: 0, lostAfterReconcile: 1 });
    assert.deepEqual(await jobs.finish(j2, 5, { state: "succeeded" }), { ok: false, reason: "already_terminal", state: "lost_after_reconcile" });
    assert.deepEqual(await jobs.counts({ clientId: "someone-else" }), { active: 0, running: 0, queued: 0, recovering: 0, lostAfterReconcile: 0 });
  });
});

async function deleteKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}

async function startPrivateRedis(): Promise<{ url: string; stop(): Promise<void> } | undefined> {
  const port = await freePort();
  let proc: ChildProcess;
  try {
    proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  const started = await new Promise<boolean>((resolve) => {
    proc.once("error", () => resolve(false));
    proc.once("spawn", () => resolve(true));
  });
  if (!started) return undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((r) => {
        if (proc.exitCode !== null) return r();
        proc.once("exit", () => r());
        proc.kill("SIGTERM");
      }),
  };
}
