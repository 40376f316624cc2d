/**
 * Runner-broker routing and admission against real Redis and Postgres: capability
 * prerequisites checked before dispatch, the per-Project concurrency limit shared by broker
 * replicas, and a killed Runner process (started by the local-process provisioner) marked
 * lost within two heartbeat intervals with calls failing with a structured reason.
 *
 * One concept over 400 lines: broker routing and admission against real Redis and Postgres.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { RUNNER_PROTOCOL_GENERATION, RunnerCapabilities } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger, createRedis, startServiceServer } from "@webcodex/platform";
import type { Database, Redis } from "@webcodex/platform";
import { createRefResolver } from "@webcodex/ref-resolver";
import {
  createLeaseStore,
  createLocalProcessProvisioner,
  createPostgresFenceHighWaterMark,
  createRedisConcurrencyLimiter,
  createRedisLeaseBackend,
  createRedisRunnerRegistry,
  createRunnerBroker,
  routes,
  RUNNER_TOKEN_HEADER,
  runnerCredential,
} from "@webcodex/runner-broker";
import type { RunnerBrokerDeps } from "@webcodex/runner-broker";
import { createRunnerService } from "@webcodex/runner";
import { backingServices, createBrokerTestDatabase, redisKeyPrefix, until } from "../support/index.js";
import type { BrokerTestDatabase } from "../support/index.js";

const logger = createLogger({ service: "test", level: "silent" });
const cliPath = resolve(import.meta.dirname, "../../../tools/cli/bin/webcodex.js");

const evidence = (json: string | undefined) => (JSON.parse(json || "{}") as { evidence?: Record<string, unknown> }).evidence;

/** The Runner `runnerId` once it is connected and holds its lease (its stderr in the error when it never does). */
async function registeredRunner(
  broker: Client<typeof RunnerBrokerService>,
  provisioner: { describe(workspace: { clientId: string; projectId: string }): { stderrTail: string[] } | undefined },
  workspace: { clientId: string; projectId: string },
  runnerId: string,
  what: string,
) {
  return until(
    what,
    async () => {
      const s = await broker.getFleetStatus({ clientId: workspace.clientId });
      return s.runners.find((r) => r.runnerId === runnerId && r.connectionState === "connected" && r.leaseHeld);
    },
    20_000,
  ).catch((e: unknown) => {
    throw new Error(`${String(e)}; runner stderr: ${provisioner.describe(workspace)?.stderrTail.join(" | ")}`);
  });
}

describe("runner-broker dispatch (real Redis + Postgres)", () => {
  let database: BrokerTestDatabase;
  let db: Database;
  let redisUrl: string;
  const conns: Redis[] = [];

  before(async () => {
    database = await createBrokerTestDatabase();
    db = database.db;
    redisUrl = (await backingServices()).redisUrl;
  });
  after(async () => {
    for (const c of conns) c.disconnect();
    await database.close();
  });

  const redis = async () => {
    const c = createRedis(redisUrl);
    conns.push(c);
    await until("redis ready", async () => c.status === "ready");
    return c;
  };

  /** Broker deps for one replica over shared Redis keys and Postgres. */
  const brokerDeps = async (
    prefix: string,
    over: Partial<RunnerBrokerDeps> & Pick<RunnerBrokerDeps, "runnerClient">,
    heartbeatIntervalMs = 250,
  ): Promise<RunnerBrokerDeps> => {
    const conn = await redis();
    return {
      registry: createRedisRunnerRegistry(conn, { lostAfterMs: heartbeatIntervalMs * 2, prefix }),
      leases: createLeaseStore(createRedisLeaseBackend(conn, { prefix }), createPostgresFenceHighWaterMark(db)),
      concurrency: createRedisConcurrencyLimiter(conn, { limit: 16, prefix }),
      refResolver: createInProcessClient(RefResolverService, createRefResolver({ db })),
      heartbeatIntervalMs,
      logger,
      ...over,
    };
  };

  /** A real RunnerService whose edit handler records what reached it. */
  const fakeRunner = (capabilities: RunnerCapabilityId[], onEdit: (args: Record<string, unknown>) => Promise<void> | void = () => undefined) => {
    const edits: Array<Record<string, unknown>> = [];
    const service = createRunnerService({
      runnerId: "r",
      build: "test",
      rootIdentity: async () => "root-1",
      logger,
      handlers: {
        capabilities,
        tools: {
          edit_project_files: async (a) => {
            edits.push(a);
            await onEdit(a);
            return { changed: true };
          },
          read_files: async () => ({ items: [] }),
        },
      },
    });
    return { edits, client: createInProcessClient(RunnerService, service) };
  };

  const register = (
    broker: ReturnType<typeof createInProcessClient<typeof RunnerBrokerService>>,
    runnerId: string,
    projectId: string,
    capabilities: RunnerCapabilityId[],
  ) =>
    broker.registerRunner({
      runnerId,
      clientId: "tenant-d",
      projectId,
      rootIdentity: "root-1",
      protocolGeneration: RUNNER_PROTOCOL_GENERATION,
      build: "test",
      capabilities: new RunnerCapabilities(capabilities).toWire(),
      endpointUrl: runnerId,
    });

  const editArgs = (expectedMatchCount?: number) =>
    JSON.stringify({
      changes: [
        {
          kind: "edit",
          path: "a.txt",
          expected_read_revision: "rev-1",
          edits: [{ replace_exact: { old_text: "x", new_text: "y" }, ...(expectedMatchCount ? { expected_match_count: expectedMatchCount } : {}) }],
        },
      ],
    });

  it("rejects a bulk edit before dispatch on a Runner without apply_text_edit_expected_match_count, while a plain edit still works", async () => {
    const old = fakeRunner(["readFiles", "searchTexts", "applyTextEdit"]);
    const current = fakeRunner(["readFiles", "searchTexts", "applyTextEdit", "applyTextEditExpectedMatchCount"]);
    const runners: Record<string, typeof old> = { "old-runner": old, "new-runner": current };
    const broker = createInProcessClient(
      RunnerBrokerService,
      createRunnerBroker(await brokerDeps(redisKeyPrefix(), { runnerClient: (url) => runners[url]!.client })),
    );
    assert.equal((await register(broker, "old-runner", "legacy", ["readFiles", "searchTexts", "applyTextEdit"])).leaseHeld, true);
    assert.equal(
      (await register(broker, "new-runner", "modern", ["readFiles", "searchTexts", "applyTextEdit", "applyTextEditExpectedMatchCount"])).leaseHeld,
      true,
    );
    const dispatch = (project: string, argumentsJson: string) =>
      broker.dispatch({
        callId: `c-${Math.random()}`,
        projectCanonicalId: `agent:tenant-d:${project}`,
        rootIdentity: "root-1",
        tool: "edit_project_files",
        argumentsJson,
      });

    const bulk = await dispatch("legacy", editArgs(3));
    assert.equal(bulk.failure?.reasonCode, "capability_missing");
    assert.equal(bulk.failure?.failureStage, "dispatch");
    assert.equal(bulk.failure?.detailCode, "apply_text_edit_expected_match_count");
    assert.equal(bulk.failure?.stateChanged, false);
    assert.equal(bulk.failure?.outcomeUnknown, false);
    assert.deepEqual(evidence(bulk.failure?.evidenceJson)?.["missing_capabilities"], ["apply_text_edit_expected_match_count"]);
    assert.equal(old.edits.length, 0, "nothing was dispatched: no half-run");

    const plain = await dispatch("legacy", editArgs());
    assert.equal(plain.failure, undefined);
    assert.deepEqual(JSON.parse(plain.resultJson), { changed: true });
    assert.equal(old.edits.length, 1);

    const bulkOnNew = await dispatch("modern", editArgs(3));
    assert.equal(bulkOnNew.failure, undefined, "a Runner that implements it gets the bulk edit");
    assert.equal(current.edits.length, 1);
  });

  it("a real `webcodex runner` withholding apply_text_edit_expected_match_count by configuration gets no bulk edit: the broker rejects it before dispatch", async () => {
    const interval = 300;
    const executes: string[] = [];
    const deps = await brokerDeps(
      redisKeyPrefix(),
      {
        runnerClient: (url) => {
          const client = createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "2" }));
          return {
            ...client,
            execute: (req, options) => {
              executes.push(req.tool ?? "");
              return client.execute(req, options);
            },
          } as typeof client;
        },
      },
      interval,
    );
    const server = await startServiceServer({ name: "runner-broker", port: 0, host: "127.0.0.1", routes: routes(deps), logger });
    const dir = mkdtempSync(join(tmpdir(), "wcx-withheld-"));
    writeFileSync(join(dir, "a.txt"), "x x x\n");
    const provisioner = createLocalProcessProvisioner({
      cliPath,
      brokerUrl: server.url,
      directoryFor: () => dir,
      logger,
      stopGraceMs: 2_000,
      env: { WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "apply_text_edit_expected_match_count" },
    });
    const broker = createClient(RunnerBrokerService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const workspace = { clientId: "tenant-d", projectId: "withheld" };
    try {
      const started = await provisioner.ensureRunner(workspace);
      const row = await registeredRunner(broker, provisioner, workspace, started.name, "the Runner registers and holds the lease");
      assert.ok(!row.capabilities.includes("apply_text_edit_expected_match_count"), "not advertised at registration");
      assert.ok(row.capabilities.includes("apply_text_edit_v1"));
      const rootIdentity = (await deps.registry.get(row.runnerId))!.rootIdentity;
      const dispatch = (tool: string, args: unknown) =>
        broker.dispatch({ callId: `c-${Math.random()}`, projectCanonicalId: row.projectCanonicalId, rootIdentity, tool, argumentsJson: JSON.stringify(args) });
      const read = await dispatch("read_files", { files: [{ path: "a.txt" }] });
      const revision = (JSON.parse(read.resultJson) as { items: Array<{ read_revision: string }> }).items[0]?.read_revision;
      const edit = (extra: Record<string, unknown>) => ({
        changes: [{ kind: "edit", path: "a.txt", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "x", new_text: "y" }, ...extra }] }],
      });

      const before = executes.length;
      const bulk = await dispatch("edit_project_files", edit({ expected_match_count: 3 }));
      assert.equal(bulk.failure?.reasonCode, "capability_missing");
      assert.equal(bulk.failure?.failureStage, "dispatch");
      assert.equal(bulk.failure?.detailCode, "apply_text_edit_expected_match_count");
      assert.equal(bulk.failure?.stateChanged, false);
      assert.equal(executes.length, before, "rejected by the broker: nothing was sent to the Runner");
      assert.equal(readFileSync(join(dir, "a.txt"), "utf8"), "x x x\n");

      const single = await dispatch("edit_project_files", edit({ occurrence: 1 }));
      assert.equal(single.failure, undefined, single.failure?.detailCode);
      assert.equal(executes.length, before + 1);
      assert.equal(readFileSync(join(dir, "a.txt"), "utf8"), "y x x\n");
    } finally {
      await provisioner.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("enforces the per-project concurrency limit across broker replicas with a structured rate_limited failure", async () => {
    const prefix = redisKeyPrefix();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const runner = fakeRunner(["readFiles", "searchTexts", "applyTextEdit"], () => held);
    const mk = async () =>
      createInProcessClient(
        RunnerBrokerService,
        createRunnerBroker(
          await brokerDeps(prefix, {
            runnerClient: () => runner.client,
            concurrency: createRedisConcurrencyLimiter(await redis(), { limit: 2, prefix }),
            admissionWaitMs: 100,
          }),
        ),
      );
    const [b1, b2] = [await mk(), await mk()];
    await register(b1, "busy-runner", "busy", ["readFiles", "searchTexts", "applyTextEdit"]);
    const call = (b: typeof b1) =>
      b.dispatch({
        callId: `c-${Math.random()}`,
        projectCanonicalId: "agent:tenant-d:busy",
        rootIdentity: "root-1",
        tool: "edit_project_files",
        argumentsJson: editArgs(),
      });
    const inflight = [call(b1), call(b2)];
    await until("two calls in flight", async () => runner.edits.length === 2);
    const refused = await call(b2);
    assert.equal(refused.failure?.reasonCode, "rate_limited");
    assert.equal(refused.failure?.detailCode, "project_concurrency_limit");
    assert.equal(refused.failure?.stateChanged, false);
    assert.deepEqual(evidence(refused.failure?.evidenceJson), { limit: 2, in_flight: 2 });
    assert.equal(runner.edits.length, 2, "the refused call never reached the Runner");
    const status = await b1.getFleetStatus({ clientId: "tenant-d", summaryOnly: true });
    assert.equal(status.summary?.inFlight, 2);
    release();
    for (const r of await Promise.all(inflight)) assert.equal(r.failure, undefined);
    assert.equal((await call(b1)).failure, undefined, "slots are released after the calls");
  });

  it("marks a killed Runner process lost within two heartbeat intervals; calls then fail with a structured reason", async () => {
    const interval = 300;
    const prefix = redisKeyPrefix();
    const deps = await brokerDeps(
      prefix,
      { runnerClient: (url) => createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "2" })) },
      interval,
    );
    const server = await startServiceServer({ name: "runner-broker", port: 0, host: "127.0.0.1", routes: routes(deps), logger });
    const dir = mkdtempSync(join(tmpdir(), "wcx-broker-"));
    writeFileSync(join(dir, "hello.txt"), "hello\n");
    const provisioner = createLocalProcessProvisioner({ cliPath, brokerUrl: server.url, directoryFor: () => dir, logger, stopGraceMs: 2_000 });
    const broker = createClient(RunnerBrokerService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const workspace = { clientId: "tenant-d", projectId: "killed" };
    try {
      const started = await provisioner.ensureRunner(workspace);
      assert.equal(started.action, "created");
      assert.equal((await provisioner.ensureRunner(workspace)).action, "exists", "idempotent");
      const runner = await registeredRunner(broker, provisioner, workspace, started.name, "the Runner process registers and holds the lease");
      const rootIdentity = (await deps.registry.get(runner.runnerId))!.rootIdentity;
      const read = () =>
        broker.dispatch({
          callId: `c-${Math.random()}`,
          projectCanonicalId: runner.projectCanonicalId,
          rootIdentity,
          tool: "read_files",
          argumentsJson: JSON.stringify({ files: [{ path: "hello.txt" }] }),
        });
      const ok = await read();
      assert.equal(ok.failure, undefined, ok.failure?.detailCode);
      assert.match(ok.resultJson, /hello/);

      const pid = provisioner.describe(workspace)?.pid;
      assert.ok(pid);
      process.kill(pid, "SIGKILL");
      const killedAt = Date.now();
      await until("the Runner process exits", async () => provisioner.describe(workspace)?.running === false);
      await until(
        "the Runner is reported lost",
        async () => {
          const s = await broker.getFleetStatus({ clientId: "tenant-d", summaryOnly: true });
          return s.summary?.runnersLost === 1;
        },
        3 * interval,
        10,
      );
      const lostAfter = Date.now() - killedAt;
      assert.ok(lostAfter <= 2 * interval + 60, `lost after ${lostAfter} ms (two intervals: ${2 * interval} ms)`);

      const failed = await read();
      assert.equal(failed.failure?.reasonCode, "runner_unavailable");
      assert.equal(failed.failure?.failureStage, "dispatch");
      assert.equal(failed.failure?.detailCode, "runner_lost");
      assert.equal(failed.failure?.stateChanged, false);
      assert.equal(failed.failure?.outcomeUnknown, false);
      // The lease lapses by its own TTL (measured from the last renewal, as is "lost"), so on a
      // busy machine it may be seen held for a moment after the Runner is reported lost.
      const full = await until(
        "the lost Runner's lease to lapse",
        async () => {
          const s = await broker.getFleetStatus({ clientId: "tenant-d" });
          return s.runners.every((r) => !r.leaseHeld) ? s : undefined;
        },
        3 * interval,
        10,
      );
      assert.deepEqual(
        full.runners.map((r) => [r.runnerId, r.connectionState, r.leaseHeld]),
        [[started.name, "lost", false]],
      );
      assert.equal(full.summary?.projectsRoutable, 0);

      // The provisioner brings a Runner back for the workspace; the Project is routable again.
      assert.equal((await provisioner.ensureRunner(workspace)).action, "recreated");
      await until("the new Runner serves the Project", async () => (await read()).failure === undefined, 20_000);
    } finally {
      await provisioner.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a real `webcodex runner` process shares one fence guard between serving and registration, and requires the Runner token", async () => {
    const interval = 300;
    const prefix = redisKeyPrefix();
    const runnerToken = `rt-${Math.random().toString(36).slice(2)}`;
    const deps = await brokerDeps(
      prefix,
      { runnerToken, runnerClient: (url) => createClient(RunnerService, createConnectTransport({ baseUrl: url, httpVersion: "2" })) },
      interval,
    );
    const server = await startServiceServer({ name: "runner-broker", port: 0, host: "127.0.0.1", routes: routes(deps), logger });
    const dir = mkdtempSync(join(tmpdir(), "wcx-fence-"));
    const provisioner = createLocalProcessProvisioner({ cliPath, brokerUrl: server.url, directoryFor: () => dir, runnerToken, logger, stopGraceMs: 2_000 });
    const broker = createClient(RunnerBrokerService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const workspace = { clientId: "tenant-d", projectId: "fenced" };
    try {
      const started = await provisioner.ensureRunner(workspace);
      const row = await registeredRunner(broker, provisioner, workspace, started.name, "the Runner registers with its token and holds the lease");
      const reg = (await deps.registry.get(row.runnerId))!;
      const runner = createClient(RunnerService, createConnectTransport({ baseUrl: reg.endpointUrl, httpVersion: "2" }));
      const fenceA = Number(row.fence);
      const create = (path: string, fence: number, headers: Record<string, string> = { [RUNNER_TOKEN_HEADER]: runnerCredential(runnerToken, workspace) }) =>
        runner.execute(
          {
            callId: `c-${Math.random()}`,
            tool: "edit_project_files",
            rootIdentity: reg.rootIdentity,
            fence: BigInt(fence),
            argumentsJson: JSON.stringify({ changes: [{ kind: "create", path, content: "x\n" }] }),
          },
          { headers },
        );
      await assert.rejects(
        create("no-token.txt", fenceA, {}),
        (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
        "serving requires the Runner token",
      );
      await assert.rejects(
        create("key.txt", fenceA, { [RUNNER_TOKEN_HEADER]: runnerToken }),
        (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
        "the broker's key is not this Runner's credential",
      );
      assert.equal((await create("first.txt", fenceA)).failure, undefined, "a write under the held fence runs");

      // The lease moves to another Runner with a higher fence. No call reaches this Runner with
      // it: only its heartbeats learn the Project's new fence.
      assert.ok(await deps.leases!.release(reg.canonicalId, reg.runnerId, fenceA));
      const taken = await deps.leases!.acquire(reg.canonicalId, "other-runner", 60_000);
      assert.ok(taken.held && taken.lease.fence > fenceA);
      await until("the Runner's heartbeat reports it lost the lease", async () => {
        const s = await broker.getFleetStatus({ clientId: "tenant-d" });
        return s.runners.find((r) => r.runnerId === reg.runnerId && !r.leaseHeld);
      });
      // The guard is up once a probe that could write nothing either way (its path leaves the project) is refused.
      await until("the serving guard refuses the old fence", async () => (await create("../fence-probe.txt", fenceA)).failure?.reasonCode === "fence_rejected");
      const stale = await create("stale.txt", fenceA);
      assert.equal(stale.failure?.reasonCode, "fence_rejected", "the registration loop raised the serving guard");
      assert.equal(stale.failure?.detailCode, "stale_fence");
      assert.equal(existsSync(join(dir, "stale.txt")), false, "nothing was written");
      assert.equal(existsSync(join(dir, "first.txt")), true);
    } finally {
      await provisioner.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the Redis registry forgets a deleted Project's Runner: not listed, not routed to", async () => {
    const registry = createRedisRunnerRegistry(await redis(), { lostAfterMs: 5_000, prefix: redisKeyPrefix() });
    const reg = {
      runnerId: "r-forget",
      clientId: "acme",
      projectId: "gone",
      canonicalId: "agent:acme:gone",
      rootIdentity: "root",
      protocolGeneration: 2,
      build: "b",
      capabilities: [],
      endpointUrl: "http://127.0.0.1:1",
      registeredAtMs: Date.now(),
    };
    await registry.register(reg);
    assert.equal((await registry.forProject("agent:acme:gone"))?.runnerId, "r-forget");
    await registry.forgetProject("agent:acme:gone");
    assert.equal(await registry.forProject("agent:acme:gone"), undefined);
    assert.equal(await registry.get("r-forget"), undefined);
    assert.ok(!(await registry.list()).some((r) => r.runnerId === "r-forget"));
    assert.equal(await registry.heartbeat("r-forget"), false, "a late heartbeat finds nothing (the Runner must register again)");
  });
});
