/** A gRPC server reflection client (grpc.reflection.v1, as grpcurl speaks it) over @grpc/grpc-js. */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { ServerReflection, ServerReflectionRequestSchema, ServerReflectionResponseSchema } from "@webcodex/proto";
import type { ServerReflectionRequest, ServerReflectionResponse } from "@webcodex/proto";

const INFO = `/${ServerReflection.typeName}/ServerReflectionInfo`;

const codec = <S extends DescMessage>(schema: S) => ({
  serialize: (value: MessageShape<S>) => Buffer.from(toBinary(schema, value)),
  deserialize: (bytes: Buffer) => fromBinary(schema, bytes),
});

/** Sends the requests on one reflection stream; resolves with the answers or the call's gRPC status code. */
export function reflect(
  address: string,
  requests: ServerReflectionRequest["messageRequest"][],
): Promise<{ ok: true; answers: ServerReflectionResponse[] } | { ok: false; code: number }> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const i = codec(ServerReflectionRequestSchema),
    o = codec(ServerReflectionResponseSchema);
  return new Promise((resolve) => {
    const answers: ServerReflectionResponse[] = [];
    const call = client.makeBidiStreamRequest(INFO, i.serialize, o.deserialize);
    call.on("data", (r: ServerReflectionResponse) => {
      answers.push(r);
      if (answers.length === requests.length) call.end();
    });
    call.on("error", (e: grpc.ServiceError) => {
      client.close();
      resolve({ ok: false, code: e.code });
    });
    call.on("end", () => {
      client.close();
      resolve({ ok: true, answers });
    });
    for (const messageRequest of requests) call.write(create(ServerReflectionRequestSchema, { host: "", messageRequest }));
  });
}

/** The service names a list_services answer carries. */
export function listedServices(answer: ServerReflectionResponse | undefined): string[] {
  assert.equal(answer?.messageResponse.case, "listServicesResponse");
  return answer.messageResponse.value.service.map((s) => s.name).sort();
}
