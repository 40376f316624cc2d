/**
 * gRPC beside Connect on the real distributed stack (six processes, real Postgres and Redis):
 * a plain gRPC client (@grpc/grpc-js) calls each service's main RPC on the port the services'
 * Connect clients use, with the caller's real credential (the service token the gateway signs
 * with, the Runner credential the broker sends), without one and with a forged one, and gets
 * what the Connect client gets: the same answer, or the same failure code (Connect's codes are
 * gRPC's, by number). Each service's grpc.health.v1.Health/Check answers both clients alike,
 * credential or not. With WEBCODEX_GRPC_REFLECTION=1 every process lists its services over
 * grpc.reflection.v1. The gateway serves MCP rather than an RPC: its gRPC surface is Health
 * and reflection.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, DescService, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client as ConnectClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { projectIdFor } from "@webcodex/cli";
import type { DistributedStack, ServiceName } from "@webcodex/cli";
import {
  AuditService,
  Health,
  HealthCheckResponse_ServingStatus as Status,
  RefResolverService,
  RunnerBrokerService,
  RunnerService,
  ToolRegistryService,
} from "@webcodex/proto";
import { createServiceIdentity, principalHeaders } from "@webcodex/platform";
import type { ServiceIdentity } from "@webcodex/platform";
import { runnerCredential, RUNNER_TOKEN_HEADER } from "@webcodex/runner-broker";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  listedServices,
  reflect,
  startTestStack,
  until,
} from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const PRINCIPAL = principalHeaders({ clientId: "local", subject: "dev" });

type Outcome = { ok: true; json: unknown } | { ok: false; code: number };

/** How one caller authenticates: headers to add to a request for `procedure` that carries `headers`. */
type Credential = (procedure: string, headers: Record<string, string>) => Promise<Record<string, string>>;

/** The headers a service's Connect client interceptor would send (its signed token over the x-webcodex-* headers). */
const signedBy =
  (identity: ServiceIdentity): Credential =>
  async (procedure, headers) => {
    let sent: Record<string, string> = {};
    const call = identity.clientInterceptor(async (req) => {
      sent = Object.fromEntries(req.header.entries());
      return {} as never;
    });
    await call({ url: `http://x${procedure}`, header: new Headers(headers), stream: false } as never);
    return sent;
  };
const fixed =
  (extra: Record<string, string>): Credential =>
  async (_procedure, headers) => ({ ...headers, ...extra });
const none: Credential = async (_procedure, headers) => headers;

interface MainRpc<S extends DescService = DescService> {
  service: ServiceName;
  desc: S;
  method: DescMethodUnary;
  request: Record<string, unknown>;
  headers: Record<string, string>;
  /** The caller that really calls it in the stack. */
  credential: Credential;
  /** The parts of the answer that two calls in a row must agree on. */
  stable(json: Record<string, unknown>): unknown;
}

function unaryMethod(desc: DescService, name: string): DescMethodUnary {
  const m = desc.methods.find((x) => x.name === name);
  assert.ok(m && m.methodKind === "unary", `${desc.typeName}/${name}`);
  return m as DescMethodUnary;
}

const codec = <S extends DescMessage>(schema: S) => ({
  serialize: (value: MessageShape<S>) => Buffer.from(toBinary(schema, value)),
  deserialize: (bytes: Buffer) => fromBinary(schema, bytes),
});

async function viaGrpc(client: grpc.Client, rpc: MainRpc, credential: Credential): Promise<Outcome> {
  const procedure = `/${rpc.desc.typeName}/${rpc.method.name}`;
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(await credential(procedure, rpc.headers))) metadata.set(k, v);
  const i = codec(rpc.method.input),
    o = codec(rpc.method.output);
  return new Promise((resolve) => {
    client.makeUnaryRequest(procedure, i.serialize, o.deserialize, create(rpc.method.input, rpc.request), metadata, (error, res) => {
      resolve(error ? { ok: false, code: error.code } : { ok: true, json: toJson(rpc.method.output, res as MessageShape<DescMessage>) });
    });
  });
}

async function viaConnect(url: string, rpc: MainRpc, credential: Credential): Promise<Outcome> {
  const procedure = `/${rpc.desc.typeName}/${rpc.method.name}`;
  const headers = await credential(procedure, rpc.headers);
  const client = createClient(rpc.desc, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true })) as ConnectClient<DescService>;
  const call = client[rpc.method.localName as keyof typeof client] as unknown as (
    req: unknown,
    o: { headers: Record<string, string> },
  ) => Promise<MessageShape<DescMessage>>;
  try {
    return { ok: true, json: toJson(rpc.method.output, await call(rpc.request, { headers })) };
  } catch (error) {
    return { ok: false, code: ConnectError.from(error).code };
  }
}

describe("gRPC clients on the distributed stack", { timeout: 240_000 }, () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let mcp: Client;
  let rpcs: MainRpc[];
  const url = (s: ServiceName) => `http://127.0.0.1:${stack.ports[s]}`;
  const clients = new Map<ServiceName, grpc.Client>();
  const grpcClient = (s: ServiceName) => {
    let c = clients.get(s);
    if (!c) clients.set(s, (c = new grpc.Client(`127.0.0.1:${stack.ports[s]}`, grpc.credentials.createInsecure())));
    return c;
  };

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const projectDir = createProjectDir({ "README.md": "# grpc\n" }, { name: "grpcdemo" });
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      extraEnv: { WEBCODEX_GRPC_REFLECTION: "1" },
    });
    mcp = await connectMcp(stack.mcpUrl, token);
    // One call, so the audit log and the ref-resolver have something to answer with.
    const listed = await callTool(mcp, "list_projects", {});
    assert.equal(listed.isError, false, JSON.stringify(listed.result));
    const gateway = signedBy(createServiceIdentity({ service: "gateway", key: stack.serviceKey }));
    const runnerCred = runnerCredential(stack.runnerKey, { clientId: "local", projectId: projectIdFor(projectDir) });
    rpcs = [
      {
        service: "tool-registry",
        desc: ToolRegistryService,
        method: unaryMethod(ToolRegistryService, "GetAdmittedCatalog"),
        request: { admissionProfile: "read_only", hostProfile: "generic" },
        headers: {},
        credential: gateway,
        stable: (j) => j,
      },
      {
        service: "ref-resolver",
        desc: RefResolverService,
        method: unaryMethod(RefResolverService, "ListProjects"),
        request: {},
        headers: PRINCIPAL,
        credential: gateway,
        stable: (j) => ((j["projects"] ?? []) as Array<{ project?: { canonicalId?: string } }>).map((p) => p.project?.canonicalId),
      },
      {
        service: "audit",
        desc: AuditService,
        method: unaryMethod(AuditService, "ListActions"),
        request: { limit: 50 },
        headers: PRINCIPAL,
        credential: gateway,
        stable: (j) => ((j["records"] ?? []) as Array<{ callId?: string; tool?: string }>).map((r) => [r.callId, r.tool]),
      },
      {
        service: "runner-broker",
        desc: RunnerBrokerService,
        method: unaryMethod(RunnerBrokerService, "GetFleetStatus"),
        request: { clientId: "local" },
        headers: PRINCIPAL,
        credential: gateway,
        stable: (j) => ({
          runners: ((j["runners"] ?? []) as Array<{ runnerId?: string }>).map((r) => r.runnerId).sort(),
          total: (j["summary"] as { runnersTotal?: number } | undefined)?.runnersTotal,
        }),
      },
      {
        service: "runner",
        desc: RunnerService,
        method: unaryMethod(RunnerService, "Describe"),
        request: {},
        headers: {},
        credential: fixed({ [RUNNER_TOKEN_HEADER]: runnerCred }),
        stable: (j) => ({ runnerId: j["runnerId"], capabilities: j["capabilities"] }),
      },
    ];
    // The read-only call's audit record is delivered in a batch: wait until it is stored.
    const audit = rpcs[2] as MainRpc;
    await until(
      "the list_projects record is in the audit log",
      async () => {
        const r = await viaConnect(url("audit"), audit, gateway);
        return r.ok && ((r.json as { records?: unknown[] }).records?.length ?? 0) > 0;
      },
      30_000,
    );
  });

  after(async () => {
    for (const c of clients.values()) c.close();
    await mcp?.close();
    await stack?.stop();
    await db?.drop();
  });

  it("each service's main RPC answers a gRPC client as it answers the Connect client, with the caller's credential", async () => {
    for (const rpc of rpcs) {
      const connect = await viaConnect(url(rpc.service), rpc, rpc.credential);
      const grpcOutcome = await viaGrpc(grpcClient(rpc.service), rpc, rpc.credential);
      assert.ok(connect.ok, `${rpc.service} via Connect: ${JSON.stringify(connect)}`);
      assert.ok(grpcOutcome.ok, `${rpc.service} via gRPC: ${JSON.stringify(grpcOutcome)}`);
      const stable = rpc.stable(grpcOutcome.json as Record<string, unknown>);
      assert.deepEqual(stable, rpc.stable(connect.json as Record<string, unknown>), rpc.service);
      // Not an empty answer that would match anything.
      assert.notDeepEqual(JSON.stringify(stable), JSON.stringify(rpc.stable({})), `${rpc.service} answered something`);
    }
  });

  it("without a credential, or with a forged one, each main RPC fails with the same code for both clients (UNAUTHENTICATED)", async () => {
    const forgedGateway = signedBy(createServiceIdentity({ service: "gateway", key: randomBytes(32).toString("base64url") }));
    const forgedRunner = fixed({ [RUNNER_TOKEN_HEADER]: runnerCredential(randomBytes(32).toString("base64url"), { clientId: "local", projectId: "x" }) });
    for (const rpc of rpcs) {
      for (const [label, credential] of [
        ["none", none],
        ["forged", rpc.service === "runner" ? forgedRunner : forgedGateway],
      ] as const) {
        const connect = await viaConnect(url(rpc.service), rpc, credential);
        const grpcOutcome = await viaGrpc(grpcClient(rpc.service), rpc, credential);
        assert.deepEqual(connect, { ok: false, code: Code.Unauthenticated }, `${rpc.service} ${label} via Connect`);
        assert.deepEqual(grpcOutcome, { ok: false, code: grpc.status.UNAUTHENTICATED }, `${rpc.service} ${label} via gRPC`);
      }
    }
    // Connect's codes are gRPC's by number: the mapping the comparison relies on.
    assert.equal(Code.Unauthenticated as number, grpc.status.UNAUTHENTICATED as number);
  });

  it("grpc.health.v1.Health/Check answers both clients alike on every service, with or without a credential", async () => {
    const check = unaryMethod(Health, "Check");
    const gateway = signedBy(createServiceIdentity({ service: "gateway", key: stack.serviceKey }));
    for (const [service, desc] of [
      ["gateway", undefined],
      ["tool-registry", ToolRegistryService],
      ["ref-resolver", RefResolverService],
      ["audit", AuditService],
      ["runner-broker", RunnerBrokerService],
      ["runner", RunnerService],
    ] as const) {
      for (const name of ["", ...(desc ? [desc.typeName] : []), "nope.v1.Nope"]) {
        for (const credential of [none, gateway]) {
          const rpc: MainRpc = { service, desc: Health, method: check, request: { service: name }, headers: {}, credential, stable: (j) => j };
          const connect = await viaConnect(url(service), rpc, credential);
          const grpcOutcome = await viaGrpc(grpcClient(service), rpc, credential);
          const expected: Outcome = name === "nope.v1.Nope" ? { ok: false, code: grpc.status.NOT_FOUND } : { ok: true, json: { status: "SERVING" } };
          assert.deepEqual(grpcOutcome, expected, `${service} "${name}" via gRPC`);
          assert.deepEqual(connect, expected, `${service} "${name}" via Connect`);
        }
      }
    }
    assert.equal(Status.SERVING, 1);
  });

  it("with WEBCODEX_GRPC_REFLECTION=1 every process lists its own services over grpc.reflection.v1", async () => {
    const own: Record<ServiceName, string[]> = {
      gateway: [],
      "tool-registry": [ToolRegistryService.typeName],
      "ref-resolver": [RefResolverService.typeName],
      audit: [AuditService.typeName],
      "runner-broker": [RunnerBrokerService.typeName],
      runner: [RunnerService.typeName],
    };
    for (const [service, names] of Object.entries(own) as Array<[ServiceName, string[]]>) {
      const res = await reflect(`127.0.0.1:${stack.ports[service]}`, [{ case: "listServices", value: "" }]);
      assert.ok(res.ok, `${service}: ${JSON.stringify(res)}`);
      assert.deepEqual(listedServices(res.answers[0]), [...names, Health.typeName, "grpc.reflection.v1.ServerReflection"].sort(), service);
    }
  });
});
