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
import { Code, ConnectError, createHandlerContext } from "@connectrpc/connect";
import type { CallOptions, Client, ServiceImpl } from "@connectrpc/connect";
import { runServerSpan } from "./tracing.js";

export interface InProcessClientOptions {
  /**
   * Logical service name (e.g. "audit"). When set, each call runs in a SERVER span, child of
   * the caller's active span, as a network call through the tracing interceptors would.
   */
  traceAs?: string;
}

/**
 * The reason a finished call's signal is aborted with (releasing anything still listening).
 * One shared object: `abort()` without a reason builds a DOMException with a stack trace,
 * which cost ~4% of the embedded server's CPU at 900 calls/s.
 */
const CALL_FINISHED = new ConnectError("call finished", Code.Canceled);

export function createInProcessClient<S extends DescService>(service: S, impl: ServiceImpl<S>, clientOptions: InProcessClientOptions = {}): Client<S> {
  const traceAs = clientOptions.traceAs;
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
      const invoke = async () => create(method.output, (await handler.call(impl, create(method.input, init as never), ctx)) as never);
      try {
        return traceAs === undefined ? await invoke() : await runServerSpan(service.typeName, method.name, ctx.requestHeader, invoke, { service: traceAs });
      } catch (error) {
        throw ConnectError.from(error);
      } finally {
        ctx.abort(CALL_FINISHED);
      }
    };
  }
  return client as unknown as Client<S>;
}
