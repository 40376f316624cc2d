/**
 * One long-lived MCP SDK Server serves every HTTP request. The SDK's stateless pattern
 * builds a Server and a transport per request (~1.4 ms here); instead this transport
 * multiplexes: each incoming JSON-RPC request gets a process-unique id on the way in, and
 * responses and related notifications are routed back to the exchange that owns that id,
 * with the client's own id restored. No state survives a request, so any replica can serve
 * any request.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";

/** Where the messages of one HTTP exchange go. */
export interface ExchangeSink {
  /** A response to one of the exchange's requests, with the client's id restored. */
  response(message: JSONRPCMessage): void;
  /** A notification related to one of its requests (progress); dropped if the sink cannot stream. */
  notification(message: JSONRPCMessage): void;
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
    this.onmessage?.({ ...message, id: internal }, { authInfo });
    return internal;
  }

  /** Delivers a client notification; a cancellation is re-addressed to the internal id. */
  dispatchNotification(message: JSONRPCMessage & { method: string; params?: Record<string, unknown> }, callerKey: string, authInfo: AuthInfo): void {
    if (message.method === "notifications/cancelled") {
      const target = message.params?.["requestId"];
      const ids = this.byCancelKey.get(`${callerKey}\u0000${String(target)}`);
      // Cancel only when the id names exactly one in-flight request of this caller.
      if (!ids || ids.length !== 1) return;
      this.onmessage?.({ ...message, params: { ...message.params, requestId: ids[0] } } as JSONRPCMessage, { authInfo });
      return;
    }
    this.onmessage?.(message, { authInfo });
  }

  /** The client went away: abort the handler so work tied to the request stops. */
  abandon(internal: number): void {
    if (!this.pending.has(internal)) return;
    this.onmessage?.({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: internal, reason: "client disconnected" } });
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
