/**
 * The MCP Streamable HTTP endpoint (stateless): POST carries JSON-RPC; a request is answered
 * with application/json, or with an SSE stream when the client asked for progress. GET and
 * DELETE are not offered (405). Host/Origin checks guard against DNS rebinding.
 *
 * It is also the OAuth resource server's front door: 401 with a Bearer challenge pointing at
 * the RFC 9728 metadata for a missing or invalid token, 403 `insufficient_scope` for a
 * tools/call whose tool needs a scope the token lacks, and the per-tenant rate limit for
 * tools/call and for every request of a batch (a structured `rate_limited` result plus
 * `Retry-After`), and the batch cap (413 past MAX_BATCH_MESSAGES), all before the MCP server
 * sees the message.
 *
 * Sessions: the answer to `initialize` carries an `Mcp-Session-Id`, so clients that expect
 * one get one, but it is advisory. The server keeps no session state, any replica serves
 * any request, and every request is authenticated and authorized on its own.
 */
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import type { ToolFailure } from "@webcodex/contracts";
import type { HttpHandler, NodeRequest, NodeResponse, Logger } from "@webcodex/platform";
import { sendJson } from "@webcodex/platform";
import type { Readable } from "node:stream";
import { createRefusedBodyDrain } from "./refused-body.js";
import type { RefusedBodyDrain } from "./refused-body.js";
import type { Authenticator, Caller } from "../auth.js";
import { AuthUnavailableError, bearerToken } from "../auth.js";
import { bearerChallenge } from "../auth/resource-metadata.js";
import { checkToolScope, requiredScope, stepUpScopes } from "../auth/scopes.js";
import type { RateLimiter } from "../rate-limit.js";
import { rateLimitedFailure, retryAfterSeconds } from "../rate-limit.js";
import type { MultiplexTransport, ExchangeSink } from "./multiplex-transport.js";
import type { AppSessions } from "./app-session.js";

/** A tools/call the HTTP layer refused before dispatch (for audit). */
export interface DeniedToolCall {
  caller: Caller;
  tool: string;
  args: unknown;
  failure: ToolFailure;
}

export interface StreamableHttpOptions {
  transport: MultiplexTransport;
  authenticator: Authenticator;
  /** Host header values accepted (DNS-rebinding protection); ports are ignored. */
  allowedHosts: readonly string[];
  /** Origins accepted when a browser sends one, besides origins on an allowed host. */
  allowedOrigins: readonly string[];
  /** URL of the protected resource metadata, for WWW-Authenticate. */
  resourceMetadataUrl: string;
  /** Scopes named in the 401 challenge: what a token for this resource should carry. */
  challengeScopes?: readonly string[];
  /** Per-tenant limit on tools/call. */
  rateLimiter?: RateLimiter;
  /** Told about each tools/call refused here (insufficient scope, rate limited); the answer waits for it (the refusal's audit record). */
  onDenied?: (denied: DeniedToolCall) => void | Promise<void>;
  maxBodyBytes: number;
  logger: Logger;
  /** Issues Mcp-Session-Ids that remember whether the Host declared MCP Apps. */
  appSessions: AppSessions;
  /** How the rest of a refused body is read (default: 32 MiB/s shared by all refused bodies, each cut after 30 s). */
  refusedBodies?: RefusedBodyDrain;
}

const jsonRpcError = (code: number, message: string, id: unknown = null) => ({ jsonrpc: "2.0", id, error: { code, message } });

/**
 * Messages one JSON-RPC batch may carry. A batch is answered as one HTTP response, so without
 * a cap one request could queue unbounded work and memory ahead of every other tenant's.
 */
export const MAX_BATCH_MESSAGES = 32;

function hostAllowed(hostHeader: string | undefined, allowed: readonly string[]): boolean {
  if (!hostHeader) return false;
  const host = hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : (hostHeader.split(":")[0] ?? "");
  return allowed.includes(host.toLowerCase());
}

/** A browser Origin is accepted when listed, or when it is on one of the allowed hosts. */
function originAllowed(origin: string, options: StreamableHttpOptions): boolean {
  if (options.allowedOrigins.includes(origin)) return true;
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") && options.allowedHosts.includes(url.hostname.toLowerCase());
  } catch {
    return false;
  }
}

/**
 * The body, or why it was refused. Its shape is checked chunk by chunk as it arrives, so an
 * oversized or over-deep request is refused at its first excess, without reading the rest.
 */
function readBody(req: NodeRequest, limit: number): Promise<Buffer | "too_large" | JsonShapeProblem> {
  return new Promise((resolve, reject) => {
    const stream = req as unknown as Readable;
    const chunks: Buffer[] = [];
    const shape = new JsonShapeScanner();
    let size = 0;
    const refuse = (why: "too_large" | JsonShapeProblem) => {
      // The rest is left to the handler's refused-body drain, unbuffered and unscanned.
      stream.removeListener("data", onData);
      stream.removeListener("end", onEnd);
      stream.pause();
      chunks.length = 0;
      resolve(why);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return refuse("too_large");
      const problem = shape.feed(chunk);
      if (problem) return refuse(problem);
      chunks.push(chunk);
    };
    const onEnd = () => resolve(Buffer.concat(chunks));
    stream.once("error", reject);
    // A declared length over the limit is refused before any of the body is read.
    if (Number(req.headers["content-length"] ?? 0) > limit) return refuse("too_large");
    stream.on("data", onData);
    stream.once("end", onEnd);
  });
}

/** Bounds on a request body's shape, checked on its bytes before any object is built. */
export const JSON_LIMITS = {
  /** Messages one JSON-RPC batch may carry. */
  batch: MAX_BATCH_MESSAGES,
  /** Nesting of arrays and objects. */
  depth: 64,
  /** Members and elements across the whole body (a key with its value counts once). */
  values: 100_000,
} as const;

export type JsonLimits = { batch: number; depth: number; values: number };
export type JsonShapeProblem = { kind: keyof JsonLimits; limit: number };

/**
 * Checks a body's shape on its bytes, chunk by chunk, outside strings only: it stops at the first
 * excess, so a 160,000-message batch, a 400,000-key object or a 4M-deep nesting is refused after
 * a few KiB instead of being built by JSON.parse on the event loop. Malformed JSON that breaks
 * no bound is left for JSON.parse to refuse.
 */
export class JsonShapeScanner {
  private started = false;
  private batch = false;
  private depth = 0;
  private values = 0;
  private topCommas = 0;
  private inString = false;
  private escaped = false;
  constructor(private readonly limits: JsonLimits = JSON_LIMITS) {}

  /** The first bound broken so far, or undefined. */
  feed(chunk: Uint8Array): JsonShapeProblem | undefined {
    const { limits } = this;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
        continue;
      }
      if (!this.started) {
        if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
        this.started = true;
        this.batch = c === 0x5b;
      }
      if (c === 0x22) this.inString = true;
      else if (c === 0x5b || c === 0x7b) {
        if (++this.depth > limits.depth) return { kind: "depth", limit: limits.depth };
        if (++this.values > limits.values) return { kind: "values", limit: limits.values };
      } else if (c === 0x5d || c === 0x7d) this.depth--;
      else if (c === 0x2c) {
        if (this.batch && this.depth === 1 && ++this.topCommas >= limits.batch) return { kind: "batch", limit: limits.batch };
        if (++this.values > limits.values) return { kind: "values", limit: limits.values };
      }
    }
    return undefined;
  }
}

/** The first bound a whole `body` breaks, or undefined. */
export function jsonShapeProblem(body: Uint8Array, limits: JsonLimits = JSON_LIMITS): JsonShapeProblem | undefined {
  return new JsonShapeScanner(limits).feed(body);
}

const SHAPE_MESSAGES: Record<keyof JsonLimits, (limit: number) => string> = {
  batch: (n) => `a batch may carry at most ${n} messages`,
  depth: (n) => `request nests deeper than ${n} levels`,
  values: (n) => `request carries more than ${n} members and elements`,
};

type Message = Record<string, unknown>;

const toolCallParams = (m: Message) => (m["params"] ?? {}) as { name?: unknown; arguments?: unknown };

export function createStreamableHttpHandler(options: StreamableHttpOptions): HttpHandler {
  const { transport } = options;
  const challengeScopes = options.challengeScopes ?? [];
  const refusedBodies = options.refusedBodies ?? createRefusedBodyDrain();
  const handle = async (req: NodeRequest, res: NodeResponse) => {
    const headers = req.headers;
    if (!hostAllowed(headers.host ?? (headers[":authority"] as string | undefined), options.allowedHosts))
      return sendJson(res, 403, jsonRpcError(-32000, "host not allowed"));
    const origin = headers.origin;
    if (origin !== undefined && !originAllowed(origin, options)) return sendJson(res, 403, jsonRpcError(-32000, "origin not allowed"));

    const token = bearerToken(headers.authorization);
    let caller: Caller | undefined;
    try {
      caller = await options.authenticator.authenticate(token);
    } catch (error) {
      if (!(error instanceof AuthUnavailableError)) throw error;
      return sendJson(res, 503, jsonRpcError(-32000, "authorization temporarily unavailable; retry"), { "retry-after": "5" });
    }
    if (!caller) {
      const challenge = bearerChallenge({
        resourceMetadataUrl: options.resourceMetadataUrl,
        scope: challengeScopes,
        ...(token !== undefined
          ? { error: "invalid_token" as const, errorDescription: "The access token is invalid, expired, or not for this resource." }
          : {}),
      });
      return sendJson(res, 401, jsonRpcError(-32001, token !== undefined ? "invalid token" : "unauthorized"), { "www-authenticate": challenge });
    }
    if (req.method !== "POST")
      return sendJson(res, 405, jsonRpcError(-32000, "method not allowed: this server is stateless and offers no SSE stream"), { allow: "POST" });

    const version = headers["mcp-protocol-version"];
    if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version))
      return sendJson(res, 400, jsonRpcError(-32000, `unsupported MCP-Protocol-Version ${version}`));
    const accept = String(headers.accept ?? "");
    if (!accept.includes("application/json") || !accept.includes("text/event-stream"))
      return sendJson(res, 406, jsonRpcError(-32000, "Accept must include application/json and text/event-stream"));
    if (!String(headers["content-type"] ?? "").includes("application/json"))
      return sendJson(res, 415, jsonRpcError(-32000, "Content-Type must be application/json"));

    const body = await readBody(req, options.maxBodyBytes);
    // Refused before the whole body is read; the rest is discarded unparsed.
    if (body === "too_large") return sendJson(res, 413, jsonRpcError(-32000, `request body larger than ${options.maxBodyBytes} bytes`));
    if (!Buffer.isBuffer(body)) return sendJson(res, 413, jsonRpcError(-32600, SHAPE_MESSAGES[body.kind](body.limit)));
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString("utf8"));
    } catch {
      return sendJson(res, 400, jsonRpcError(-32700, "parse error"));
    }
    const batch = Array.isArray(parsed);
    if (batch && (parsed as unknown[]).length > MAX_BATCH_MESSAGES) {
      return sendJson(res, 413, jsonRpcError(-32600, `a batch may carry at most ${MAX_BATCH_MESSAGES} messages`));
    }
    const messages = (batch ? parsed : [parsed]) as Message[];
    if (messages.length === 0 || messages.some((m) => typeof m !== "object" || m === null || m["jsonrpc"] !== "2.0"))
      return sendJson(res, 400, jsonRpcError(-32600, "invalid request"));

    const requests = messages.filter((m) => typeof m["method"] === "string" && m["id"] !== undefined && m["id"] !== null);
    const toolCalls = requests.filter((m) => m["method"] === "tools/call");

    // Scope: one tools/call needing a scope the token lacks refuses the whole HTTP request.
    for (const m of toolCalls) {
      const { name, arguments: args } = toolCallParams(m);
      const tool = typeof name === "string" ? name : "";
      const failure = checkToolScope(caller, tool, args);
      if (!failure) continue;
      const required = requiredScope(tool, args);
      const description = `tools/call ${tool} needs the ${required} scope`;
      await options.onDenied?.({ caller, tool, args, failure });
      return sendJson(res, 403, jsonRpcError(-32003, `insufficient_scope: ${description}`, batch ? null : m["id"]), {
        "www-authenticate": bearerChallenge({
          resourceMetadataUrl: options.resourceMetadataUrl,
          error: "insufficient_scope",
          errorDescription: description,
          scope: stepUpScopes(caller.scopes, required),
        }),
      });
    }

    // Rate limit: every tools/call, and every request of a batch, takes from the tenant's
    // bucket. A denied tools/call is answered here as a structured tool failure, any other
    // denied request as a JSON-RPC error carrying the same failure.
    const local = new Map<Message, JSONRPCMessage>();
    let retryAfterMs = 0;
    if (options.rateLimiter) {
      for (const m of batch ? requests : toolCalls) {
        const decision = options.rateLimiter.take(caller.principal);
        if (decision.ok) continue;
        const failure = rateLimitedFailure(decision);
        retryAfterMs = Math.max(retryAfterMs, decision.retryAfterMs);
        if (m["method"] !== "tools/call") {
          local.set(m, { jsonrpc: "2.0", id: m["id"] as string | number, error: { code: -32000, message: "rate limited", data: failure } } as JSONRPCMessage);
          continue;
        }
        const { name, arguments: args } = toolCallParams(m);
        await options.onDenied?.({ caller, tool: typeof name === "string" ? name : "", args, failure });
        local.set(m, {
          jsonrpc: "2.0",
          id: m["id"] as string | number,
          result: { content: [{ type: "text", text: JSON.stringify(failure) }], structuredContent: failure, isError: true },
        } as JSONRPCMessage);
      }
    }

    const callerKey = `${caller.principal.clientId}\u0000${caller.principal.subject}`;
    // A Host that declared MCP Apps at initialize is an App Host for this session.
    const sessionHeader = headers["mcp-session-id"];
    if (caller.hostProfile !== "app" && options.appSessions.declaredApp(typeof sessionHeader === "string" ? sessionHeader : undefined, callerKey))
      caller = { ...caller, hostProfile: "app" };
    // The session id the client sent (after initialize) names its MCP session on the call's span (mcp.session.id).
    const sessionId = typeof sessionHeader === "string" && sessionHeader !== "" ? sessionHeader : undefined;
    const authInfo: AuthInfo = {
      token: "",
      clientId: caller.principal.clientId,
      scopes: caller.scopes,
      extra: { caller, ...(sessionId ? { sessionId } : {}) },
    };
    for (const m of messages) {
      if (typeof m["method"] === "string" && (m["id"] === undefined || m["id"] === null))
        transport.dispatchNotification(m as JSONRPCMessage & { method: string; params?: Record<string, unknown> }, callerKey, authInfo);
    }
    if (requests.length === 0) {
      res.writeHead(202);
      return void res.end();
    }

    const extraHeaders: Record<string, string> = {};
    if (retryAfterMs > 0) extraHeaders["retry-after"] = retryAfterSeconds(retryAfterMs);
    const initialize = requests.find((m) => m["method"] === "initialize");
    if (initialize)
      extraHeaders["mcp-session-id"] = options.appSessions.issue(callerKey, (initialize["params"] as { capabilities?: unknown } | undefined)?.capabilities);

    const stream = requests.some((m) => (m["params"] as { _meta?: { progressToken?: unknown } } | undefined)?._meta?.progressToken !== undefined);
    const responses: JSONRPCMessage[] = [];
    const internals: number[] = [];
    let finished = false;
    let answered = 0;
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((r) => (resolveDone = r));
    if (stream)
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive", ...extraHeaders });
    const writeEvent = (m: JSONRPCMessage) => (res as { write(chunk: string): boolean }).write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
    const sink: ExchangeSink = {
      response(message) {
        if (stream) writeEvent(message);
        else responses.push(message);
        if (++answered === requests.length) resolveDone();
      },
      notification(message) {
        if (stream && !finished) writeEvent(message);
      },
    };
    res.once("close", () => {
      if (!finished) for (const id of internals) transport.abandon(id);
    });
    for (const m of requests) {
      const answer = local.get(m);
      if (answer) sink.response(answer);
      else internals.push(transport.dispatchRequest(m as JSONRPCMessage & { id: string | number }, sink, callerKey, authInfo));
    }
    await done;
    finished = true;
    if (stream) return void res.end();
    sendJson(res, 200, batch ? responses : responses[0], extraHeaders);
  };
  return async (req: NodeRequest, res: NodeResponse) => {
    try {
      await handle(req, res);
    } finally {
      // Answered without reading its body to the end (refused by size or shape, or 401, 403, 405,
      // 406, 415 before any of it was read): the rest is read at the refused bodies' shared rate,
      // so the caller gets the answer rather than a reset and a flood of such bodies cannot
      // crowd out other callers.
      const body = req as unknown as Readable;
      if (!body.readableEnded) refusedBodies.add(body, () => body.destroy());
    }
  };
}
