/**
 * gRPC beside Connect: a plain gRPC client (@grpc/grpc-js) calls a service's main RPC on the
 * port Connect clients use, with and without the service credential, and gets the answers and
 * failures the Connect client gets (codes as gRPC defines them). The standard
 * grpc.health.v1.Health answers Check for the server and each hosted service without a
 * credential (probes carry none), NOT_FOUND for another name, and Watch streams NOT_SERVING
 * when the service's PostgreSQL (a private instance, never the shared one) stops and SERVING
 * when it is back.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
  GetAdmittedCatalogRequestSchema,
  GetAdmittedCatalogResponseSchema,
  ToolRegistryService,
} from "@webcodex/proto";
import {
  createLogger,
  createPostgresDatabase,
  createServiceIdentity,
  createServiceTransport,
  readinessFrom,
  SERVICE_TOKEN_HEADER,
  startServiceServer,
} from "@webcodex/platform";
import type { Database, ServiceIdentity, ServiceServer } from "@webcodex/platform";
import { toolRegistryRoutes } from "@webcodex/tool-registry";
import { startPrivatePostgres, until } from "../support/index.js";
import type { PrivatePostgres } from "../support/index.js";

const KEY = "k".repeat(40);
const logger = createLogger({ service: "test", level: "silent" });
const REGISTRY = "/webcodex.toolregistry.v1.ToolRegistryService/GetAdmittedCatalog";

const codec = <S extends DescMessage>(schema: S) => ({
  serialize: (value: MessageShape<S>) => Buffer.from(toBinary(schema, value)),
  deserialize: (bytes: Buffer) => fromBinary(schema, bytes),
});

/** The token a service signs `procedure` with (what its Connect client interceptor sends). */
async function tokenFor(identity: ServiceIdentity, procedure: string): Promise<string> {
  let token = "";
  const call = identity.clientInterceptor(async (req) => {
    token = req.header.get(SERVICE_TOKEN_HEADER) ?? "";
    return {} as never;
  });
  await call({ url: `http://x${procedure}`, header: new Headers(), stream: false } as never);
  return token;
}

function unary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  path: string,
  input: I,
  output: O,
  value: MessageShape<I>,
  metadata = new grpc.Metadata(),
): Promise<{ ok: true; value: MessageShape<O> } | { ok: false; code: number }> {
  const i = codec(input),
    o = codec(output);
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, i.serialize, o.deserialize, value, metadata, (error, res) => {
      resolve(error ? { ok: false, code: error.code } : { ok: true, value: res as MessageShape<O> });
    });
  });
}

describe("gRPC beside Connect", { timeout: 120_000 }, () => {
  let server: ServiceServer;
  let grpcClient: grpc.Client;
  const gateway = createServiceIdentity({ service: "gateway", key: KEY });

  before(async () => {
    server = await startServiceServer({
      name: "tool-registry",
      port: 0,
      routes: toolRegistryRoutes(),
      interceptors: [createServiceIdentity({ service: "tool-registry", key: KEY }).serverInterceptor()],
      logger,
    });
    grpcClient = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  });
  after(async () => {
    grpcClient?.close();
    await server?.close();
  });

  it("the main RPC answers a gRPC client as it answers the Connect client, with and without the service credential", async () => {
    const connectSigned = createClient(ToolRegistryService, createServiceTransport(server.url, { identity: gateway }));
    const connectAnon = createClient(ToolRegistryService, createServiceTransport(server.url));
    const signed = new grpc.Metadata();
    signed.set(SERVICE_TOKEN_HEADER, await tokenFor(gateway, REGISTRY));
    const req = create(GetAdmittedCatalogRequestSchema, { admissionProfile: "read_only", hostProfile: "generic" });

    const viaConnect = await connectSigned.getAdmittedCatalog(req);
    const viaGrpc = await unary(grpcClient, REGISTRY, GetAdmittedCatalogRequestSchema, GetAdmittedCatalogResponseSchema, req, signed);
    assert.ok(viaGrpc.ok);
    assert.deepEqual(
      viaGrpc.value.tools.map((t) => t.name),
      viaConnect.tools.map((t) => t.name),
    );
    assert.equal(viaGrpc.value.catalogVersion, viaConnect.catalogVersion);

    const connectCode = async (p: Promise<unknown>) =>
      p.then(
        () => Code.Unknown,
        (e: unknown) => ConnectError.from(e).code,
      );
    // No credential: Unauthenticated (16) either way.
    const anon = await unary(grpcClient, REGISTRY, GetAdmittedCatalogRequestSchema, GetAdmittedCatalogResponseSchema, req);
    assert.deepEqual(anon, { ok: false, code: grpc.status.UNAUTHENTICATED });
    assert.equal(await connectCode(connectAnon.getAdmittedCatalog(req)), Code.Unauthenticated);
    assert.equal(Code.Unauthenticated as number, grpc.status.UNAUTHENTICATED as number);
    // A refused request: InvalidArgument (3) either way.
    const bad = create(GetAdmittedCatalogRequestSchema, { admissionProfile: "admin", hostProfile: "generic" });
    const badSigned = new grpc.Metadata();
    badSigned.set(SERVICE_TOKEN_HEADER, await tokenFor(gateway, REGISTRY));
    assert.deepEqual(await unary(grpcClient, REGISTRY, GetAdmittedCatalogRequestSchema, GetAdmittedCatalogResponseSchema, bad, badSigned), {
      ok: false,
      code: grpc.status.INVALID_ARGUMENT,
    });
    assert.equal(await connectCode(connectSigned.getAdmittedCatalog(bad)), Code.InvalidArgument);
  });

  it("grpc.health.v1.Health/Check answers SERVING for the server and each hosted service without a credential, NOT_FOUND for another name", async () => {
    const path = `/${Health.typeName}/Check`;
    for (const service of ["", "webcodex.toolregistry.v1.ToolRegistryService"]) {
      const res = await unary(grpcClient, path, HealthCheckRequestSchema, HealthCheckResponseSchema, create(HealthCheckRequestSchema, { service }));
      assert.ok(res.ok, service);
      assert.equal(res.value.status, Status.SERVING, service);
    }
    const unknown = await unary(
      grpcClient,
      path,
      HealthCheckRequestSchema,
      HealthCheckResponseSchema,
      create(HealthCheckRequestSchema, { service: "nope.v1.Nope" }),
    );
    assert.deepEqual(unknown, { ok: false, code: grpc.status.NOT_FOUND });
    const connect = createClient(Health, createServiceTransport(server.url));
    assert.equal((await connect.check({ service: "" })).status, Status.SERVING);
    await assert.rejects(connect.check({ service: "nope.v1.Nope" }), (e: unknown) => ConnectError.from(e).code === Code.NotFound);
  });
});

describe("grpc.health.v1.Health/Watch follows readiness", { timeout: 180_000 }, () => {
  let postgres: PrivatePostgres;
  let db: Database;
  let server: ServiceServer;
  let grpcClient: grpc.Client;

  before(async () => {
    postgres = await startPrivatePostgres();
    db = createPostgresDatabase({ url: postgres.url, connectionTimeoutMs: 1_000 });
    server = await startServiceServer({
      name: "tool-registry",
      port: 0,
      routes: toolRegistryRoutes(),
      readiness: readinessFrom({ postgres: () => db.ping() }),
      healthWatchIntervalMs: 200,
      logger,
    });
    grpcClient = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  });
  after(async () => {
    grpcClient?.close();
    await server?.close();
    await db?.close();
    await postgres?.destroy();
  });

  it("streams NOT_SERVING when PostgreSQL stops and SERVING when it is back; an unknown name is SERVICE_UNKNOWN", async () => {
    const seen: Status[] = [];
    const c = codec(HealthCheckRequestSchema),
      o = codec(HealthCheckResponseSchema);
    const stream = grpcClient.makeServerStreamRequest(
      `/${Health.typeName}/Watch`,
      c.serialize,
      o.deserialize,
      create(HealthCheckRequestSchema, { service: "webcodex.toolregistry.v1.ToolRegistryService" }),
    );
    stream.on("data", (r: MessageShape<typeof HealthCheckResponseSchema>) => seen.push(r.status));
    stream.on("error", () => undefined);
    await until("the first status", () => seen.length === 1, 10_000);
    assert.deepEqual(seen, [Status.SERVING]);
    await postgres.stop();
    await until("a change after PostgreSQL stopped", () => seen.length === 2, 30_000);
    assert.deepEqual(seen, [Status.SERVING, Status.NOT_SERVING]);
    await postgres.start();
    await until("a change after PostgreSQL started", () => seen.length === 3, 30_000);
    assert.deepEqual(seen, [Status.SERVING, Status.NOT_SERVING, Status.SERVING]);
    stream.cancel();

    const unknown: Status[] = [];
    const other = grpcClient.makeServerStreamRequest(
      `/${Health.typeName}/Watch`,
      c.serialize,
      o.deserialize,
      create(HealthCheckRequestSchema, { service: "nope.v1.Nope" }),
    );
    other.on("data", (r: MessageShape<typeof HealthCheckResponseSchema>) => unknown.push(r.status));
    other.on("error", () => undefined);
    await until("the unknown service status", () => unknown.length === 1, 10_000);
    assert.deepEqual(unknown, [Status.SERVICE_UNKNOWN]);
    other.cancel();
  });
});
