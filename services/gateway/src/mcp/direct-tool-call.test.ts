import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Caller } from "../auth.js";
import type { CatalogCache } from "../catalog-cache.js";
import type { Pipeline } from "../pipeline.js";
import type { ModelResult } from "../model-projection.js";
import { createMcpServer } from "./mcp-server.js";
import type { MultiplexTransport } from "./multiplex-transport.js";

const caller: Caller = { principal: { clientId: "c", subject: "s" }, admissionProfile: "full", scopes: [] } as unknown as Caller;
const authInfo: AuthInfo = { token: "", clientId: "c", scopes: [], extra: { caller, sessionId: "sess-1" } };
const callerKey = "c\u0000s";

type Behaviour = (tool: string, args: unknown, signal: AbortSignal) => Promise<ModelResult>;

interface Seen {
  tool: string;
  args: unknown;
  facts: unknown;
}

/** One gateway MCP server over a fake pipeline; `direct` chooses whether plain tools/calls skip the Server. */
async function server(direct: boolean, behaviour: Behaviour) {
  const seen: Seen[] = [];
  const delivered: string[] = [];
  const pipeline = {
    call: async (_caller: Caller, tool: string, args: unknown, signal: AbortSignal, facts: unknown) => {
      seen.push({ tool, args, facts });
      const result = await behaviour(tool, args, signal);
      return { ...result, delivered: () => delivered.push(tool) };
    },
  } as unknown as Pipeline;
  const transport = await createMcpServer({
    pipeline,
    catalogs: {} as CatalogCache,
    hostProfile: "generic",
    version: "test",
    appResources: new Map(),
    directToolCalls: direct,
  });
  return { transport, seen, delivered };
}

/** Sends one request and collects its answer as the HTTP layer would: the response's bytes. */
function exchange(transport: MultiplexTransport, message: Record<string, unknown>): { answer: Promise<string>; internal: number } {
  let resolve: (text: string) => void = () => undefined;
  const answer = new Promise<string>((r) => (resolve = r));
  const internal = transport.dispatchRequest(
    message as JSONRPCMessage & { id: string | number },
    { response: (m) => resolve(JSON.stringify(m)), notification: () => undefined },
    callerKey,
    authInfo,
  );
  return { answer, internal };
}

const call = (id: unknown, params: unknown, extra: Record<string, unknown> = {}) => ({ jsonrpc: "2.0", id, method: "tools/call", params, ...extra });

const ok: Behaviour = async (tool, args) => ({ structuredContent: { tool, args, "2": "two", nested: { a: [1, { b: null }] } }, isError: false });

describe("tools/call answered without the Server", () => {
  it("answers every request with the bytes the Server's path gives, and hands the pipeline the same call", async () => {
    const behaviours: Record<string, Behaviour> = {
      ok,
      failure: async () => ({ structuredContent: { error: { code: "not_found", message: "no such file" } }, isError: true }),
      text: async () => ({ structuredContent: { n: 1 }, isError: false, text: "one line" }),
      thrown: async () => {
        throw new Error("pipeline broke");
      },
      coded: async () => {
        throw Object.assign(new Error("coded"), { code: -32042, data: { why: "test" } });
      },
      unsafeCode: async () => {
        throw Object.assign(new Error("unsafe"), { code: 1.5 });
      },
      noMessage: async () => {
        throw { code: 7 };
      },
      badResult: async () => ({ structuredContent: [1, 2] as unknown as Record<string, unknown>, isError: false }),
      protoKey: async () => ({ structuredContent: JSON.parse('{"__proto__":{"x":1},"y":2}') as Record<string, unknown>, isError: false }),
    };
    const requests = [
      ...Object.keys(behaviours).map((name, i) => call(i + 1, { name, arguments: { path: "a.ts", n: i } })),
      call("string-id", { name: "ok" }),
      call(0, { name: "ok", arguments: {} }),
      // Left to the Server: its checks refuse or change these.
      call(3, { name: "ok", arguments: [1, 2] }),
      call(4, { name: "ok", arguments: null }),
      call(5, { name: 42 }),
      call(6, { name: "ok", arguments: { a: 1 }, _meta: { note: "x" } }),
      call(7, { name: "ok", arguments: { a: 1 }, task: { ttl: 10 } }),
      call(8, { name: "ok", extra: true }),
      call(9, JSON.parse('{"name":"ok","arguments":{"__proto__":{"polluted":1},"k":1}}')),
    ];
    const direct = await server(true, (tool, args, signal) => (behaviours[tool] ?? ok)(tool, args, signal));
    const viaServer = await server(false, (tool, args, signal) => (behaviours[tool] ?? ok)(tool, args, signal));
    for (const request of requests) {
      const a = await exchange(direct.transport, request).answer;
      const b = await exchange(viaServer.transport, request).answer;
      assert.equal(a, b, JSON.stringify(request));
    }
    assert.deepEqual(direct.seen, viaServer.seen);
    assert.deepEqual(direct.delivered, viaServer.delivered);
    assert.ok(direct.seen.length >= Object.keys(behaviours).length + 2);
  });

  it("passes the client's request id and session to the pipeline", async () => {
    const { transport, seen } = await server(true, ok);
    await exchange(transport, call("abc", { name: "ok", arguments: { x: 1 } })).answer;
    assert.deepEqual(seen, [{ tool: "ok", args: { x: 1 }, facts: { requestId: "abc", sessionId: "sess-1" } }]);
  });

  for (const direct of [true, false]) {
    it(`${direct ? "directly" : "through the Server"}: a cancelled call aborts its pipeline call and is never answered; another caller's cancel does nothing`, async () => {
      let aborted: unknown;
      const started: Array<() => void> = [];
      const behaviour: Behaviour = (_tool, _args, signal) =>
        new Promise((resolve) => {
          started.push(() => resolve({ structuredContent: {}, isError: false }));
          signal.addEventListener("abort", () => {
            aborted = signal.reason;
            resolve({ structuredContent: { late: true }, isError: false });
          });
        });
      const { transport } = await server(direct, behaviour);
      let answered = false;
      const first = exchange(transport, call(1, { name: "slow" }));
      void first.answer.then(() => (answered = true));
      await waitFor(() => started.length === 1);
      const cancel = (key: string, reason: unknown) =>
        transport.dispatchNotification({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1, reason } } as never, key, authInfo);
      cancel("other\u0000caller", "not yours");
      cancel(callerKey, 42); // refused by the cancellation schema: cancels nothing
      await new Promise((r) => setImmediate(r));
      assert.equal(aborted, undefined);
      cancel(callerKey, "user stopped it");
      await waitFor(() => aborted !== undefined);
      assert.equal(aborted, "user stopped it");
      await new Promise((r) => setImmediate(r));
      assert.equal(answered, false);

      // The client going away aborts with the disconnect reason.
      aborted = undefined;
      const second = exchange(transport, call(2, { name: "slow" }));
      await waitFor(() => started.length === 2);
      transport.abandon(second.internal);
      await waitFor(() => aborted !== undefined);
      assert.equal(aborted, "client disconnected");
    });
  }
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000 && !condition(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(condition(), "condition not reached");
}
