import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { RunnerBrokerService, ToolRegistryService } from "@webcodex/proto";
import { principalHeaders, serviceCallerKey } from "@webcodex/platform";
import { createBrokerCallerPolicy, createPortPolicy, principalOwnsProject } from "./caller-policy.js";

/** Projects GetProjectRunnerStates was asked about (what reached the broker). */
const asked: string[] = [];

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
        // Every project that reaches the broker is "ready", so one answered "none" never reached it.
        getProjectRunnerStates: (req: { projects: Array<{ projectCanonicalId: string }> }) => {
          asked.push(...req.projects.map((p) => p.projectCanonicalId));
          return { states: Object.fromEntries(req.projects.map((p) => [p.projectCanonicalId, "ready"])) };
        },
      } as never);
      service(ToolRegistryService, { getAdmittedCatalog: () => ({ catalogVersion: "v" }) } as never);
    },
    { router: { interceptors } },
  );
  return createClient(RunnerBrokerService, transport);
}

const denied = (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied;
const deniedWith = (why: RegExp) => (e: unknown) => denied(e) && why.test((e as ConnectError).rawMessage);
/** Sets the verified calling service, as the service-identity interceptor does. */
const calledBy =
  (service: string): ReturnType<typeof createPortPolicy> =>
  (next) =>
  (req) => {
    req.contextValues.set(serviceCallerKey, service);
    return next(req);
  };

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
    assert.equal((await control.getFleetStatus({ clientId: "acme" })).summary?.runnersTotal, 1, "the control port serves the control plane");
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

  it("refusals name the port or the caller they need; the gateway passes; other services are not the broker's to police", async () => {
    await assert.rejects(brokerBehind(createPortPolicy("registration")).getFleetStatus({}), deniedWith(/only Runner registration is served on this port/));
    await assert.rejects(brokerBehind(createPortPolicy("control")).heartbeat({ runnerId: "r" }), deniedWith(/Runners register on the registration port/));
    const headers = principalHeaders({ clientId: "acme", subject: "s" });
    await assert.rejects(
      brokerBehind(calledBy("audit"), createBrokerCallerPolicy({ requireIdentity: true })).dispatch({ projectCanonicalId: "agent:acme:p" }, { headers }),
      deniedWith(/this procedure is for the gateway/),
    );
    const viaGateway = brokerBehind(calledBy("gateway"), createBrokerCallerPolicy({ requireIdentity: true }));
    assert.equal((await viaGateway.dispatch({ projectCanonicalId: "agent:acme:p" }, { headers })).resultJson, '{"ran":true}');
    const registry = createClient(
      ToolRegistryService,
      createRouterTransport(
        ({ service }) => {
          service(ToolRegistryService, { getAdmittedCatalog: () => ({ catalogVersion: "v" }) } as never);
        },
        { router: { interceptors: [createBrokerCallerPolicy({ requireIdentity: true })] } },
      ),
    );
    assert.equal((await registry.getAdmittedCatalog({})).catalogVersion, "v");
  });

  it("project runner states: another tenant's projects never reach the broker and read as none", async () => {
    const client = brokerBehind(createBrokerCallerPolicy({ requireIdentity: false }));
    const headers = principalHeaders({ clientId: "acme", subject: "s" });
    const mixed = await client.getProjectRunnerStates(
      { projects: [{ projectCanonicalId: "agent:acme:p" }, { projectCanonicalId: "agent:other:q" }, { projectCanonicalId: "not-a-project-id" }] },
      { headers },
    );
    assert.deepEqual({ ...mixed.states }, { "agent:acme:p": "ready", "agent:other:q": "none", "not-a-project-id": "none" });
    assert.deepEqual(asked, ["agent:acme:p"], "only the caller's own project reached the broker");
    const own = await client.getProjectRunnerStates({ projects: [{ projectCanonicalId: "agent:acme:p" }] }, { headers });
    assert.deepEqual({ ...own.states }, { "agent:acme:p": "ready" });
    assert.equal(principalOwnsProject({ clientId: "acme", subject: "s" }, "garbage"), false);
    assert.equal(principalOwnsProject({ clientId: "acme", subject: "s" }, "agent:acme:p"), true);
  });
});
