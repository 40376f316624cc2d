/**
 * A Connect client for the unary methods of a service, speaking the Connect protocol (binary
 * protobuf, `application/proto`) over one HTTP/2 session per base URL, for the hops where a
 * call's latency is the product: the gateway's calls to a Runner on a direct route. It sends a
 * request's headers and body in one write and reads the answer in one piece, where the generic
 * transport (`createServiceTransport`) streams both through several asynchronous steps; on
 * loopback that took a warm call from about 1 ms to 2–4 ms when the processes had been idle
 * between calls (each separate write can wake the other process once more). Same wire format,
 * same answers, same errors as the generic transport: a server needs nothing different.
 *
 * Errors are ConnectErrors as the generic transport's: the server's Connect error (its code and
 * message), `deadline_exceeded` after `timeoutMs`, `canceled` on abort, and `unavailable` for a
 * connection that could not be made (its cause the socket error, so provenNotSent recognises a
 * request never sent) or a stream that broke after it was sent.
 */
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import type { CallOptions, Client, Interceptor, UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { serviceClientInterceptors } from "./service-transport.js";
import { headersOf, READ_MAX_BYTES } from "./unary-h2-server.js";
import type { ServiceTransportOptions } from "./service-transport.js";

/** As the generic transport's: latencies recorded in `metrics`, calls signed as `identity`. */
export type UnaryH2ClientOptions = ServiceTransportOptions;

type AnyFn = Parameters<Interceptor>[0];

export function createUnaryH2Client<T extends DescService>(service: T, baseUrl: string, options: UnaryH2ClientOptions = {}): Client<T> {
  const interceptors = serviceClientInterceptors(options);
  const authority = new URL(baseUrl);
  const prefix = authority.pathname.replace(/\/$/, "");
  let session: http2.ClientHttp2Session | undefined;
  /** Why the current session failed to connect or broke (the cause given to its streams' errors). */
  let sessionError: Error | undefined;

  const open = (): http2.ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const s = http2.connect(authority.origin);
    sessionError = undefined;
    s.on("error", (error: Error) => {
      if (session === s) sessionError = error;
    });
    const drop = () => {
      if (session === s) session = undefined;
    };
    s.on("close", drop);
    s.on("goaway", drop);
    // The session never keeps the process alive by itself (a service's own server does).
    s.unref();
    session = s;
    return s;
  };

  async function unary(method: DescMethodUnary, input: MessageInitShape<DescMessage>, call: CallOptions = {}): Promise<MessageShape<DescMessage>> {
    const request: UnaryRequest = {
      stream: false,
      service,
      method,
      requestMethod: "POST",
      url: `${authority.origin}${prefix}/${service.typeName}/${method.name}`,
      signal: call.signal ?? new AbortController().signal,
      header: new Headers(call.headers),
      contextValues: call.contextValues ?? createContextValues(),
      message: create(method.input, input),
    };
    const sent: AnyFn = async (req) => {
      const r = req as UnaryRequest;
      const answer = await send(method, r.message, call, r.header);
      return { stream: false, service, method, header: answer.header, trailer: answer.trailer, message: answer.message };
    };
    const res = (await interceptors.reduceRight<AnyFn>((next, interceptor) => interceptor(next), sent)(request)) as UnaryResponse;
    return res.message;
  }

  function send(
    method: DescMethodUnary,
    message: MessageShape<DescMessage>,
    call: CallOptions,
    header: Headers,
  ): Promise<{ message: MessageShape<DescMessage>; header: Headers; trailer: Headers }> {
    if (call.signal?.aborted) return Promise.reject(new ConnectError("the call was aborted", Code.Canceled));
    const body = toBinary(method.input, message);
    const requestHeaders: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": `${prefix}/${service.typeName}/${method.name}`,
      "content-type": "application/proto",
      "connect-protocol-version": "1",
      "content-length": body.byteLength,
    };
    if (call.timeoutMs !== undefined && call.timeoutMs > 0) requestHeaders["connect-timeout-ms"] = String(call.timeoutMs);
    header.forEach((value, key) => {
      requestHeaders[key] = value;
    });
    return new Promise((resolve, reject) => {
      const s = open();
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => fail(new ConnectError("the call was aborted", Code.Canceled), true);
      const finish = () => {
        settled = true;
        if (timer) clearTimeout(timer);
        call.signal?.removeEventListener("abort", onAbort);
      };
      const fail = (error: ConnectError, cancel = false) => {
        if (settled) return;
        finish();
        if (cancel && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(error);
      };
      const stream = s.request(requestHeaders);
      call.signal?.addEventListener("abort", onAbort, { once: true });
      if (call.timeoutMs !== undefined && call.timeoutMs > 0) {
        timer = setTimeout(() => fail(new ConnectError(`the call took longer than ${call.timeoutMs} ms`, Code.DeadlineExceeded), true), call.timeoutMs);
      }
      let status = 0;
      let contentType = "";
      let responseHeaders: Headers | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        contentType = String(h["content-type"] ?? "");
        responseHeaders = headersOf(h);
      });
      stream.on("data", (chunk: Buffer) => {
        size += chunk.byteLength;
        if (size > READ_MAX_BYTES) fail(new ConnectError(`the answer is larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted), true);
        else chunks.push(chunk);
      });
      const broken = () => {
        const cause = sessionError ?? new Error(`the stream closed before an answer (code ${stream.rstCode ?? "none"})`);
        fail(new ConnectError(cause.message, Code.Unavailable, undefined, undefined, cause));
      };
      stream.on("end", () => {
        if (settled) return;
        if (status === 0) return broken();
        const bytes = Buffer.concat(chunks);
        if (status === 200 && contentType.startsWith("application/proto")) {
          let answer: MessageShape<DescMessage>;
          try {
            answer = fromBinary(method.output, bytes);
          } catch (error) {
            fail(new ConnectError("the answer is not a valid message", Code.Internal, undefined, undefined, error));
            return;
          }
          finish();
          const trailer = new Headers();
          const header = new Headers();
          responseHeaders?.forEach((v, k) => (k.startsWith("trailer-") ? trailer.set(k.slice(8), v) : header.set(k, v)));
          resolve({ message: answer, header, trailer });
          return;
        }
        const fallback = new ConnectError(`HTTP ${status}`, status === 200 ? Code.Internal : codeFromHttpStatus(status), responseHeaders);
        fail(contentType.startsWith("application/json") ? errorFromJsonBytes(bytes, responseHeaders, fallback) : fallback);
      });
      stream.on("error", (error: Error) => fail(new ConnectError(error.message, Code.Unavailable, undefined, undefined, sessionError ?? error)));
      stream.on("close", () => {
        if (!settled) broken();
      });
      stream.end(body);
    });
  }

  const client: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind === "unary") {
      const m = method as DescMethodUnary;
      client[method.localName] = (input: MessageInitShape<DescMessage>, call?: CallOptions) => unary(m, input, call);
    } else {
      client[method.localName] = () => {
        throw new ConnectError(`${service.typeName}/${method.name} is not unary; use createServiceTransport`, Code.Unimplemented);
      };
    }
  }
  return client as Client<T>;
}
