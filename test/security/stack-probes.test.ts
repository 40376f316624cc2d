/**
 * Probes of the service boundaries of the distributed stack (six processes, HTTP/2): what a
 * process that can reach an internal port, but is not the gateway, gets from the broker.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { RunnerBrokerService } from "@webcodex/proto";
import { runnerCredential, RUNNER_TOKEN_HEADER } from "@webcodex/runner-broker";
import { createServiceIdentity, principalHeaders } from "@webcodex/platform";
import type { ServiceIdentity } from "@webcodex/platform";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, startTestStack } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;

describe("service boundaries of the distributed stack", () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let mcp: Client;
  let canonicalId: string;
  let brokerUrl: string;

  const broker = (identity?: ServiceIdentity) =>
    createClient(
      RunnerBrokerService,
      createConnectTransport({
        baseUrl: brokerUrl,
        httpVersion: "2",
        ...(identity ? { interceptors: [identity.clientInterceptor] } : {}),
      }),
    );
  const dispatchFor = (client: ReturnType<typeof broker>, clientId: string, project: string) =>
    client.dispatch(
      {
        callId: randomBytes(8).toString("hex"),
        tool: "read_files",
        argumentsJson: JSON.stringify({ files: [{ path: "README.md" }] }),
        projectCanonicalId: project,
        rootIdentity: "whatever",
      },
      { headers: principalHeaders({ clientId, subject: "mallory" }) },
    );

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir: createProjectDir({ "README.md": "# secret readme\n" }, { name: "victim" }),
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
    });
    brokerUrl = `http://127.0.0.1:${stack.ports["runner-broker"]}`;
    mcp = await connectMcp(stack.mcpUrl, token);
    const listed = await callTool(mcp, "list_projects", {});
    canonicalId = String((listed.result["projects"] as Array<Record<string, unknown>>)[0]?.["project_id"] ?? "");
    if (!canonicalId.startsWith("agent:")) {
      const status = await callTool(mcp, "get_runtime_status", { compact: false });
      canonicalId = String((status.result["runner_details"] as Array<Record<string, unknown>>)[0]?.["project_canonical_id"]);
    }
    assert.match(canonicalId, /^agent:local:/);
    // The gateway's own path works with identity on.
    const read = await callTool(mcp, "read_files", {
      project: String((listed.result["projects"] as Array<Record<string, unknown>>)[0]?.["project_ref"]),
      files: [{ path: "README.md" }],
    });
    assert.equal(read.isError, false, JSON.stringify(read.result));
  });

  after(async () => {
    await mcp?.close();
    await stack?.stop();
    await db?.drop();
  });

  it("Dispatch without the gateway's identity is refused, the same for an existing and a missing project", async () => {
    const anonymous = broker();
    const refusals: string[] = [];
    for (const project of [canonicalId, "agent:local:does-not-exist"]) {
      await assert.rejects(dispatchFor(anonymous, "local", project), (e: unknown) => {
        assert.ok(e instanceof ConnectError && e.code === Code.Unauthenticated, String(e));
        refusals.push(`${e.code}:${e.rawMessage}`);
        return true;
      });
    }
    assert.equal(refusals[0], refusals[1]);
    // Another service's identity (a key holder that is not the gateway) is refused too.
    const audit = createServiceIdentity({ service: "audit", key: stack.serviceKey });
    await assert.rejects(dispatchFor(broker(audit), "local", canonicalId), (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied);
    // A key that is not the installation's.
    const forged = createServiceIdentity({ service: "gateway", key: randomBytes(32).toString("hex") });
    await assert.rejects(dispatchFor(broker(forged), "local", canonicalId), (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated);
  });

  it("Dispatch for a project the principal does not own is answered exactly as for a missing project", async () => {
    const gateway = createServiceIdentity({ service: "gateway", key: stack.serviceKey });
    const client = broker(gateway);
    const foreign = await dispatchFor(client, "mallory", canonicalId);
    const missing = await dispatchFor(client, "mallory", "agent:mallory:does-not-exist");
    const foreignMissing = await dispatchFor(client, "mallory", "agent:local:does-not-exist");
    assert.equal(foreign.resultJson, "");
    assert.ok(foreign.failure, "refused");
    assert.deepEqual(foreign.failure, missing.failure);
    assert.deepEqual(foreign.failure, foreignMissing.failure);
    assert.equal(JSON.stringify(foreign).includes("secret readme"), false);
    // The owner, through the same signed path, is served (the refusal is about ownership).
    const owner = await dispatchFor(client, "local", canonicalId);
    assert.notDeepEqual(owner.failure, foreign.failure);
  });

  it("a stolen Runner credential registers no other project", async () => {
    // What code running in the stack's Runner could steal: that Runner's own credential.
    const stolen = runnerCredential(stack.runnerKey, { clientId: "local", projectId: canonicalId.slice(canonicalId.lastIndexOf(":") + 1) });
    const anonymous = broker();
    const register = (clientId: string, projectId: string, credential: string) =>
      anonymous.registerRunner(
        { runnerId: `thief-${randomBytes(4).toString("hex")}`, clientId, projectId, rootIdentity: "thief-root", endpointUrl: "http://127.0.0.1:9" },
        { headers: { [RUNNER_TOKEN_HEADER]: credential } },
      );
    const refused = (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated;
    await assert.rejects(register("local", "another-project", stolen), refused);
    await assert.rejects(register("victim-tenant", "their-project", stolen), refused);
    await assert.rejects(register("victim-tenant", "their-project", stack.runnerKey), refused, "the key is no credential");
    // Nothing registered: the fleet still shows only the genuine Runner.
    const client = broker(createServiceIdentity({ service: "gateway", key: stack.serviceKey }));
    const fleet = await client.getFleetStatus({ clientId: "local" }, { headers: principalHeaders({ clientId: "local", subject: "dev" }) });
    assert.equal(
      fleet.runners.some((r) => r.runnerId.startsWith("thief-")),
      false,
    );
  });

  it("fleet status and project states are scoped to the signed principal", async () => {
    const client = broker(createServiceIdentity({ service: "gateway", key: stack.serviceKey }));
    const mine = await client.getFleetStatus({ clientId: "local" }, { headers: principalHeaders({ clientId: "local", subject: "dev" }) });
    assert.ok((mine.summary?.runnersTotal ?? 0) >= 1);
    const theirs = await client.getFleetStatus({ clientId: "local" }, { headers: principalHeaders({ clientId: "mallory", subject: "m" }) });
    assert.equal(theirs.summary?.runnersTotal, 0, "asking for another tenant's fleet shows the caller's own (none)");
    assert.equal(theirs.runners.length, 0);
    const states = await client.getProjectRunnerStates(
      { projects: [{ projectCanonicalId: canonicalId, rootIdentity: "x" }] },
      { headers: principalHeaders({ clientId: "mallory", subject: "m" }) },
    );
    assert.equal(states.states[canonicalId], "none");
  });
});
