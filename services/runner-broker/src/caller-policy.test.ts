import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { RunnerBrokerService } from "@webcodex/proto";
import { principalHeaders } from "@webcodex/platform";
import { createBrokerCallerPolicy, createPortPolicy } from "./caller-policy.js";

/** A broker whose procedures answer trivially: what reaches them is what the policies let through. */
function brokerBehind(...interceptors: ReturnType<typeof createPortPolicy>[]) {
  const transport = createRouterTransport(
    ({ service }) => {
      service(RunnerBrokerService, {
        heartbeat: () => ({ known: true }),
        registerRunner: () => ({ projectCanonicalId: "agent:c:p" }),
        dispatch: () => ({ resultJson: '{"ran":true}' }),
        raiseProjectAttemptFence: (req: { attempt?: { fence: bigint } }) => ({ highest: req.attempt?.fence ?? 0n }),
        getFleetStatus: (req: { clientId: string }) => ({ summary: { runnersTotal: req.clientId === "acme" ? 1 : 0 } }),
      } as never);
    },
    { router: { interceptors } },
  );
  return createClient(RunnerBrokerService, transport);
}

const denied = (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied;

describe("broker caller policy", () => {
  it("the registration port serves only RegisterRunner and Heartbeat; the control port refuses them", async () => {
    const registration = brokerBehind(createPortPolicy("registration"));
    assert.equal((await registration.heartbeat({ runnerId: "r" })).known, true);
    await assert.rejects(
      registration.dispatch({ projectCanonicalId: "agent:acme:p" }, { headers: principalHeaders({ clientId: "acme", subject: "s" }) }),
      denied,
    );
    await assert.rejects(registration.getFleetStatus({}), denied);
    const control = brokerBehind(createPortPolicy("control"));
    await assert.rejects(control.heartbeat({ runnerId: "r" }), denied);
    await assert.rejects(control.registerRunner({ runnerId: "r" }), denied);
  });

  it("with identity required, control-plane procedures need the gateway as caller", async () => {
    const client = brokerBehind(createBrokerCallerPolicy({ requireIdentity: true }));
    await assert.rejects(client.dispatch({ projectCanonicalId: "agent:acme:p" }, { headers: principalHeaders({ clientId: "acme", subject: "s" }) }), denied);
    assert.equal((await client.heartbeat({ runnerId: "r" })).known, true, "Runner procedures carry their own credential");
  });

  it("a Dispatch for another tenant's project never reaches the broker; fleet status is the caller's own", async () => {
    const client = brokerBehind(createBrokerCallerPolicy({ requireIdentity: false }));
    const own = await client.dispatch({ projectCanonicalId: "agent:acme:p" }, { headers: principalHeaders({ clientId: "acme", subject: "s" }) });
    assert.equal(own.resultJson, '{"ran":true}');
    const foreign = await client.dispatch({ projectCanonicalId: "agent:acme:p" }, { headers: principalHeaders({ clientId: "mallory", subject: "m" }) });
    assert.equal(foreign.resultJson, "");
    assert.equal(foreign.failure?.reasonCode, "runner_unavailable");
    assert.equal(foreign.failure?.detailCode, "no_live_runner");
    assert.equal(
      (await client.getFleetStatus({ clientId: "acme" }, { headers: principalHeaders({ clientId: "mallory", subject: "m" }) })).summary?.runnersTotal,
      0,
    );
  });

  it("an Attempt fence relay for another tenant's project never reaches the broker; the owner's does", async () => {
    const client = brokerBehind(createBrokerCallerPolicy({ requireIdentity: false }));
    const relay = { projectCanonicalId: "agent:acme:p", rootIdentity: "root-1", attempt: { taskId: "wc_task_1", fence: 5n } };
    const own = await client.raiseProjectAttemptFence(relay, { headers: principalHeaders({ clientId: "acme", subject: "s" }) });
    assert.deepEqual([own.failure, own.highest], [undefined, 5n], "the owner's relay reaches the broker");
    const foreign = await client.raiseProjectAttemptFence(relay, { headers: principalHeaders({ clientId: "mallory", subject: "m" }) });
    assert.equal(foreign.highest, 0n, "no Runner was told");
    assert.deepEqual(
      [foreign.failure?.reasonCode, foreign.failure?.detailCode],
      ["runner_unavailable", "no_live_runner"],
      "answered like a project with no Runner",
    );
  });
});
