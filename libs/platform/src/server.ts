/**
 * One listening port per service that speaks both HTTP/2 cleartext (prior knowledge, what
 * Connect clients use between services) and HTTP/1.1 (MCP Hosts, Kubernetes probes,
 * Prometheus). The first bytes of each connection choose the protocol.
 */
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { createConnectRouter } from "@connectrpc/connect";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health, ServerReflection } from "@webcodex/proto";
import { createHealthService } from "./grpc-health.js";
import { createReflectionService } from "./grpc-reflection.js";
import { serveWithAnswerHooks } from "./answer-hooks.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { createTracingServerInterceptor } from "./tracing.js";
import { createUnaryFastPath } from "./unary-h2-server.js";
import type { UnaryFastPath } from "./unary-h2-server.js";

export type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
export type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;
export type HttpHandler = (req: NodeRequest, res: NodeResponse) => void | Promise<void>;

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string }>;
}

export interface ServiceServerOptions {
  name: string;
  port: number;
  host?: string;
  routes?: (router: ConnectRouter) => void;
  /** Connect server interceptors run after tracing (service identity, caller policy). */
  interceptors?: Interceptor[];
  /** Extra HTTP routes by exact path (e.g. `/mcp`), tried before Connect. */
  httpRoutes?: Record<string, HttpHandler>;
  readiness?: () => Promise<ReadinessReport>;
  metrics?: Metrics;
  logger: Logger;
  /** Connect handlers may leave work for after their answer is sent or lost (`afterAnswer`). */
  answerHooks?: boolean;
  /**
   * A service registered in `routes` whose unary methods are answered directly for binary
   * Connect requests over HTTP/2, behind the same interceptors (see unary-h2-server.ts).
   */
  unaryFastPath?: UnaryFastPath;
  /** How often grpc.health.v1.Health/Watch re-checks readiness (default 1 s). */
  healthWatchIntervalMs?: number;
  /**
   * Serve grpc.reflection.v1.ServerReflection (for grpcurl and other reflection clients);
   * off by default (WEBCODEX_GRPC_REFLECTION). Without it the reflection procedure is
   * UNIMPLEMENTED like any other unknown one.
   */
  grpcReflection?: boolean;
  /**
   * What /readyz (and grpc.health.v1) follows: `dependencies` (default) runs `readiness`;
   * `process` answers from this process alone (serving, not shutting down), so a shared
   * store's blip cannot take every replica out of its Service at once. The dependency report
   * is then served at /dependencies (WEBCODEX_READINESS).
   */
  readinessScope?: "process" | "dependencies";
  /**
   * A second, plain HTTP/1.1 port for diagnostics: /metrics and /dependencies move there (the
   * service port no longer answers them), so whatever exposes the service port (an Ingress)
   * does not expose them (WEBCODEX_METRICS_PORT). 0 picks a free port.
   */
  metricsPort?: number;
  /** How long close() lets requests in flight finish before their connections are cut (default 2 s; WEBCODEX_SHUTDOWN_DRAIN_MS). */
  drainMs?: number;
}

export interface ServiceServer {
  readonly port: number;
  readonly url: string;
  /** The diagnostics URL (/metrics, /dependencies) when metricsPort was given. */
  readonly metricsUrl?: string;
  close(): Promise<void>;
}

const h2Preface = Buffer.from("PRI * HTTP/2.0");
const HEALTH_PATH = `/${Health.typeName}/`;
const REFLECTION_PATH = `/${ServerReflection.typeName}/`;

export async function startServiceServer(options: ServiceServerOptions): Promise<ServiceServer> {
  // Every Connect handler runs in a SERVER span continuing the caller's trace (traceparent).
  const tracing = createTracingServerInterceptor({ service: options.name, ...(options.metrics ? { metrics: options.metrics } : {}) });
  const interceptors = [tracing, ...(options.interceptors ?? [])];
  const adapter = options.routes ? connectNodeAdapter({ routes: options.routes, interceptors }) : undefined;
  const fast = options.unaryFastPath ? createUnaryFastPath(options.unaryFastPath, interceptors) : undefined;
  const connect =
    adapter && fast
      ? (req: http.IncomingMessage, res: http.ServerResponse) => {
          if (!fast(req, res)) adapter(req, res);
        }
      : adapter;
  const dependencies = options.readiness ?? (async () => ({ ready: true, checks: {} }));
  let closing = false;
  const processLocal = options.readinessScope === "process";
  const check: () => Promise<ReadinessReport> = processLocal
    ? async () => ({ ready: !closing, checks: { process: closing ? { ok: false, detail: "shutting down" } : { ok: true } } })
    : dependencies;
  const diagnostics = options.metricsPort !== undefined;
  const sendDependencies = (res: NodeResponse) =>
    void dependencies().then(
      (report) => sendJson(res, report.ready ? 200 : 503, report),
      (error: unknown) => sendJson(res, 503, { ready: false, checks: { readiness: { ok: false, detail: String(error) } } }),
    );
  const sendMetrics = (res: NodeResponse) => {
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
    res.end(options.metrics?.render() ?? "");
  };
  // grpc.health.v1.Health: the same readiness as /readyz, for every service hosted here. Served
  // without the service-identity interceptor: probes and load balancers carry no credential,
  // and the answer is a status only.
  const hosted = createConnectRouter();
  options.routes?.(hosted);
  const health = connectNodeAdapter({
    routes: (router) =>
      router.service(
        Health,
        createHealthService({
          services: [...new Set(hosted.handlers.map((h) => h.service.typeName))],
          ready: async () => !closing && (await check()).ready,
          ...(options.healthWatchIntervalMs !== undefined ? { watchIntervalMs: options.healthWatchIntervalMs } : {}),
        }),
      ),
  });
  // grpc.reflection.v1: the descriptors of the services hosted here and of Health, without a
  // credential like Health (a reflection client carries none); on only when asked for.
  const reflection = options.grpcReflection
    ? connectNodeAdapter({
        routes: (router) =>
          router.service(
            ServerReflection,
            createReflectionService([...new Map([...hosted.handlers.map((h) => h.service), Health].map((s) => [s.typeName, s])).values()]),
          ),
      })
    : undefined;
  const handle = (req: NodeRequest, res: NodeResponse) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/healthz") return sendJson(res, 200, { status: "ok", service: options.name });
    if (path.startsWith(HEALTH_PATH)) return health(req as http.IncomingMessage, res as http.ServerResponse);
    if (reflection && path.startsWith(REFLECTION_PATH)) return reflection(req as http.IncomingMessage, res as http.ServerResponse);
    if (path === "/readyz") {
      return void check().then(
        (report) => sendJson(res, report.ready ? 200 : 503, report),
        (error: unknown) => sendJson(res, 503, { ready: false, checks: { readiness: { ok: false, detail: String(error) } } }),
      );
    }
    if (path === "/metrics" && options.metrics && !diagnostics) return sendMetrics(res);
    if (path === "/dependencies" && processLocal && !diagnostics) return sendDependencies(res);
    const route = options.httpRoutes?.[path];
    if (route) {
      return void Promise.resolve(route(req, res)).catch((error: unknown) => {
        options.logger.error("http handler failed", { path, error });
        if (!res.headersSent) sendJson(res, 500, { error: "internal_error" });
        else res.end();
      });
    }
    if (connect && options.answerHooks) return serveWithAnswerHooks(res, () => void connect(req as http.IncomingMessage, res as http.ServerResponse));
    if (connect) return connect(req as http.IncomingMessage, res as http.ServerResponse);
    sendJson(res, 404, { error: "not_found" });
  };

  // Shutdown (close): new connections are refused (the listener is closed), a new request on
  // an open HTTP/1.1 connection gets 503 and the connection closes, HTTP/2 sessions get GOAWAY,
  // and requests in flight finish, their connections closed after the response.
  // (http.Server tracks idle connections only for servers that listen themselves, so
  // closeIdleConnections() does nothing here: responses in progress are counted per socket.)
  const inflight = new Set<http.ServerResponse>();
  const h1Busy = new Map<net.Socket, number>();
  const h1 = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    if (closing) {
      res.setHeader("connection", "close");
      return sendJson(res, 503, { error: "shutting_down" });
    }
    const socket = req.socket;
    h1Busy.set(socket, (h1Busy.get(socket) ?? 0) + 1);
    inflight.add(res);
    res.once("close", () => {
      inflight.delete(res);
      // A response closed by its socket closing runs after the socket's own close handler:
      // the socket is gone from the map and must not be put back.
      if (socket.destroyed || !h1Busy.has(socket)) return;
      const busy = (h1Busy.get(socket) ?? 1) - 1;
      h1Busy.set(socket, busy);
      if (closing && busy === 0) socket.end();
    });
    return handle(req, res);
  });
  const h2 = http2.createServer({}, handle);
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  const tcp = net.createServer({ noDelay: true, keepAlive: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.once("data", (chunk: Buffer) => {
      socket.pause();
      socket.unshift(chunk);
      const isH2 = chunk.length >= h2Preface.length ? chunk.subarray(0, h2Preface.length).equals(h2Preface) : h2Preface.subarray(0, chunk.length).equals(chunk);
      if (isH2) {
        // The HTTP/2 session takes over the socket and drains the unshifted preface itself.
        h2.emit("connection", socket);
      } else {
        h1Busy.set(socket, 0);
        socket.once("close", () => h1Busy.delete(socket));
        h1.emit("connection", socket);
        socket.resume();
      }
    });
  });
  tcp.on("error", (error) => options.logger.error("server error", { error }));
  await new Promise<void>((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen(options.port, options.host ?? "127.0.0.1", () => {
      tcp.off("error", reject);
      resolve();
    });
  });
  const address = tcp.address() as net.AddressInfo;
  const host = options.host && options.host !== "0.0.0.0" && options.host !== "::" ? options.host : "127.0.0.1";
  const hostUrl = (port: number) => `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  // The diagnostics port: metrics and the dependency report, plain HTTP/1.1, nothing else.
  const diag = diagnostics
    ? http.createServer((req, res) => {
        const path = (req.url ?? "/").split("?")[0] ?? "/";
        if (path === "/metrics") return sendMetrics(res);
        if (path === "/dependencies") return sendDependencies(res);
        if (path === "/healthz") return sendJson(res, 200, { status: "ok", service: options.name });
        sendJson(res, 404, { error: "not_found" });
      })
    : undefined;
  if (diag) {
    await new Promise<void>((resolve, reject) => {
      diag.once("error", reject);
      diag.listen(options.metricsPort, options.host ?? "127.0.0.1", () => {
        diag.off("error", reject);
        resolve();
      });
    });
  }
  return {
    port: address.port,
    url: hostUrl(address.port),
    ...(diag ? { metricsUrl: hostUrl((diag.address() as net.AddressInfo).port) } : {}),
    async close() {
      closing = true;
      if (diag) {
        diag.close();
        diag.closeAllConnections();
      }
      const closed = new Promise<void>((resolve) => tcp.close(() => resolve()));
      for (const s of sessions) s.close();
      for (const res of inflight) if (!res.headersSent) res.setHeader("connection", "close");
      // A standing event stream (a GET that accepts text/event-stream, e.g. an MCP Host's GET
      // /mcp) carries no call (calls are POSTs): it ends now, and its client reconnects
      // elsewhere, instead of holding the drain to its end.
      for (const res of inflight) if (res.req.method === "GET" && /text\/event-stream/.test(res.req.headers.accept ?? "")) res.end();
      for (const [socket, busy] of h1Busy) if (busy === 0) socket.destroy();
      const deadline = setTimeout(() => {
        for (const s of sockets) s.destroy();
      }, options.drainMs ?? 2_000);
      deadline.unref();
      await closed;
      clearTimeout(deadline);
    },
  };
}

export function sendJson(res: NodeResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  (res as http.ServerResponse).writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/**
 * Runs `stop` once on SIGINT/SIGTERM so in-flight work drains; a second signal exits at once.
 */
export function onShutdown(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info("shutting down", { signal });
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error("shutdown failed", { error });
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
}

/** A readiness function from named dependency probes; each probe throws when not ready. */
export function readinessFrom(probes: Record<string, () => Promise<void>>): () => Promise<ReadinessReport> {
  return async () => {
    const entries = await Promise.all(
      Object.entries(probes).map(async ([name, probe]) => {
        try {
          await probe();
          return [name, { ok: true }] as const;
        } catch (error) {
          return [name, { ok: false, detail: error instanceof Error ? error.message : String(error) }] as const;
        }
      }),
    );
    const checks = Object.fromEntries(entries);
    return { ready: entries.every(([, c]) => c.ok), checks };
  };
}

/** The server settings every service reads alike (WEBCODEX_READINESS, WEBCODEX_METRICS_PORT, WEBCODEX_SHUTDOWN_DRAIN_MS). */
export function serverRuntimeOptions(config: {
  readiness: string;
  metricsPort?: number | undefined;
  shutdownDrainMs: number;
}): Pick<ServiceServerOptions, "readinessScope" | "metricsPort" | "drainMs"> {
  return {
    readinessScope: config.readiness === "process" ? "process" : "dependencies",
    ...(config.metricsPort !== undefined ? { metricsPort: config.metricsPort } : {}),
    drainMs: config.shutdownDrainMs,
  };
}
