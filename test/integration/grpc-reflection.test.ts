/**
 * grpc.reflection.v1 server reflection: a plain gRPC reflection client (@grpc/grpc-js, the
 * bidirectional ServerReflectionInfo stream grpcurl uses) lists a service's services and
 * resolves one method's descriptor, input and output types included, from the file
 * descriptors the server answers. Unknown names answer an error response (NOT_FOUND) on the
 * same stream. Reflection is off unless asked for: then the procedure is UNIMPLEMENTED.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { create, createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createLogger, createServiceIdentity, startServiceServer } from "@webcodex/platform";
import type { ServiceServer } from "@webcodex/platform";
import { toolRegistryRoutes } from "@webcodex/tool-registry";
import { listedServices, reflect } from "../support/index.js";

const KEY = "k".repeat(40);
const logger = createLogger({ service: "test", level: "silent" });

describe("grpc.reflection.v1 server reflection", { timeout: 60_000 }, () => {
  let on: ServiceServer;
  let off: ServiceServer;

  before(async () => {
    const interceptors = [createServiceIdentity({ service: "tool-registry", key: KEY }).serverInterceptor()];
    on = await startServiceServer({ name: "tool-registry", port: 0, routes: toolRegistryRoutes(), interceptors, grpcReflection: true, logger });
    off = await startServiceServer({ name: "tool-registry", port: 0, routes: toolRegistryRoutes(), interceptors, logger });
  });
  after(async () => {
    await on?.close();
    await off?.close();
  });

  it("lists the hosted services, Health and itself, without a service credential", async () => {
    const res = await reflect(`127.0.0.1:${on.port}`, [{ case: "listServices", value: "" }]);
    assert.ok(res.ok, JSON.stringify(res));
    assert.deepEqual(listedServices(res.answers[0]), [
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "webcodex.toolregistry.v1.ToolRegistryService",
    ]);
  });

  it("resolves a method's descriptor: its file with dependencies, input and output types and their fields", async () => {
    const method = "webcodex.toolregistry.v1.ToolRegistryService.GetAdmittedCatalog";
    const res = await reflect(`127.0.0.1:${on.port}`, [
      { case: "fileContainingSymbol", value: method },
      { case: "fileContainingSymbol", value: "webcodex.toolregistry.v1.NoSuchService" },
      { case: "fileByFilename", value: "grpc/health/v1/health.proto" },
    ]);
    assert.ok(res.ok, JSON.stringify(res));
    const [found, missing, byName] = res.answers;
    assert.equal(found?.messageResponse.case, "fileDescriptorResponse");
    const protos = found.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b));
    assert.equal(protos[0]?.name, "webcodex/toolregistry/v1/tool_registry.proto", "the file declaring the symbol comes first");
    // Every import is answered too, so a client can build the registry from this answer alone.
    for (const p of protos)
      for (const dep of p.dependency)
        assert.ok(
          protos.some((q) => q.name === dep),
          `${p.name} imports ${dep}, which was answered`,
        );
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: protos }));
    const service = registry.getService("webcodex.toolregistry.v1.ToolRegistryService");
    const rpc = service?.methods.find((m) => m.name === "GetAdmittedCatalog");
    assert.ok(rpc, "the method resolves");
    assert.equal(rpc.methodKind, "unary");
    assert.equal(rpc.input.typeName, "webcodex.toolregistry.v1.GetAdmittedCatalogRequest");
    assert.equal(rpc.output.typeName, "webcodex.toolregistry.v1.GetAdmittedCatalogResponse");
    assert.ok(
      rpc.input.fields.some((f) => f.name === "admission_profile"),
      "the input's fields resolve",
    );

    assert.equal(missing?.messageResponse.case, "errorResponse");
    assert.equal(missing.messageResponse.value.errorCode, grpc.status.NOT_FOUND);
    assert.equal(missing.originalRequest?.messageRequest.value, "webcodex.toolregistry.v1.NoSuchService");

    assert.equal(byName?.messageResponse.case, "fileDescriptorResponse");
    assert.equal(fromBinary(FileDescriptorProtoSchema, byName.messageResponse.value.fileDescriptorProto[0] as Uint8Array).package, "grpc.health.v1");
  });

  it("is off by default: the procedure is UNIMPLEMENTED", async () => {
    const res = await reflect(`127.0.0.1:${off.port}`, [{ case: "listServices", value: "" }]);
    assert.deepEqual(res, { ok: false, code: grpc.status.UNIMPLEMENTED });
  });
});
