/**
 * start_agent_task_attempt through the pipeline, in process: the Attempt is handed out only once
 * the Project's Runner recorded its fence (relayed through the broker to the Runner the
 * Attempt's calls are dispatched to), and that relay is timed as the call's dispatch stage.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import type { RaiseProjectAttemptFenceRequest } from "@webcodex/proto";
import { toolFailure, failureToWire } from "@webcodex/contracts";
import type { ActionRecordInit } from "./audit-recorder.js";
import { testPipeline } from "./pipeline.test-support.js";
import { unansweredRelayDetail } from "./execute/ref-resolver-tools.js";

const PROJECT = "agent:acme:app";
const started = {
  task_id: "wc_task_0123456789abcdef",
  attempt_id: "wc_att_0123456789abcdef",
  assignee_agent_id: "wc_agent_0123456789abcdef",
  attempt_fence: 7,
  attempt_controller_generation: 1,
  attempt_ref: "~t1",
  lease_expires_at: "2030-01-01T00:00:00.000Z",
};

/** The broker's answer to the relay: a response, or a thrown error. */
type Relay = (req: RaiseProjectAttemptFenceRequest) => Record<string, unknown>;

function harness(relay: Relay) {
  const seen = { relays: [] as RaiseProjectAttemptFenceRequest[], audit: [] as ActionRecordInit[] };
  const refResolver = createClient(
    RefResolverService,
    createRouterTransport(({ service }) => {
      service(RefResolverService, {
        callAgentTool: () => ({ resultJson: JSON.stringify(started), projectCanonicalId: PROJECT }),
        resolveProject: () => ({
          project: { canonicalId: PROJECT, rootIdentity: "/srv/app", incarnation: 2n, clientId: "acme", projectId: "app", name: "app" },
        }),
      });
    }),
  );
  const broker = createClient(
    RunnerBrokerService,
    createRouterTransport(({ service }) => {
      service(RunnerBrokerService, {
        raiseProjectAttemptFence: (req) => {
          seen.relays.push(req);
          return relay(req);
        },
      });
    }),
  );
  const pipeline = testPipeline({ refResolver, broker }, seen.audit);
  const caller = { principal: { clientId: "acme", subject: "worker" }, admissionProfile: "full" as const, scopes: ["webcodex:read", "webcodex:write"] };
  const start = () =>
    pipeline.call(
      caller,
      "call_runtime_tool",
      { tool: "start_agent_task_attempt", arguments: { task_id: started.task_id, assignee_agent_id: started.assignee_agent_id, idempotency_key: "k1" } },
      new AbortController().signal,
    );
  return { seen, start };
}

/** The failure a start answered with: its codes and the Runner's reason. */
const refusal = (result: { structuredContent: Record<string, unknown> }) => [
  result.structuredContent["reason_code"],
  result.structuredContent["detail_code"],
  result.structuredContent["state_changed"],
  (result.structuredContent["evidence"] as Record<string, unknown> | undefined)?.["runner_detail"],
];

describe("start_agent_task_attempt: the Attempt's fence reaches the Project's Runner first", () => {
  it("relays the fence for the Project's live root identity and times the relay as the dispatch stage", async () => {
    const { seen, start } = harness((req) => ({ highest: req.attempt?.fence ?? 0n }));
    const result = await start();
    assert.equal(result.isError, false, JSON.stringify(result.structuredContent));
    assert.equal(seen.relays.length, 1);
    const [relay] = seen.relays as [RaiseProjectAttemptFenceRequest];
    assert.deepEqual([relay.projectCanonicalId, relay.rootIdentity, relay.attempt?.taskId, relay.attempt?.fence], [PROJECT, "/srv/app", started.task_id, 7n]);
    assert.deepEqual(Object.keys(seen.audit[0]?.stageDurationsUs ?? {}).sort(), ["dispatch", "normalization", "projection", "resolution"]);
  });

  it("does not hand the Attempt out when the Runner's mark is below the new fence", async () => {
    const { start } = harness(() => ({ highest: 6n }));
    const result = await start();
    assert.equal(result.isError, true);
    assert.deepEqual(refusal(result), ["runner_unavailable", "attempt_fence_not_delivered", true, "fence_not_recorded"]);
  });

  it("names the broker's reason when no Runner was told", async () => {
    const { start } = harness(() => ({
      highest: 0n,
      failure: failureToWire(toolFailure("runner_unavailable", "dispatch", { detail_code: "runner_serves_other_incarnation" })),
    }));
    assert.deepEqual(refusal(await start()), ["runner_unavailable", "attempt_fence_not_delivered", true, "runner_serves_other_incarnation"]);
  });

  it("names the broker's Connect code when it did not answer: unreachable only when it is unavailable", async () => {
    for (const [code, detail] of [
      [Code.InvalidArgument, "broker_invalid_argument"],
      [Code.PermissionDenied, "broker_permission_denied"],
      [Code.Unavailable, "broker_unreachable"],
    ] as const) {
      const { start } = harness(() => {
        throw new ConnectError("refused", code);
      });
      assert.deepEqual(refusal(await start()), ["runner_unavailable", "attempt_fence_not_delivered", true, detail], Code[code]);
    }
  });

  it("runner_detail for an unanswered peer follows the Connect code", () => {
    assert.equal(unansweredRelayDetail("broker", new ConnectError("x", Code.DeadlineExceeded)), "broker_deadline_exceeded");
    assert.equal(unansweredRelayDetail("ref_resolver", new ConnectError("x", Code.Unavailable)), "ref_resolver_unreachable");
    assert.equal(unansweredRelayDetail("broker", new Error("socket hang up")), "broker_unknown");
  });
});
