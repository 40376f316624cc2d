/**
 * Serves the gateway's one MCP Server over a single already-trusted connection (the stdio
 * transport of `webcodex stdio`): every message is attributed to one fixed caller, the local
 * principal, and goes through the same multiplexing transport, pipeline, refs and audit as an
 * HTTP request. Only the process that started WebCodex holds the pipe, so there is no token.
 */
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Caller } from "../auth.js";
import type { ExchangeSink, MultiplexTransport } from "./multiplex-transport.js";

export interface LocalConnection {
  /** Resolves when the connection closed (the peer went away or close() was called). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

export async function serveLocalConnection(multiplex: MultiplexTransport, connection: Transport, caller: Caller): Promise<LocalConnection> {
  const authInfo: AuthInfo = { token: "", clientId: caller.principal.clientId, scopes: caller.scopes, extra: { caller } };
  const callerKey = `${caller.principal.clientId}\u0000${caller.principal.subject}`;
  const inFlight = new Set<number>();
  let open = true;
  let resolveClosed: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));
  const send = (message: JSONRPCMessage) => {
    if (open) connection.send(message).catch((error: unknown) => connection.onerror?.(error instanceof Error ? error : new Error(String(error))));
  };
  connection.onmessage = (message: JSONRPCMessage) => {
    const m = message as { method?: unknown; id?: RequestId | null; params?: Record<string, unknown> };
    if (typeof m.method !== "string") return; // the server sends no requests, so no responses are expected
    if (m.id === undefined || m.id === null) {
      multiplex.dispatchNotification(message as JSONRPCMessage & { method: string; params?: Record<string, unknown> }, callerKey, authInfo);
      return;
    }
    let internal = 0;
    const sink: ExchangeSink = {
      response: (answer) => {
        inFlight.delete(internal);
        send(answer);
      },
      notification: send,
    };
    internal = multiplex.dispatchRequest(message as JSONRPCMessage & { id: RequestId }, sink, callerKey, authInfo);
    inFlight.add(internal);
  };
  connection.onclose = () => {
    if (!open) return;
    open = false;
    // Work tied to requests of a peer that went away stops, as when an HTTP client disconnects.
    for (const internal of inFlight) multiplex.abandon(internal);
    inFlight.clear();
    resolveClosed();
  };
  await connection.start();
  return {
    closed,
    close: async () => {
      if (open) await connection.close();
    },
  };
}
