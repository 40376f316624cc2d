/**
 * A Connect client that calls a ServiceImpl in the same process without serializing:
 * request and response are real protobuf messages (built with `create`), the handler gets a
 * HandlerContext with the caller's headers, signal and deadline, and errors surface as
 * ConnectError — the contract a network client gives, at in-memory cost. Connect's own
 * router transport serializes every message and costs ~0.5 ms per hop on these machines,
 * which the embedded hot path cannot afford (docs/decisions/0002-embedded-transport.md).
 * Unary methods only: every WebCodex service API is unary.
 */
import { create } from "@bufbuild/protobuf";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import type { CallOptions, Client, ContextValues, HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
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
      const ctx = inProcessContext(service, method, options);
      const invoke = async () => create(method.output, (await handler.call(impl, create(method.input, init as never), ctx)) as never);
      try {
        return traceAs === undefined ? await invoke() : await runServerSpan(service.typeName, method.name, ctx.requestHeader, invoke, { service: traceAs });
      } catch (error) {
        throw ConnectError.from(error);
      } finally {
        ctx.finish();
      }
    };
  }
  return client as unknown as Client<S>;
}

/**
 * The HandlerContext of one in-process call: what Connect's createHandlerContext gives (the
 * caller's headers, a signal that aborts on the caller's abort, at the deadline and when the
 * call finishes), built lazily. Connect's copies the request headers and makes three Headers,
 * two AbortControllers and a deadline timer for every call, used or not; here the caller's
 * Headers object is handed over as it is, and the signal and its deadline timer exist only
 * once a handler reads `signal`.
 */
function inProcessContext(service: DescService, method: DescMethod, options: CallOptions): HandlerContext & { finish(): void } {
  const requestHeader = options.headers instanceof Headers ? options.headers : new Headers(options.headers);
  const deadlineAt = options.timeoutMs !== undefined ? Date.now() + options.timeoutMs : undefined;
  const parent = options.signal;
  let controller: AbortController | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let responseHeader: Headers | undefined;
  let responseTrailer: Headers | undefined;
  let values: ContextValues | undefined = options.contextValues;
  const onParentAbort = () => controller?.abort(parent?.reason);
  const signal = (): AbortSignal => {
    if (controller) return controller.signal;
    const c = (controller = new AbortController());
    if (parent?.aborted) c.abort(parent.reason);
    else parent?.addEventListener("abort", onParentAbort, { once: true });
    if (deadlineAt !== undefined && !c.signal.aborted) {
      const timedOut = () => c.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
      const remaining = deadlineAt - Date.now();
      if (remaining <= 0) timedOut();
      else timer = setTimeout(timedOut, remaining);
    }
    return c.signal;
  };
  return {
    service,
    method,
    protocolName: "in-process",
    requestMethod: "POST",
    url: `in-process:///${service.typeName}/${method.name}`,
    requestHeader,
    timeoutMs: () => (deadlineAt === undefined ? undefined : deadlineAt - Date.now()),
    get signal() {
      return signal();
    },
    get responseHeader() {
      return (responseHeader ??= new Headers());
    },
    get responseTrailer() {
      return (responseTrailer ??= new Headers());
    },
    get values() {
      return (values ??= createContextValues());
    },
    finish() {
      if (timer !== undefined) clearTimeout(timer);
      if (!controller) return;
      parent?.removeEventListener("abort", onParentAbort);
      controller.abort(CALL_FINISHED);
    },
  };
}
