import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createInProcessClient, createLogger, mintRouteCredential, ROUTE_CREDENTIAL_HEADER } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { createFenceGuard, createRunnerService } from "./runner-service.js";

const logger = createLogger({ service: "test", level: "silent" });
const CREDENTIAL = "wcr1.this-runners-own-credential";

function runner(o: { routeConcurrency?: number; routeAdmissionWaitMs?: number; now?: () => number } = {}) {
  const fence = createFenceGuard();
  const ran: string[] = [];
  let release: () => void = () => undefined;
  let hold: Promise<void> | undefined;
  const service = createRunnerService({
    runnerId: "ra",
    build: "test",
    rootIdentity: async () => "root-1",
    logger,
    fence,
    runnerToken: CREDENTIAL,
    ...o,
    handlers: {
      capabilities: ["readFiles", "applyTextEdit"] as RunnerCapabilityId[],
      tools: {
        read_files: async () => {
          ran.push("read_files");
          await hold;
          return { items: [] };
        },
        edit_project_files: async () => {
          ran.push("edit_project_files");
          return { changed: true };
        },
      },
    },
  });
  return {
    client: createInProcessClient(RunnerService, service),
    fence,
    ran,
    holdCalls: () => (hold = new Promise<void>((r) => (release = r))),
    releaseCalls: () => release(),
  };
}

const call = (tool: string, fence: number) => ({ callId: `c-${Math.random()}`, tool, argumentsJson: "{}", rootIdentity: "root-1", fence: BigInt(fence) });
const route = (fence: number, expiresAtMs = Date.now() + 60_000, runnerId = "ra", key = CREDENTIAL) => ({
  headers: { [ROUTE_CREDENTIAL_HEADER]: mintRouteCredential(key, { runnerId, fence, expiresAtMs }) },
});

describe("direct calls on a route", () => {
  it("run under the lease this Runner holds, reads and writes alike", async () => {
    const r = runner();
    r.fence.holdLease(3, Date.now() + 10_000);
    assert.equal((await r.client.execute(call("read_files", 3), route(3))).failure, undefined);
    assert.equal((await r.client.execute(call("edit_project_files", 3), route(3))).failure, undefined);
    assert.deepEqual(r.ran, ["read_files", "edit_project_files"]);
  });

  it("are refused fence_rejected with nothing run when the lease is not held, lapsed, another fence, or a higher fence was seen; or when the route expired", async () => {
    const cases: Array<[string, (r: ReturnType<typeof runner>) => void, number, number?]> = [
      ["never held", () => undefined, 3],
      ["released", (r) => r.fence.holdLease(0, 0), 3],
      ["lapsed locally", (r) => r.fence.holdLease(3, Date.now() - 1), 3],
      ["another fence held", (r) => r.fence.holdLease(4, Date.now() + 10_000), 3],
      ["a higher fence seen", (r) => (r.fence.holdLease(3, Date.now() + 10_000), r.fence.observe(5)), 3],
      ["route expired", (r) => r.fence.holdLease(3, Date.now() + 10_000), 3, Date.now() - 1],
    ];
    for (const [why, setUp, fence, expiry] of cases) {
      const r = runner();
      setUp(r);
      for (const tool of ["read_files", "edit_project_files"]) {
        const res = await r.client.execute(call(tool, fence), route(fence, expiry));
        assert.equal(res.failure?.reasonCode, "fence_rejected", `${why}: ${tool}`);
        assert.equal(res.failure?.detailCode, "route_stale");
        assert.equal(res.failure?.stateChanged, false);
      }
      assert.deepEqual(r.ran, [], `${why}: nothing ran`);
    }
  });

  it("refuse a credential of another Runner, another key, a fence other than the call's, and open Execute only", async () => {
    const r = runner();
    r.fence.holdLease(3, Date.now() + 10_000);
    const unauthenticated = (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated;
    await assert.rejects(r.client.execute(call("read_files", 3), route(3, undefined, "rb")), unauthenticated);
    await assert.rejects(r.client.execute(call("read_files", 3), route(3, undefined, "ra", "wcr1.another")), unauthenticated);
    await assert.rejects(r.client.execute(call("read_files", 2), route(3)), unauthenticated);
    await assert.rejects(r.client.describe({}, route(3)), unauthenticated);
    await assert.rejects(r.client.raiseAttemptFence({ attempt: { taskId: "t", fence: 9n } }, route(3)), unauthenticated);
    assert.deepEqual(r.ran, []);
  });

  it("over the Runner's per-Project concurrency, queue and then are refused rate_limited with nothing run", async () => {
    const r = runner({ routeConcurrency: 1, routeAdmissionWaitMs: 100 });
    r.fence.holdLease(3, Date.now() + 10_000);
    void r.holdCalls();
    const first = r.client.execute(call("read_files", 3), route(3));
    while (r.ran.length === 0) await new Promise((res) => setImmediate(res));
    const second = await r.client.execute(call("read_files", 3), route(3));
    assert.equal(second.failure?.reasonCode, "rate_limited");
    assert.equal(second.failure?.detailCode, "project_concurrency_limit");
    // A queued call runs once a slot frees within the wait.
    const third = r.client.execute(call("read_files", 3), route(3));
    // eslint-disable-next-line no-restricted-syntax -- kept: a queued call shows no event; it must be queued before the slot frees
    await new Promise((res) => setTimeout(res, 10));
    r.releaseCalls();
    assert.equal((await first).failure, undefined);
    assert.equal((await third).failure, undefined);
    assert.deepEqual(r.ran, ["read_files", "read_files"], "the refused call never ran");
  });
});
