/**
 * The one way services call each other: Connect over HTTP/2 with binary protobuf, W3C trace
 * context carried by the tracing interceptor, and no compression. Hops are loopback or
 * in-cluster, where gzip costs more CPU on both ends than it saves on the wire (a read_files
 * answer was compressed and inflated once per hop).
 */
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Interceptor, Transport } from "@connectrpc/connect";
import type { Metrics } from "./metrics.js";
import type { ServiceIdentity } from "./service-identity.js";
import { createTracingClientInterceptor } from "./tracing.js";

export interface ServiceTransportOptions {
  /** When given, outgoing RPC latencies are recorded here. */
  metrics?: Metrics;
  /** When given, every call is signed as this service (see service-identity.ts). */
  identity?: ServiceIdentity | undefined;
}

/** What every call between services goes through: its CLIENT span and latency, and its signature when `identity` is given. */
export function serviceClientInterceptors(options: ServiceTransportOptions = {}): Interceptor[] {
  return [
    createTracingClientInterceptor(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.identity ? [options.identity.clientInterceptor] : []),
  ];
}

export function createServiceTransport(baseUrl: string, options: ServiceTransportOptions = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    acceptCompression: [],
    interceptors: serviceClientInterceptors(options),
  });
}

/** Node error codes that prove a TCP connection was never established, so no request byte was written. */
const NEVER_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

/**
 * Whether an RPC error proves the request was never sent: the connection to the peer was
 * refused or never established (a failed `connect` or name lookup in the error's cause chain).
 * A Connect code alone proves nothing: `unavailable` also covers a stream reset after the
 * request was written, and `unimplemented` may come from anything on the path.
 */
export function provenNotSent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const { code, syscall } = e as Error & { code?: unknown; syscall?: unknown };
    if (typeof code === "string" && NEVER_CONNECTED.has(code)) return true;
    if (syscall === "connect" || syscall === "getaddrinfo") return true;
  }
  return false;
}
