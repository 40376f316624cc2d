/**
 * The MCP Streamable HTTP endpoint (stateless): POST carries JSON-RPC; a request is answered
 * with application/json, or with an SSE stream when the client asked for progress. GET and
 * DELETE are not offered (405). Host/Origin checks guard against DNS rebinding.
 */
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import type { HttpHandler, NodeRequest, NodeResponse, Logger } from "@webcodex/platform";
import { sendJson } from "@webcodex/platform";
import type { Authenticator, Caller } from "../auth.js";
import { bearerToken } from "../auth.js";
import type { MultiplexTransport, ExchangeSink } from "./multiplex-transport.js";

export interface StreamableHttpOptions {
  transport: MultiplexTransport;
  authenticator: Authenticator;
  /** Host header values accepted (DNS-rebinding protection); ports are ignored. */
  allowedHosts: readonly string[];
  /** Origins accepted when a browser sends one. */
  allowedOrigins: readonly string[];
  /** URL of the protected resource metadata, for WWW-Authenticate. */
  resourceMetadataUrl: string;
  maxBodyBytes: number;
  logger: Logger;
}

const jsonRpcError = (code: number, message: string, id: unknown = null) => ({ jsonrpc: "2.0", id, error: { code, message } });

function hostAllowed(hostHeader: string | undefined, allowed: readonly string[]): boolean {
  if (!hostHeader) return false;
  const host = hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : hostHeader.split(":")[0] ?? "";
  return allowed.includes(host.toLowerCase());
}

async function readBody(req: NodeRequest, limit: number): Promise<Buffer | "too_large"> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return "too_large";
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export function createStreamableHttpHandler(options: StreamableHttpOptions): HttpHandler {
  const { transport } = options;
  return async (req: NodeRequest, res: NodeResponse) => {
    const headers = req.headers;
    if (!hostAllowed(headers.host ?? (headers[":authority"] as string | undefined), options.allowedHosts)) return sendJson(res, 403, jsonRpcError(-32000, "host not allowed"));
    const origin = headers.origin;
    if (origin !== undefined && !options.allowedOrigins.includes(origin)) return sendJson(res, 403, jsonRpcError(-32000, "origin not allowed"));

    const caller: Caller | undefined = await options.authenticator.authenticate(bearerToken(headers.authorization));
    if (!caller) {
      return sendJson(res, 401, jsonRpcError(-32001, "unauthorized"), {
        "www-authenticate": `Bearer resource_metadata="${options.resourceMetadataUrl}"`,
      });
    }
    if (req.method !== "POST") return sendJson(res, 405, jsonRpcError(-32000, "method not allowed: this server is stateless and offers no SSE stream"), { allow: "POST" });

    const version = headers["mcp-protocol-version"];
    if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return sendJson(res, 400, jsonRpcError(-32000, `unsupported MCP-Protocol-Version ${version}`));
    const accept = String(headers.accept ?? "");
    if (!accept.includes("application/json") || !accept.includes("text/event-stream")) return sendJson(res, 406, jsonRpcError(-32000, "Accept must include application/json and text/event-stream"));
    if (!String(headers["content-type"] ?? "").includes("application/json")) return sendJson(res, 415, jsonRpcError(-32000, "Content-Type must be application/json"));

    const body = await readBody(req, options.maxBodyBytes);
    if (body === "too_large") return sendJson(res, 413, jsonRpcError(-32000, `request body larger than ${options.maxBodyBytes} bytes`));
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString("utf8"));
    } catch {
      return sendJson(res, 400, jsonRpcError(-32700, "parse error"));
    }
    const batch = Array.isArray(parsed);
    const messages = (batch ? parsed : [parsed]) as Array<Record<string, unknown>>;
    if (messages.length === 0 || messages.some((m) => typeof m !== "object" || m === null || m["jsonrpc"] !== "2.0")) return sendJson(res, 400, jsonRpcError(-32600, "invalid request"));

    const authInfo: AuthInfo = { token: "", clientId: caller.principal.clientId, scopes: caller.scopes, extra: { caller } };
    const callerKey = `${caller.principal.clientId}\u0000${caller.principal.subject}`;
    const requests = messages.filter((m) => typeof m["method"] === "string" && m["id"] !== undefined && m["id"] !== null);
    for (const m of messages) {
      if (typeof m["method"] === "string" && (m["id"] === undefined || m["id"] === null)) transport.dispatchNotification(m as JSONRPCMessage & { method: string; params?: Record<string, unknown> }, callerKey, authInfo);
    }
    if (requests.length === 0) {
      res.writeHead(202);
      return void res.end();
    }

    const stream = requests.some((m) => (m["params"] as { _meta?: { progressToken?: unknown } } | undefined)?._meta?.progressToken !== undefined);
    const responses: JSONRPCMessage[] = [];
    const internals: number[] = [];
    let finished = false;
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((r) => (resolveDone = r));
    if (stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache, no-transform", connection: "keep-alive" });
    const writeEvent = (m: JSONRPCMessage) => (res as { write(chunk: string): boolean }).write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
    const sink: ExchangeSink = {
      response(message) {
        if (stream) writeEvent(message);
        else responses.push(message);
        if ((stream ? ++answered : responses.length) === requests.length) resolveDone();
      },
      notification(message) {
        if (stream && !finished) writeEvent(message);
      },
    };
    let answered = 0;
    res.once("close", () => {
      if (!finished) for (const id of internals) transport.abandon(id);
    });
    for (const m of requests) internals.push(transport.dispatchRequest(m as JSONRPCMessage & { id: string | number }, sink, callerKey, authInfo));
    await done;
    finished = true;
    if (stream) return void res.end();
    sendJson(res, 200, batch ? responses : responses[0]);
  };
}
