/**
 * A Connect client that calls a ServiceImpl in the same process without serializing:
 * request and response are real protobuf messages (built with `create`), the handler gets a
 * real HandlerContext with the caller's headers, signal and deadline, and errors surface as
 * ConnectError — the contract a network client gives, at in-memory cost. Connect's own
 * router transport serializes every message and costs ~0.5 ms per hop on these machines,
 * which the embedded hot path cannot afford (docs/decisions/0002-embedded-transport.md).
 * Unary methods only: every WebCodex service API is unary.
 */
import { create } from "@bufbuild/protobuf";
import type { DescService } from "@bufbuild/protobuf";
import { ConnectError, createHandlerContext } from "@connectrpc/connect";
import type { CallOptions, Client, ServiceImpl } from "@connectrpc/connect";

export function createInProcessClient<S extends DescService>(service: S, impl: ServiceImpl<S>): Client<S> {
  const client: Record<string, (init: unknown, options?: CallOptions) => Promise<unknown>> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") throw new Error(`${service.typeName}.${method.name}: only unary methods run in-process`);
    const handler = (impl as unknown as Record<string, (req: unknown, ctx: unknown) => unknown>)[method.localName];
    if (!handler) throw new Error(`${service.typeName}.${method.name} is not implemented`);
    client[method.localName] = async (init, options = {}) => {
      const ctx = createHandlerContext({
        service,
        method,
        protocolName: "in-process",
        requestMethod: "POST",
        url: `in-process:///${service.typeName}/${method.name}`,
        ...(options.headers !== undefined ? { requestHeader: options.headers } : {}),
        ...(options.signal !== undefined ? { requestSignal: options.signal } : {}),
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
        ...(options.contextValues !== undefined ? { contextValues: options.contextValues } : {}),
      });
      try {
        const res = await handler.call(impl, create(method.input, init as never), ctx);
        return create(method.output, res as never);
      } catch (error) {
        throw ConnectError.from(error);
      } finally {
        ctx.abort();
      }
    };
  }
  return client as unknown as Client<S>;
}
