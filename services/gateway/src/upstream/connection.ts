/**
 * One upstream MCP server as the gateway reaches it: a lazily connected MCP SDK client over
 * Streamable HTTP (shared by every caller of the server: credentials are the operator's, not
 * the caller's), its tool list cached for `catalogTtlMs`, and calls with a hard timeout and a
 * cap on the bytes of any response read. A call that was sent is never re-sent here: the
 * transport's stream reconnection is off, and a failure after sending says the outcome is
 * unknown.
 */
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamServer } from "./config.js";

/** Why a call to the upstream failed, and whether it may have reached the upstream. */
export class UpstreamError extends Error {
  constructor(
    readonly detail: "unreachable" | "unauthorized" | "timeout" | "connection_lost" | "result_too_large" | "bad_answer" | "rejected",
    readonly sent: boolean,
    message: string,
    readonly upstreamCode?: number,
  ) {
    super(message);
    this.name = "UpstreamError";
  }
}

export interface UpstreamTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  schemaHash: string;
}

/** JSON with sorted keys, so equal schemas hash equally whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

export function schemaHash(schema: unknown): string {
  return `sha256:${createHash("sha256").update(canonicalJson(schema)).digest("hex").slice(0, 32)}`;
}

/** The response bytes the gateway reads at most for one request: beyond it the answer is dropped unread. */
export function responseCeiling(server: UpstreamServer): number {
  return Math.max(server.maxResultBytes * 4, 1024 * 1024);
}

/**
 * A fetch whose response bodies fail once they exceed `ceiling` bytes (the rest is never
 * buffered). The SDK transport hands every request its one long-lived AbortSignal, and fetch
 * unhooks a request's abort listener from it only when the request is garbage-collected: on a
 * pooled session, listeners would pile up on that signal by the thousand and each call would
 * walk them. So each request gets its own signal instead, and the transport's signal (one
 * listener per transport) aborts every request still open.
 */
function cappedFetch(ceiling: number): typeof fetch {
  const open = new Set<AbortController>();
  const hooked = new WeakSet<AbortSignal>();
  const abortOpen = (reason: unknown) => {
    for (const c of open) c.abort(reason);
    open.clear();
  };
  return async (input, init) => {
    const outer = init?.signal ?? undefined;
    const own = new AbortController();
    if (outer && !hooked.has(outer)) {
      hooked.add(outer);
      outer.addEventListener("abort", () => abortOpen(outer.reason), { once: true });
    }
    if (outer?.aborted) own.abort(outer.reason);
    open.add(own);
    const settle = () => open.delete(own);
    let response: Response;
    try {
      response = await fetch(input, { ...init, signal: own.signal });
    } catch (error) {
      settle();
      throw error;
    }
    if (!response.body) {
      settle();
      return response;
    }
    const reader = response.body.getReader();
    let seen = 0;
    const counted = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          settle();
          controller.error(error);
          return;
        }
        if (chunk.done) {
          settle();
          controller.close();
          return;
        }
        seen += chunk.value.byteLength;
        if (seen > ceiling) {
          settle();
          controller.error(new UpstreamError("result_too_large", true, `the upstream answer exceeded ${ceiling} bytes`));
          await reader.cancel().catch(() => undefined);
          own.abort();
          return;
        }
        controller.enqueue(chunk.value);
      },
      cancel(reason) {
        settle();
        return reader.cancel(reason);
      },
    });
    return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

function notSent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN") return true;
  }
  return false;
}

function findUpstreamError(error: unknown): UpstreamError | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) if (e instanceof UpstreamError) return e;
  const text = error instanceof Error ? error.message : "";
  if (text.includes("upstream answer exceeded")) return new UpstreamError("result_too_large", true, text);
  return undefined;
}

/** The upstream's HTTP layer refused the credential (401/403): the request was not run. */
function refusedCredential(error: unknown): UpstreamError | undefined {
  if (error instanceof StreamableHTTPError && (error.code === 401 || error.code === 403))
    return new UpstreamError("unauthorized", false, `the upstream refused the credential (HTTP ${error.code})`);
  return undefined;
}

/** Maps an error of a request that was (or may have been) sent. */
function sentError(error: unknown, timeoutMs: number): UpstreamError {
  const capped = findUpstreamError(error);
  if (capped) return capped;
  const refused = refusedCredential(error);
  if (refused) return refused;
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return new UpstreamError("timeout", true, `no answer within ${timeoutMs} ms`);
    if (error.code === ErrorCode.ConnectionClosed) return new UpstreamError("connection_lost", true, "the connection closed before the answer");
    // A JSON-RPC error answer from the upstream: it answered, and refused the request.
    return new UpstreamError("rejected", false, "the upstream refused the request", error.code);
  }
  if (notSent(error)) return new UpstreamError("unreachable", false, "the upstream refused the connection");
  return new UpstreamError("connection_lost", true, "the connection failed before the answer");
}

interface Live {
  client: Client;
  inFlight: number;
  retired: boolean;
}

export interface UpstreamConnection {
  readonly server: UpstreamServer;
  /** The tool list (cached for catalogTtlMs unless `fresh`). */
  tools(fresh?: boolean): Promise<UpstreamTool[]>;
  callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<{ result: CallToolResult }>;
  close(): Promise<void>;
}

const MAX_TOOL_PAGES = 20;

/**
 * `bearer`: the access token of one principal (per-user OAuth); without it, the server's static
 * credential (if any) is sent.
 */
export function createUpstreamConnection(server: UpstreamServer, bearer?: string): UpstreamConnection {
  let live: Promise<Live> | undefined;
  let cache: { at: number; tools: UpstreamTool[] } | undefined;

  const headers: Record<string, string> =
    bearer !== undefined
      ? { authorization: `Bearer ${bearer}` }
      : server.auth.mode === "static"
        ? { [server.auth.header]: `${server.auth.prefix}${server.auth.value}` }
        : {};

  async function connect(): Promise<Live> {
    const client = new Client({ name: "webcodex-mcp-gateway", version: "0.1.0" }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers },
      fetch: cappedFetch(responseCeiling(server)),
      // Never resume or re-send: a lost stream is an unknown outcome, not a retry.
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
    });
    try {
      await client.connect(transport, { timeout: server.timeoutMs });
    } catch (error) {
      await client.close().catch(() => undefined);
      // Only initialize was sent: no tool call reached the upstream.
      const refused = refusedCredential(error);
      if (refused) throw refused;
      throw new UpstreamError("unreachable", false, error instanceof Error ? `could not connect: ${error.message.slice(0, 200)}` : "could not connect");
    }
    const entry: Live = { client, inFlight: 0, retired: false };
    client.onclose = () => {
      if (live && !entry.retired) retire(entry);
    };
    return entry;
  }

  function retire(entry: Live): void {
    entry.retired = true;
    live = undefined;
    if (entry.inFlight === 0) void entry.client.close().catch(() => undefined);
  }

  async function acquire(): Promise<Live> {
    if (!live) {
      const pending = connect();
      live = pending;
      pending.catch(() => {
        if (live === pending) live = undefined;
      });
    }
    const entry = await live;
    entry.inFlight += 1;
    return entry;
  }

  function done(entry: Live, failed: UpstreamError | undefined): void {
    entry.inFlight -= 1;
    // A broken connection is replaced for later calls; calls still on it finish or fail on their own.
    if (failed && (failed.detail === "connection_lost" || failed.detail === "unreachable" || failed.detail === "unauthorized") && !entry.retired) retire(entry);
    else if (entry.retired && entry.inFlight === 0) void entry.client.close().catch(() => undefined);
  }

  async function fetchTools(): Promise<UpstreamTool[]> {
    const entry = await acquire();
    let failure: UpstreamError | undefined;
    try {
      const out: UpstreamTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_TOOL_PAGES; page++) {
        const listed = await entry.client.listTools(cursor ? { cursor } : {}, { timeout: server.timeoutMs });
        for (const t of listed.tools as Tool[])
          out.push({
            name: t.name,
            description: t.description ?? "",
            inputSchema: t.inputSchema as Record<string, unknown>,
            ...(t.annotations ? { annotations: t.annotations as Record<string, unknown> } : {}),
            schemaHash: schemaHash(t.inputSchema),
          });
        cursor = listed.nextCursor;
        if (!cursor) break;
      }
      return out;
    } catch (error) {
      failure = error instanceof UpstreamError ? error : sentError(error, server.timeoutMs);
      throw failure;
    } finally {
      done(entry, failure);
    }
  }

  return {
    server,
    async tools(fresh = false) {
      if (!fresh && cache && Date.now() - cache.at < server.catalogTtlMs) return cache.tools;
      const tools = await fetchTools();
      cache = { at: Date.now(), tools };
      return tools;
    },
    async callTool(name, args, signal) {
      const entry = await acquire();
      const params = { name, arguments: args };
      let failure: UpstreamError | undefined;
      try {
        const result = (await entry.client.request({ method: "tools/call", params }, CallToolResultSchema, {
          timeout: server.timeoutMs,
          maxTotalTimeout: server.timeoutMs,
          signal,
        })) as CallToolResult;
        return { result };
      } catch (error) {
        failure = sentError(error, server.timeoutMs);
        // An answer we could not read (malformed) came back: the call reached the upstream.
        if (!(error instanceof McpError) && failure.detail === "connection_lost" && error instanceof Error && error.name === "ZodError")
          failure = new UpstreamError("bad_answer", true, "the upstream's answer is not a tool result");
        throw failure;
      } finally {
        done(entry, failure);
      }
    },
    async close() {
      const current = live;
      live = undefined;
      if (current) await (await current.catch(() => undefined))?.client.close().catch(() => undefined);
    },
  };
}
