/**
 * One long-lived MCP SDK Server serves every HTTP request. The SDK's stateless pattern
 * builds a Server and a transport per request (~1.4 ms here); instead this transport
 * multiplexes: each incoming JSON-RPC request gets a process-unique id on the way in, and
 * responses and related notifications are routed back to the exchange that owns that id,
 * with the client's own id restored. No state survives a request, so any replica can serve
 * any request.
 *
 * A plain `tools/call` (a name and an object of arguments, nothing else: no `_meta`, no task)
 * skips the Server's generic request handling (its schema checks of the message, the request
 * and the result, about a tenth of the gateway's CPU on a warm read) and runs the same tool
 * handler directly, when one is installed. Its answer, its cancellation and its abandonment are
 * those of the Server's path: the same result or error message, nothing sent once cancelled.
 * Anything else, and any tools/call whose answer the Server's checks could change, goes
 * through the Server.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { CallToolResult, JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import { CallToolResultSchema, CancelledNotificationSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

/** Where the messages of one HTTP exchange go. */
export interface ExchangeSink {
  /** A response to one of the exchange's requests, with the client's id restored. */
  response(message: JSONRPCMessage): void;
  /** A notification related to one of its requests (progress); dropped if the sink cannot stream. */
  notification(message: JSONRPCMessage): void;
}

/** What a directly run tools/call handler gets: the subset of the SDK's request extra the tool handler reads. */
export interface DirectCallExtra {
  authInfo: AuthInfo;
  signal: AbortSignal;
  /** The internal request id, as the Server's handler would see it. */
  requestId: number;
}

/** The tools/call handler the Server runs, callable without the Server. */
export type DirectToolCall = (params: { name: string; arguments?: Record<string, unknown> | undefined }, extra: DirectCallExtra) => Promise<CallToolResult>;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

/**
 * Whether the Server's schema checks would pass `message` as a tools/call unchanged: the
 * message carries jsonrpc, id, method and params only; the id is a string or a safe integer;
 * params carries a string name and, optionally, a plain object of arguments, and nothing else.
 * A `__proto__` member of the arguments is left to the Server (its copy of the record drops it).
 */
function plainToolCall(message: Record<string, unknown>): { name: string; arguments?: Record<string, unknown> } | undefined {
  if (message["method"] !== "tools/call") return undefined;
  const id = message["id"];
  if (typeof id !== "string" && !Number.isSafeInteger(id)) return undefined;
  for (const key in message) if (key !== "jsonrpc" && key !== "id" && key !== "method" && key !== "params") return undefined;
  const params = message["params"];
  if (!isPlainObject(params) || typeof params["name"] !== "string") return undefined;
  for (const key in params) if (key !== "name" && key !== "arguments") return undefined;
  const args = params["arguments"];
  if (args === undefined && !("arguments" in params)) return { name: params["name"] };
  if (!isPlainObject(args) || Object.hasOwn(args, "__proto__")) return undefined;
  return { name: params["name"], arguments: args };
}

/** Whether the Server's result check would pass `result` unchanged (one text block, a plain structuredContent). */
function plainToolResult(result: CallToolResult): boolean {
  for (const key in result) if (key !== "content" && key !== "structuredContent" && key !== "isError") return false;
  const { content, structuredContent, isError } = result;
  if (!Array.isArray(content)) return false;
  for (const block of content as unknown[]) {
    if (!isPlainObject(block) || block["type"] !== "text" || typeof block["text"] !== "string") return false;
    for (const key in block) if (key !== "type" && key !== "text") return false;
  }
  return (
    (structuredContent === undefined || (isPlainObject(structuredContent) && !Object.hasOwn(structuredContent, "__proto__"))) &&
    (isError === undefined || typeof isError === "boolean")
  );
}

interface Pending {
  clientId: RequestId;
  sink: ExchangeSink;
  cancelKey: string;
}

export class MultiplexTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: { authInfo?: AuthInfo }) => void;

  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** (caller key, client request id) → internal ids, for notifications/cancelled. */
  private readonly byCancelKey = new Map<string, number[]>();
  /** internal id → called once its response was handed to the exchange (never for an abandoned one). */
  private readonly onDelivered = new Map<number, () => void>();
  /** internal id → the abort controller of a tools/call run directly (see plainToolCall). */
  private readonly direct = new Map<number, AbortController>();

  /** @param directToolCall the Server's tools/call handler, run without the Server for plain calls. */
  constructor(private readonly directToolCall?: DirectToolCall) {}

  /** The id the client gave the request now known as `internal` (undefined once answered). */
  clientRequestId(internal: number): RequestId | undefined {
    return this.pending.get(internal)?.clientId;
  }

  /** Calls `callback` after the response to `internal` reaches its exchange; dropped if the exchange went away. */
  whenDelivered(internal: number, callback: () => void): void {
    if (this.pending.has(internal)) this.onDelivered.set(internal, callback);
  }

  async start(): Promise<void> {}
  async close(): Promise<void> {
    this.onclose?.();
  }

  /**
   * Delivers one client request into the Server. `callerKey` scopes cancellation to the
   * same authenticated caller.
   */
  dispatchRequest(message: JSONRPCMessage & { id: RequestId }, sink: ExchangeSink, callerKey: string, authInfo: AuthInfo): number {
    const internal = this.nextId++;
    const cancelKey = `${callerKey}\u0000${String(message.id)}`;
    this.pending.set(internal, { clientId: message.id, sink, cancelKey });
    const list = this.byCancelKey.get(cancelKey);
    if (list) list.push(internal);
    else this.byCancelKey.set(cancelKey, [internal]);
    const plain = this.directToolCall ? plainToolCall(message as unknown as Record<string, unknown>) : undefined;
    if (plain) this.runDirect(internal, plain, authInfo);
    else this.onmessage?.({ ...message, id: internal }, { authInfo });
    return internal;
  }

  /** Runs a plain tools/call as the Server would: the same handler, result check and answer. */
  private runDirect(internal: number, params: { name: string; arguments?: Record<string, unknown> }, authInfo: AuthInfo): void {
    const controller = new AbortController();
    this.direct.set(internal, controller);
    const handler = this.directToolCall as DirectToolCall;
    // Never answered synchronously, as through the Server: the caller learns its internal id first.
    void Promise.resolve()
      .then(() => handler(params, { authInfo, signal: controller.signal, requestId: internal }))
      .then((result): CallToolResult => {
        if (plainToolResult(result)) return result;
        const checked = CallToolResultSchema.safeParse(result);
        if (!checked.success) throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${checked.error.message}`);
        return checked.data;
      })
      .then(
        (result) => (controller.signal.aborted ? undefined : this.send({ result, jsonrpc: "2.0", id: internal } as JSONRPCMessage)),
        (error: unknown) => {
          if (controller.signal.aborted) return undefined;
          const e = error as { code?: unknown; message?: string; data?: unknown };
          return this.send({
            jsonrpc: "2.0",
            id: internal,
            error: {
              code: Number.isSafeInteger(e["code"]) ? (e["code"] as number) : ErrorCode.InternalError,
              message: e.message ?? "Internal error",
              ...(e["data"] !== undefined && { data: e["data"] }),
            },
          } as JSONRPCMessage);
        },
      )
      .catch((error: unknown) => this.onerror?.(new Error(`Failed to send response: ${String(error)}`)))
      .finally(() => {
        if (this.direct.get(internal) === controller) this.direct.delete(internal);
      });
  }

  /** Delivers a client notification; a cancellation is re-addressed to the internal id. */
  dispatchNotification(message: JSONRPCMessage & { method: string; params?: Record<string, unknown> }, callerKey: string, authInfo: AuthInfo): void {
    if (message.method === "notifications/cancelled") {
      const target = message.params?.["requestId"];
      const ids = this.byCancelKey.get(`${callerKey}\u0000${String(target)}`);
      // Cancel only when the id names exactly one in-flight request of this caller.
      if (!ids || ids.length !== 1) return;
      const readdressed = { ...message, params: { ...message.params, requestId: ids[0] } } as JSONRPCMessage;
      const direct = this.direct.get(ids[0] as number);
      if (direct) {
        // As the Server's cancellation handler: a notification its schema refuses cancels nothing.
        const checked = CancelledNotificationSchema.safeParse(readdressed);
        if (checked.success) direct.abort(checked.data.params.reason);
        return;
      }
      this.onmessage?.(readdressed, { authInfo });
      return;
    }
    this.onmessage?.(message, { authInfo });
  }

  /** The client went away: abort the handler so work tied to the request stops. */
  abandon(internal: number): void {
    if (!this.pending.has(internal)) return;
    const direct = this.direct.get(internal);
    if (direct) direct.abort("client disconnected");
    else this.onmessage?.({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: internal, reason: "client disconnected" } });
    this.forget(internal);
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if ("id" in message && message.id !== undefined && ("result" in message || "error" in message)) {
      const internal = Number(message.id);
      const p = this.pending.get(internal);
      if (!p) return; // abandoned or cancelled
      const delivered = this.onDelivered.get(internal);
      this.forget(internal);
      p.sink.response({ ...message, id: p.clientId } as JSONRPCMessage);
      delivered?.();
      return;
    }
    const related = options?.relatedRequestId;
    if (related !== undefined) {
      const p = this.pending.get(Number(related));
      if (p) p.sink.notification(message);
    }
    // Server-initiated messages without a related request have nowhere to go in stateless mode.
  }

  private forget(internal: number): void {
    const p = this.pending.get(internal);
    if (!p) return;
    this.pending.delete(internal);
    this.onDelivered.delete(internal);
    const list = this.byCancelKey.get(p.cancelKey);
    if (!list) return;
    const rest = list.filter((i) => i !== internal);
    if (rest.length === 0) this.byCancelKey.delete(p.cancelKey);
    else this.byCancelKey.set(p.cancelKey, rest);
  }
}
