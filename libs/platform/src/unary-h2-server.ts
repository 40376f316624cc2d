/**
 * The server half of createUnaryH2Client: a service's unary methods answered for Connect
 * requests in binary protobuf over HTTP/2 (`POST /<service>/<method>`, `application/proto`, no
 * compression) with the answer written in one piece, where connect-node's adapter streams the
 * request and the answer through several asynchronous steps. Every other request (gRPC, JSON,
 * HTTP/1.1, compressed, other methods) goes to the Connect adapter as before, and the wire is the
 * same Connect protocol either way: the answer, its status and its error body are what the
 * adapter would send. The handler gets a Connect HandlerContext (request headers, deadline from
 * `connect-timeout-ms`, a signal aborted when the caller goes away) behind the same interceptors
 * as an adapter call (the SERVER span and metrics, service identity).
 */
import type http2 from "node:http2";
import { AsyncResource } from "node:async_hooks";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext } from "@connectrpc/connect";
import type { ConnectRouter, HandlerContext, Interceptor, UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes, parseTimeout } from "@connectrpc/connect/protocol-connect";

type AnyFn = Parameters<Interceptor>[0];

type UnaryHandler = (request: MessageShape<DescMessage>, context: HandlerContext) => Promise<MessageInitShape<DescMessage>> | MessageInitShape<DescMessage>;

export interface UnaryFastPath {
  service: DescService;
  /** The service's implementation, as given to `router.service` (its unary methods are served here). */
  implementation: object;
}

/** The message body a call or an answer reads at most (as connect-node's default read limit). */
export const READ_MAX_BYTES = 0xffffffff;

/** The longest `connect-timeout-ms` honoured (as connect-node: ten digits). */
const MAX_TIMEOUT_MS = 9_999_999_999;

/** The reason a handler's signal carries once its call is over (answered or failed). */
const CALL_OVER = new ConnectError("the call is over", Code.Canceled);

/** The fields of HTTP/2 headers (pseudo-headers left out) as a Headers object. */
export function headersOf(h: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : String(v));
  return out;
}

/** What `startServiceServer` takes to serve `service` with `implementation`, on its routes and on the unary fast path. */
export function servedWithFastPath(service: DescService, implementation: object): { routes: (router: ConnectRouter) => void; unaryFastPath: UnaryFastPath } {
  return { routes: (router) => router.service(service, implementation), unaryFastPath: { service, implementation } };
}

/** Returns a function that serves a request it recognises (true) or leaves it to the Connect adapter (false). */
export function createUnaryFastPath(
  fast: UnaryFastPath,
  interceptors: readonly Interceptor[],
): (req: http2.Http2ServerRequest | { httpVersionMajor: number }, res: unknown) => boolean {
  const methods = new Map<string, { method: DescMethodUnary; handle: UnaryHandler }>();
  const impl = fast.implementation as Record<string, unknown>;
  for (const method of fast.service.methods) {
    const handle = impl[method.localName];
    if (method.methodKind === "unary" && typeof handle === "function") {
      methods.set(`/${fast.service.typeName}/${method.name}`, {
        method: method as DescMethodUnary,
        handle: (handle as UnaryHandler).bind(fast.implementation),
      });
    }
  }
  return (anyReq, anyRes) => {
    if (anyReq.httpVersionMajor !== 2) return false;
    const req = anyReq as http2.Http2ServerRequest;
    const res = anyRes as http2.Http2ServerResponse;
    const target = req.method === "POST" ? methods.get(req.url) : undefined;
    const encoding = req.headers["content-encoding"];
    if (!target || req.headers["content-type"] !== "application/proto" || (encoding !== undefined && encoding !== "identity")) return false;
    const chunks: Buffer[] = [];
    let size = 0;
    // Run in the request's async context (answer hooks, traces) like the adapter's handlers:
    // one resource per request entered by each listener (AsyncResource.bind would build two
    // deprecation wrappers per listener on every call).
    const scope = new AsyncResource("webcodex.UnaryFastPath");
    req.on("data", (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size <= READ_MAX_BYTES) chunks.push(chunk);
    });
    req.on("end", () =>
      scope.runInAsyncScope(() => void serve(req, res, target.method, target.handle, size > READ_MAX_BYTES ? undefined : Buffer.concat(chunks))),
    );
    return true;
  };

  async function serve(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, method: DescMethodUnary, handle: UnaryHandler, body: Buffer | undefined) {
    const gone = new AbortController();
    let answered = false;
    // (The compatibility response reports itself finished once its stream closed, even when the
    // caller reset it before any answer: whether this path answered is tracked here.)
    res.once("close", () => {
      if (!answered) gone.abort(new ConnectError("the caller went away", Code.Canceled));
    });
    const requestHeader = headersOf(req.headers);
    const timeout = parseTimeout(requestHeader.get("connect-timeout-ms"), MAX_TIMEOUT_MS);
    const ctx = createHandlerContext({
      service: fast.service,
      method,
      protocolName: "connect",
      requestMethod: "POST",
      url: `http://${req.authority}${req.url}`,
      requestSignal: gone.signal,
      requestHeader,
      ...(timeout.timeoutMs !== undefined ? { timeoutMs: timeout.timeoutMs } : {}),
    });
    try {
      if (timeout.error) throw timeout.error;
      if (body === undefined) throw new ConnectError(`the request is larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted);
      let input: MessageShape<DescMessage>;
      try {
        input = fromBinary(method.input, body);
      } catch (error) {
        throw ConnectError.from(error, Code.InvalidArgument);
      }
      const request: UnaryRequest = {
        stream: false,
        service: fast.service,
        method,
        requestMethod: "POST",
        url: ctx.url,
        signal: ctx.signal,
        header: requestHeader,
        contextValues: ctx.values,
        message: input,
      };
      const run: AnyFn = async (req) => {
        try {
          const out = await handle((req as UnaryRequest).message, ctx);
          return {
            stream: false,
            service: fast.service,
            method,
            header: ctx.responseHeader,
            trailer: ctx.responseTrailer,
            message: create(method.output, out),
          };
        } catch (error) {
          // As the adapter: a deadline or a caller gone is reported as such; any other error
          // that is not a ConnectError is an internal error (its detail stays in the process).
          if (ctx.signal.aborted && ctx.signal.reason instanceof ConnectError) throw ctx.signal.reason;
          throw error instanceof ConnectError ? error : new ConnectError("internal error", Code.Internal, undefined, undefined, error);
        }
      };
      const answer = (await interceptors.reduceRight<AnyFn>((next, interceptor) => interceptor(next), run)(request)) as UnaryResponse;
      const bytes = toBinary(method.output, answer.message);
      const headers: Record<string, string | number> = {};
      answer.header.forEach((v, k) => (headers[k] = v));
      answer.trailer.forEach((v, k) => (headers[`trailer-${k}`] = v));
      if (res.writableEnded) return;
      answered = true;
      res.writeHead(200, { ...headers, "content-type": "application/proto", "content-length": bytes.byteLength });
      res.end(bytes);
    } catch (error) {
      const ce = error instanceof ConnectError ? error : new ConnectError("internal error", Code.Internal, undefined, undefined, error);
      if (res.headersSent || res.writableEnded) return;
      answered = true;
      const headers: Record<string, string> = {};
      ce.metadata.forEach((v, k) => (headers[k] = v));
      const bytes = errorToJsonBytes(ce, {});
      res.writeHead(codeToHttpStatus(ce.code), { ...headers, "content-type": "application/json", "content-length": String(bytes.byteLength) });
      res.end(bytes);
    } finally {
      // As the adapter, the handler's signal is aborted once the call is over (so what the
      // handler tied to it stops); with a reason made once, where a bare abort() builds an
      // AbortError with its stack trace on every call.
      ctx.abort(CALL_OVER);
    }
  }
}
