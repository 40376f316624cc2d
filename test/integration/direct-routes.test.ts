/**
 * Direct routes against real Redis and Postgres: the gateway's route table calls Runners
 * itself on routes the broker issued. Route churn with two Runners (the lease moves to B while
 * the gateway holds a route to A: A refuses by its fence with nothing done, B serves; a call
 * that started is never re-sent), and a broker outage (warm routes keep serving, a Project
 * without a route fails dependency_unavailable, everything recovers after the broker is back,
 * with the same route table).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { toolDefinition } from "@webcodex/contracts";
import type { RunnerCapabilityId, ToolDefinition } from "@webcodex/contracts";
import { createInProcessClient, createLogger, createRedis } from "@webcodex/platform";
import type { Redis } from "@webcodex/platform";
import { createRefResolver } from "@webcodex/ref-resolver";
import {
  createLeaseStore,
  createPostgresFenceHighWaterMark,
  createRedisLeaseBackend,
  createRedisRunnerRegistry,
  createRunnerBroker,
  runnerCredential,
} from "@webcodex/runner-broker";
import { createFenceGuard, createRunnerService, startRegistration } from "@webcodex/runner";
import type { FenceGuard } from "@webcodex/runner";
import { createRouteTable } from "@webcodex/gateway";
import type { RoutedCall } from "@webcodex/gateway";
import { backingServices, createBrokerTestDatabase, redisKeyPrefix, until } from "../support/index.js";
import type { BrokerTestDatabase } from "../support/index.js";

const logger = createLogger({ service: "test", level: "silent" });
const KEY = "broker-runner-key-for-this-test";
const CAPS: readonly RunnerCapabilityId[] = ["readFiles", "searchTexts", "applyTextEdit"];
const principal = { "x-webcodex-client-id": "tenant-a", "x-webcodex-subject": "alice" };

/** A broker link that can be cut (the broker process killed) and restored. */
function killable<T extends object>(client: T) {
  let down = false;
  const proxy = new Proxy(client, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        if (down) throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { client: proxy, kill: () => (down = true), restart: () => (down = false) };
}

describe("direct routes (real Redis + Postgres)", () => {
  let database: BrokerTestDatabase;
  let redis: Redis;
  let redisUrl: string;

  before(async () => {
    database = await createBrokerTestDatabase();
    redisUrl = (await backingServices()).redisUrl;
    redis = createRedis(redisUrl);
    await until("redis ready", async () => redis.status === "ready");
  });
  after(async () => {
    redis.disconnect();
    await database.close();
  });

  /** A broker, Runners served in-process at `http://<id>`, and a gateway route table. */
  async function harness(o: { heartbeatIntervalMs: number; leaseTtlMs?: number }) {
    const prefix = redisKeyPrefix();
    const conn = createRedis(redisUrl);
    await until("redis ready", async () => conn.status === "ready");
    const leases = createLeaseStore(createRedisLeaseBackend(conn, { prefix }), createPostgresFenceHighWaterMark(database.db));
    const runners = new Map<string, Client<typeof RunnerService>>();
    const runnerClient = (url: string) => {
      const c = runners.get(new URL(url).host);
      if (!c)
        throw new ConnectError("connect ECONNREFUSED", Code.Unavailable, undefined, undefined, Object.assign(new Error("refused"), { code: "ECONNREFUSED" }));
      return c;
    };
    const impl = createRunnerBroker({
      registry: createRedisRunnerRegistry(conn, { lostAfterMs: o.heartbeatIntervalMs * 2, prefix }),
      leases,
      refResolver: createInProcessClient(RefResolverService, createRefResolver({ db: database.db })),
      runnerClient,
      heartbeatIntervalMs: o.heartbeatIntervalMs,
      ...(o.leaseTtlMs ? { leaseTtlMs: o.leaseTtlMs } : {}),
      runnerToken: KEY,
      logger,
    });
    const link = killable(createInProcessClient(RunnerBrokerService, impl));
    /** Per Runner: the calls its handlers ran. */
    const ran = new Map<string, string[]>();
    /** The Runners' clock (route expiries, lease validity): real time plus what a test advanced it by. */
    let advancedMs = 0;
    const runnerClock = () => Date.now() + advancedMs;
    const loops: Array<{ stop(): void }> = [];
    const startRunner = async (id: string, projectId: string, hold?: { gate: Promise<void> }) => {
      const fence: FenceGuard = createFenceGuard();
      ran.set(id, []);
      const credential = runnerCredential(KEY, { clientId: "tenant-a", projectId });
      const record = (tool: string) => async () => {
        ran.get(id)?.push(tool);
        if (hold) await hold.gate;
        return tool === "read_files" ? { items: [] } : { changed: true };
      };
      const service = createRunnerService({
        runnerId: id,
        build: "test",
        rootIdentity: async () => "root-1",
        logger,
        fence,
        now: runnerClock,
        runnerToken: credential,
        handlers: { capabilities: CAPS, tools: { read_files: record("read_files"), edit_project_files: record("edit_project_files") } },
      });
      runners.set(id, createInProcessClient(RunnerService, service));
      const loop = startRegistration({
        broker: link.client,
        runnerId: id,
        clientId: "tenant-a",
        projectId,
        rootIdentity: "root-1",
        build: "test",
        capabilities: CAPS,
        endpointUrl: `http://${id}`,
        logger,
        fence,
        runnerToken: credential,
      });
      loops.push(loop);
      await loop.registered;
      return { loop, fence };
    };
    // Looked up per call, so a test can swap a Runner's client after the table cached it.
    const late = (url: string) =>
      ({ execute: (...a: Parameters<Client<typeof RunnerService>["execute"]>) => runnerClient(url).execute(...a) }) as Client<typeof RunnerService>;
    const table = createRouteTable({ broker: link.client, runnerClient: late, logger, renewBeforeMs: 0 });
    const call = (projectId: string, def: ToolDefinition, args: Record<string, unknown> = {}): RoutedCall => ({
      callId: `c-${Math.random()}`,
      projectCanonicalId: `agent:tenant-a:${projectId}`,
      rootIdentity: "root-1",
      def,
      args,
      hasFallback: false,
      signal: new AbortController().signal,
    });
    return {
      leases,
      link,
      ran,
      runners,
      startRunner,
      /** Moves the Runners' clock forward (the broker's and Redis's stay on real time). */
      advanceRunnerClock(ms: number) {
        advancedMs += ms;
      },
      table,
      call,
      close() {
        for (const l of loops) l.stop();
        conn.disconnect();
      },
    };
  }

  const readFiles = toolDefinition("read_files") as ToolDefinition;
  const edit = toolDefinition("edit_project_files") as ToolDefinition;

  it("route churn: the lease moves to B while the gateway holds a route to A; A refuses by its fence, B serves; a started call is never re-sent", async () => {
    // Heartbeats far inside the lease TTL, so a loaded machine does not lapse A's lease early.
    const h = await harness({ heartbeatIntervalMs: 150, leaseTtlMs: 1_000 });
    try {
      const a = await h.startRunner("ra", "churn");
      await until("A holds the lease", async () => a.loop.lease().held);
      const first = await h.table.call(h.call("churn", readFiles), principal);
      assert.equal(first.relay, false);
      assert.deepEqual(h.ran.get("ra"), ["read_files"], "the first call went to A directly");
      assert.equal(h.table.brokerCalls, 1);
      for (let i = 0; i < 5; i++) await h.table.call(h.call("churn", readFiles), principal);
      assert.equal(h.table.brokerCalls, 1, "warm calls ask the broker nothing");

      // A stops reaching the broker (lost); B registers and takes the lease once A's lapsed.
      const fenceOfA = a.loop.lease().fence;
      a.loop.stop();
      const b = await h.startRunner("rb", "churn");
      await until("B takes the lease", async () => b.loop.lease().held, 10_000);
      assert.ok(b.loop.lease().fence > fenceOfA);
      assert.equal((await h.leases.current("agent:tenant-a:churn"))?.owner, "rb");

      // The gateway still holds its route to A. The next (writing) call reaches A, which
      // refuses it by its fence before anything runs; the gateway asks the broker once and B serves it.
      h.ran.set("ra", []);
      const moved = await h.table.call(h.call("churn", edit, { changes: [] }), principal);
      assert.equal(moved.relay, false);
      assert.ok(!moved.relay && moved.failure === undefined, `served: ${JSON.stringify(moved)}`);
      assert.deepEqual(h.ran.get("ra"), [], "nothing ran on A");
      assert.deepEqual(h.ran.get("rb"), ["edit_project_files"], "B served it, once");
      assert.equal(h.table.brokerCalls, 2, "one more route from the broker");

      // A call that reached B and started, whose connection then breaks: never re-sent.
      const realB = h.runners.get("rb") as Client<typeof RunnerService>;
      h.runners.set("rb", {
        ...realB,
        execute: async (...args: Parameters<typeof realB.execute>) => {
          await realB.execute(...args);
          throw new ConnectError("stream reset", Code.Unavailable);
        },
      } as Client<typeof RunnerService>);
      h.ran.set("rb", []);
      const broken = await h.table.call(h.call("churn", edit, { changes: [] }), principal);
      assert.ok(!broken.relay && broken.failure, "answered with a failure");
      assert.equal(!broken.relay && broken.failure?.reason_code, "runner_lost");
      assert.equal(!broken.relay && broken.failure?.outcome_unknown, true, "a write whose connection broke has an unknown outcome");
      assert.deepEqual(h.ran.get("rb"), ["edit_project_files"], "it ran once and was not re-sent");
      assert.deepEqual(h.ran.get("ra"), [], "nor sent elsewhere");
    } finally {
      h.close();
    }
  });

  it("a route whose Runner's lease lapsed is refused by the Runner itself (fence_rejected, nothing done)", async () => {
    const h = await harness({ heartbeatIntervalMs: 100 });
    try {
      const a = await h.startRunner("ra2", "lapse");
      await until("A holds the lease", async () => a.loop.lease().held);
      await h.table.call(h.call("lapse", readFiles), principal);
      const route = (await h.link.client.getRoute({ projectCanonicalId: "agent:tenant-a:lapse", rootIdentity: "root-1" }, { headers: principal })).route;
      assert.equal(route?.kind, "direct");
      // The Runner loses contact with the broker: its lease lapses locally after the TTL (its
      // clock moves past it; the route credential's 60 s stay valid).
      a.loop.stop();
      h.advanceRunnerClock(400);
      h.ran.set("ra2", []);
      const res = await (h.runners.get("ra2") as Client<typeof RunnerService>).execute(
        { callId: "x", tool: "edit_project_files", argumentsJson: "{}", rootIdentity: "root-1", fence: route?.fence ?? 0n },
        { headers: { "x-webcodex-route": route?.credential ?? "" } },
      );
      assert.equal(res.failure?.reasonCode, "fence_rejected");
      assert.equal(res.failure?.detailCode, "route_stale");
      assert.deepEqual(h.ran.get("ra2"), [], "nothing ran");
      // A forged or other-Runner credential is refused at the door.
      await assert.rejects(
        (h.runners.get("ra2") as Client<typeof RunnerService>).execute(
          { callId: "y", tool: "read_files", argumentsJson: "{}", rootIdentity: "root-1", fence: route?.fence ?? 0n },
          { headers: { "x-webcodex-route": `${route?.credential ?? ""}x` } },
        ),
        (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
      );
    } finally {
      h.close();
    }
  });

  it("broker killed: warm routes keep serving, a Project without a route fails dependency_unavailable, all recover after restart", async () => {
    // A lease TTL long enough to outlast the outage window measured here.
    const h = await harness({ heartbeatIntervalMs: 100, leaseTtlMs: 6_000 });
    try {
      const warm = await h.startRunner("rw", "warm");
      const cold = await h.startRunner("rc", "cold");
      await until("both hold their leases", async () => warm.loop.lease().held && cold.loop.lease().held);
      await h.table.call(h.call("warm", readFiles), principal);
      const before = h.table.brokerCalls;

      h.link.kill();
      const killedAt = Date.now();
      let served = 0;
      while (Date.now() - killedAt < 2_000) {
        const r = await h.table.call(h.call("warm", edit, { changes: [] }), principal);
        assert.ok(!r.relay && r.failure === undefined, `warm route served during the outage: ${JSON.stringify(r)}`);
        served += 1;
        await new Promise((res) => setTimeout(res, 50));
      }
      assert.ok(served >= 10);
      assert.equal(h.table.brokerCalls, before, "no broker call for the warm route");
      const coldAnswer = await h.table.call(h.call("cold", readFiles), principal);
      assert.ok(!coldAnswer.relay && coldAnswer.failure);
      assert.equal(!coldAnswer.relay && coldAnswer.failure?.reason_code, "dependency_unavailable");
      assert.equal(!coldAnswer.relay && coldAnswer.failure?.outcome_unknown, false);
      assert.deepEqual(h.ran.get("rc"), [], "nothing ran for the Project without a route");

      h.link.restart();
      // The Runners re-register on their own; the same route table (no gateway restart) serves both.
      await until(
        "the cold project is served again",
        async () => {
          const r = await h.table.call(h.call("cold", readFiles), principal);
          return !r.relay && r.failure === undefined;
        },
        10_000,
      );
      const w = await h.table.call(h.call("warm", readFiles), principal);
      assert.ok(!w.relay && w.failure === undefined);
    } finally {
      h.close();
    }
  });
});
