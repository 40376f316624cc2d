import { test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import type { RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { runnerCapabilityWire, toolDefinition } from "@webcodex/contracts";
import { createLogger } from "@webcodex/platform";
import { createRouteTable } from "./routes.js";
import type { RoutedAnswer, RoutedCall } from "./routes.js";

const logger = createLogger({ service: "test", level: "silent" });
const def = toolDefinition("read_files");
assert.ok(def);
const ARGS = { requests: [{ path: "README.md" }] };
/** Everything the call needs, so it goes direct. */
const CAPABILITIES = (def.requiredCapabilities?.(ARGS) ?? []).map(runnerCapabilityWire);

/** A broker that hands out a direct route with a rising fence, counting its calls. */
function fakeBroker() {
  let asked = 0;
  const client = {
    getRoute: async () => {
      asked += 1;
      return {
        route: {
          kind: "direct",
          runnerId: "runner-a",
          endpointUrl: "http://runner-a",
          fence: BigInt(asked),
          expiresAtUnixMs: BigInt(Date.now() + 60_000),
          credential: "cred",
          capabilities: CAPABILITIES,
          build: "b",
          observeCalls: false,
        },
      };
    },
  } as unknown as Client<typeof RunnerBrokerService>;
  return { client, asked: () => asked };
}

/** A Runner that refuses every call by its fence (its lease lapsed on its side), counting them. */
function staleRunner() {
  let executed = 0;
  const client = {
    execute: async () => {
      executed += 1;
      return {
        resultJson: "",
        failure: { reasonCode: "fence_rejected", failureStage: "dispatch", detailCode: "route_stale", stateChanged: false, outcomeUnknown: false },
      };
    },
  } as unknown as Client<typeof RunnerService>;
  return { client, executed: () => executed };
}

const call = (): RoutedCall => ({
  callId: "c-1",
  projectCanonicalId: "agent:tenant-a:p1",
  rootIdentity: "root-1",
  def,
  args: ARGS,
  hasFallback: false,
  signal: new AbortController().signal,
});

test("a Runner that refuses the fresh route too: the call is relayed through the broker, never answered fence_rejected", async () => {
  const broker = fakeBroker();
  const runner = staleRunner();
  const table = createRouteTable({ broker: broker.client, runnerClient: () => runner.client, logger });
  const answer = await table.call(call(), {});
  assert.deepEqual(answer, { relay: true });
  assert.equal(runner.executed(), 2, "tried on the cached route and once on the broker's fresh one");
  assert.equal(broker.asked(), 2, "the broker was asked again once after the first refusal");
});

test("a route renewal the broker cannot be reached for keeps the unexpired direct route; an answer from the broker, or the route's expiry, ends it", async () => {
  let clock = 1_000_000;
  let broker: "up" | "down" | "refuses" = "up";
  const brokerClient = {
    getRoute: async () => {
      if (broker === "down") throw new Error("connect ECONNREFUSED");
      if (broker === "refuses")
        return { failure: { reasonCode: "runner_unavailable", failureStage: "dispatch", detailCode: "", stateChanged: false, outcomeUnknown: false } };
      return {
        route: {
          kind: "direct",
          runnerId: "runner-a",
          endpointUrl: "http://runner-a",
          fence: 1n,
          // Inside the renewal window: every call asks the broker again.
          expiresAtUnixMs: BigInt(clock + 3_000),
          credential: "cred",
          capabilities: CAPABILITIES,
          build: "b",
          observeCalls: false,
        },
      };
    },
  } as unknown as Client<typeof RunnerBrokerService>;
  const failureOf = (a: RoutedAnswer) => ("failure" in a ? a.failure : undefined);
  let executed = 0;
  const runner = {
    execute: async () => {
      executed += 1;
      return { resultJson: "{}" };
    },
  } as unknown as Client<typeof RunnerService>;
  const table = createRouteTable({ broker: brokerClient, runnerClient: () => runner, logger, now: () => clock });
  assert.equal(failureOf(await table.call(call(), {})), undefined);
  broker = "down";
  clock += 1_000;
  const kept = await table.call(call(), {});
  assert.equal(failureOf(kept), undefined, "the broker unreachable, the unexpired route serves");
  assert.equal(executed, 2);
  clock += 2_500;
  const expired = await table.call(call(), {});
  assert.equal(failureOf(expired)?.reason_code, "dependency_unavailable", `${JSON.stringify(expired)}: ` + "past its expiry the route is not used");
  assert.equal(executed, 2);
  broker = "up";
  assert.equal(failureOf(await table.call(call(), {})), undefined);
  broker = "refuses";
  clock += 1_000;
  assert.equal(failureOf(await table.call(call(), {}))?.reason_code, "runner_unavailable", "the broker's answer wins over the cached route");
  assert.equal(executed, 3);
});
