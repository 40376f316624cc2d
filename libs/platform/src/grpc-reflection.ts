/**
 * The standard gRPC server reflection protocol (grpc.reflection.v1.ServerReflection, from its
 * published .proto) served as a Connect service, so `grpcurl` and other reflection clients can
 * list a server's services and read their descriptors. It answers from the descriptors the
 * server's own code was generated from: list_services names every service the server hosts
 * (plus grpc.health.v1.Health and the reflection service itself); file_by_filename and
 * file_containing_symbol (a service, method, message, enum, field or enum value) answer the
 * file with its transitive dependencies. Extensions are not used by WebCodex: their requests
 * answer an error response (NOT_FOUND), as the protocol allows.
 */
import { toBinary } from "@bufbuild/protobuf";
import type { DescFile, DescMessage, DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ServerReflection } from "@webcodex/proto";
import type { ServerReflectionRequest, ServerReflectionResponse } from "@webcodex/proto";

/** gRPC status codes used in error responses. */
const NOT_FOUND = 5;
const INVALID_ARGUMENT = 3;

/** The descriptor files (with their dependencies) and symbols behind a set of services. */
function indexOf(services: readonly DescService[]) {
  const files = new Map<string, DescFile>();
  const symbols = new Map<string, DescFile>();
  const addMessage = (m: DescMessage, file: DescFile) => {
    symbols.set(m.typeName, file);
    for (const f of m.fields) symbols.set(`${m.typeName}.${f.name}`, file);
    for (const o of m.oneofs) symbols.set(`${m.typeName}.${o.name}`, file);
    for (const n of m.nestedMessages) addMessage(n, file);
    for (const e of m.nestedEnums) {
      symbols.set(e.typeName, file);
      for (const v of e.values) symbols.set(`${m.typeName}.${v.name}`, file);
    }
  };
  const addFile = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    for (const m of file.messages) addMessage(m, file);
    for (const e of file.enums) {
      symbols.set(e.typeName, file);
      const scope = file.proto.package ? `${file.proto.package}.` : "";
      for (const v of e.values) symbols.set(`${scope}${v.name}`, file);
    }
    for (const s of file.services) {
      symbols.set(s.typeName, file);
      for (const m of s.methods) symbols.set(`${s.typeName}.${m.name}`, file);
    }
    for (const d of file.dependencies) addFile(d);
  };
  for (const s of services) addFile(s.file);
  return { files, symbols };
}

/** The file and its transitive dependencies, dependencies first, each once. */
function withDependencies(file: DescFile): Uint8Array[] {
  const seen = new Set<string>();
  const out: Uint8Array[] = [];
  const visit = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.add(f.name);
    for (const d of f.dependencies) visit(d);
    out.push(toBinary(FileDescriptorProtoSchema, f.proto));
  };
  visit(file);
  // The requested file first: reflection clients read the first entry as the answer.
  return [out[out.length - 1] as Uint8Array, ...out.slice(0, -1)];
}

/** grpc.reflection.v1.ServerReflection for the given services (the reflection service adds itself). */
export function createReflectionService(services: readonly DescService[]): ServiceImpl<typeof ServerReflection> {
  const all = [...new Map([...services, ServerReflection].map((s) => [s.typeName, s])).values()];
  const { files, symbols } = indexOf(all);
  const names = all.map((s) => s.typeName).sort();

  const answer = (req: ServerReflectionRequest): ServerReflectionResponse["messageResponse"] => {
    const notFound = (message: string) => ({ case: "errorResponse" as const, value: { errorCode: NOT_FOUND, errorMessage: message } as never });
    const fileAnswer = (file: DescFile) => ({ case: "fileDescriptorResponse" as const, value: { fileDescriptorProto: withDependencies(file) } as never });
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: names.map((name) => ({ name })) } as never };
      case "fileByFilename": {
        const file = files.get(r.value);
        return file ? fileAnswer(file) : notFound(`file not found: ${r.value}`);
      }
      case "fileContainingSymbol": {
        const file = symbols.get(r.value);
        return file ? fileAnswer(file) : notFound(`symbol not found: ${r.value}`);
      }
      case "fileContainingExtension":
        return notFound(`extension not found: ${r.value.containingType}(${r.value.extensionNumber})`);
      case "allExtensionNumbersOfType":
        return symbols.has(r.value)
          ? { case: "allExtensionNumbersResponse", value: { baseTypeName: r.value, extensionNumber: [] } as never }
          : notFound(`type not found: ${r.value}`);
      default:
        return { case: "errorResponse", value: { errorCode: INVALID_ARGUMENT, errorMessage: "no request" } as never };
    }
  };

  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        yield { validHost: req.host, originalRequest: req, messageResponse: answer(req) };
      }
    },
  };
}
