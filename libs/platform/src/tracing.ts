/**
 * Traces across services: one trace per tool call. Connect interceptors carry W3C trace
 * context (`traceparent`, `tracestate`) between services — the client interceptor starts a
 * CLIENT span and injects its context into the request headers; the server interceptor
 * extracts it, starts a SERVER span and runs the handler inside it, so every call the
 * handler makes continues the same trace. In-process calls (embedded mode) use
 * `runServerSpan` around the handler. Without the SDK (startTelemetry off) all of this is
 * the OpenTelemetry API's no-op; any telemetry error is swallowed, never thrown.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Attributes, Context, Span, TextMapGetter, TextMapSetter } from "@opentelemetry/api";
import { ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import type { Metrics } from "./metrics.js";
import { connectCodeName } from "./connect-code.js";

const TRACER = "webcodex";
const tracer = () => trace.getTracer(TRACER);

const setter: TextMapSetter<Headers> = { set: (carrier, key, value) => carrier.set(key, value) };
const getter: TextMapGetter<Headers> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  keys: (carrier) => [...carrier.keys()],
};

/** Semantic-convention attributes of one RPC. */
function rpcAttributes(service: string, method: string, extra?: Attributes): Attributes {
  return { "rpc.system": "connect_rpc", "rpc.service": service, "rpc.method": method, ...extra };
}

function safe<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

function endSpan(span: Span | undefined, error?: unknown): void {
  if (!span) return;
  safe(() => {
    if (error !== undefined) {
      const ce = ConnectError.from(error);
      // The code only: error messages may carry detail that must not leave the process.
      span.setAttribute("rpc.connect_rpc.error_code", ce.code);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  });
}

export interface TracingOptions {
  /** Logical service name (e.g. "audit") set as `webcodex.service` on server spans. */
  service?: string;
  /** When given, RPC counts and latencies are recorded here too. */
  metrics?: Metrics;
}

/** Client side: a CLIENT span per call, its context injected as `traceparent`. */
export function createTracingClientInterceptor(options: TracingOptions = {}): Interceptor {
  const seconds = options.metrics?.histogram("webcodex_rpc_client_seconds", "Outgoing RPC latency by service, method and code");
  return (next) => async (req) => {
    const started = performance.now();
    const span = safe(() =>
      tracer().startSpan(`${req.service.typeName}/${req.method.name}`, {
        kind: SpanKind.CLIENT,
        attributes: rpcAttributes(req.service.typeName, req.method.name),
      }),
    );
    safe(() => propagation.inject(span ? trace.setSpan(context.active(), span) : context.active(), req.header, setter));
    const observe = (code: string) =>
      safe(() => seconds?.observe((performance.now() - started) / 1000, { service: req.service.typeName, method: req.method.name, code }));
    try {
      const res = await next(req);
      endSpan(span);
      observe("ok");
      return res;
    } catch (error) {
      endSpan(span, error);
      observe(connectCodeName(ConnectError.from(error).code));
      throw error;
    }
  };
}

/**
 * The trace context an MCP request carries in `params._meta` (`traceparent`, `tracestate`, as
 * MCP clients send it), or undefined when it carries none or an invalid one.
 */
export function traceContextFromMeta(meta: Record<string, unknown> | undefined): Context | undefined {
  const traceparent = meta?.["traceparent"];
  if (typeof traceparent !== "string") return undefined;
  const headers = new Headers({ traceparent });
  if (typeof meta?.["tracestate"] === "string") headers.set("tracestate", meta["tracestate"]);
  const extracted = extractTraceContext(headers);
  return trace.getSpanContext(extracted) !== undefined ? extracted : undefined;
}

/** The trace context carried by request headers (or the active one when there is none). */
export function extractTraceContext(headers: Headers | undefined): Context {
  if (!headers) return context.active();
  return safe(() => (headers.has("traceparent") ? propagation.extract(context.active(), headers, getter) : context.active())) ?? context.active();
}

/**
 * Runs `fn` in a SERVER span for `service/method`, child of the context in `headers` (or of
 * the active span). The span is active while `fn` runs, so outgoing calls join the trace.
 */
export async function runServerSpan<T>(
  service: string,
  method: string,
  headers: Headers | undefined,
  fn: () => Promise<T>,
  options: TracingOptions = {},
): Promise<T> {
  const parent = extractTraceContext(headers);
  const span = safe(() =>
    tracer().startSpan(
      `${service}/${method}`,
      { kind: SpanKind.SERVER, attributes: rpcAttributes(service, method, options.service ? { "webcodex.service": options.service } : undefined) },
      parent,
    ),
  );
  const active = span ? (safe(() => trace.setSpan(parent, span)) ?? parent) : parent;
  try {
    const result = await context.with(active, fn);
    endSpan(span);
    return result;
  } catch (error) {
    endSpan(span, error);
    throw error;
  }
}

/** Server side: extracts `traceparent` and runs the handler in a SERVER span. */
export function createTracingServerInterceptor(options: TracingOptions = {}): Interceptor {
  const requests = options.metrics?.counter("webcodex_rpc_server_requests_total", "Incoming RPCs by service, method and code");
  const seconds = options.metrics?.histogram("webcodex_rpc_server_seconds", "Incoming RPC latency by service, method");
  return (next) => async (req) => {
    const started = performance.now();
    const labels = { service: req.service.typeName, method: req.method.name };
    let code = "ok";
    try {
      return await runServerSpan(req.service.typeName, req.method.name, req.header, () => next(req), options);
    } catch (error) {
      code = connectCodeName(ConnectError.from(error).code);
      throw error;
    } finally {
      safe(() => {
        requests?.inc({ ...labels, code });
        seconds?.observe((performance.now() - started) / 1000, labels);
      });
    }
  };
}

/**
 * Runs `fn` in an INTERNAL span (a root span when nothing is active): the gateway wraps
 * each tools/call in one, so the whole call is one trace. Only codes and identifiers
 * belong in `attributes`, never arguments.
 */
export async function withSpan<T>(name: string, attributes: Attributes, fn: (span: Span | undefined) => Promise<T>, parent?: Context): Promise<T> {
  const base = parent ?? context.active();
  const span = safe(() => tracer().startSpan(name, { kind: SpanKind.INTERNAL, attributes }, base));
  const active = span ? (safe(() => trace.setSpan(base, span)) ?? base) : base;
  try {
    const result = await context.with(active, () => fn(span));
    safe(() => span?.end());
    return result;
  } catch (error) {
    safe(() => {
      span?.setStatus({ code: SpanStatusCode.ERROR });
      span?.end();
    });
    throw error;
  }
}

/** The active span's context, e.g. to link a batched delivery back to the calls in it. */
export function activeSpanContext(): { traceId: string; spanId: string; traceFlags: number } | undefined {
  return safe(() => {
    const sc = trace.getActiveSpan()?.spanContext();
    return sc && trace.isSpanContextValid(sc) ? { traceId: sc.traceId, spanId: sc.spanId, traceFlags: sc.traceFlags } : undefined;
  });
}

/** Runs `fn` in a span linked to (not parented by) the given span contexts. */
export async function withLinkedSpan<T>(
  name: string,
  links: ReadonlyArray<{ traceId: string; spanId: string; traceFlags: number }>,
  fn: () => Promise<T>,
): Promise<T> {
  const span = safe(() => tracer().startSpan(name, { kind: SpanKind.INTERNAL, root: true, links: links.slice(0, 128).map((l) => ({ context: l })) }));
  const active = span ? (safe(() => trace.setSpan(context.active(), span)) ?? context.active()) : context.active();
  try {
    const result = await context.with(active, fn);
    safe(() => span?.end());
    return result;
  } catch (error) {
    safe(() => {
      span?.setStatus({ code: SpanStatusCode.ERROR });
      span?.end();
    });
    throw error;
  }
}
