/**
 * The one way services call each other: Connect over HTTP/2 with binary protobuf, W3C trace
 * context carried by the tracing interceptor, and no compression. Hops are loopback or
 * in-cluster, where gzip costs more CPU on both ends than it saves on the wire (a read_files
 * answer was compressed and inflated once per hop).
 */
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Transport } from "@connectrpc/connect";
import type { Metrics } from "./metrics.js";
import type { ServiceIdentity } from "./service-identity.js";
import { createTracingClientInterceptor } from "./tracing.js";

export interface ServiceTransportOptions {
  /** When given, outgoing RPC latencies are recorded here. */
  metrics?: Metrics;
  /** When given, every call is signed as this service (see service-identity.ts). */
  identity?: ServiceIdentity | undefined;
}

export function createServiceTransport(baseUrl: string, options: ServiceTransportOptions = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    acceptCompression: [],
    interceptors: [
      createTracingClientInterceptor(options.metrics ? { metrics: options.metrics } : {}),
      ...(options.identity ? [options.identity.clientInterceptor] : []),
    ],
  });
}
