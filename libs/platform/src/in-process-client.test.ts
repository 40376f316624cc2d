import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { HandlerContext } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import { createInProcessClient } from "./in-process-client.js";

/** A Runner whose execute runs `body` with the handler context it was given. */
function runnerWith(body: (ctx: HandlerContext) => Promise<string>) {
  return createInProcessClient(RunnerService, {
    execute: async (req, ctx) => ({ resultJson: `${req.tool}:${await body(ctx)}` }),
    describe: async () => ({}),
    raiseAttemptFence: async () => ({}),
  });
}

const aborted = (signal: AbortSignal) =>
  new Promise<unknown>((resolve) => (signal.aborted ? resolve(signal.reason) : signal.addEventListener("abort", () => resolve(signal.reason), { once: true })));

describe("in-process client", () => {
  it("delivers the request as a message and the caller's headers to the handler", async () => {
    const client = runnerWith(async (ctx) => `${ctx.requestHeader.get("x-who")}|${ctx.protocolName}|${ctx.method.name}`);
    const res = await client.execute({ tool: "read_files" }, { headers: { "x-who": "alice" } });
    assert.equal(res.resultJson, "read_files:alice|in-process|Execute");
  });

  it("aborts the handler's signal when the caller aborts, with the caller's reason", async () => {
    const caller = new AbortController();
    let seen: unknown;
    const client = runnerWith(async (ctx) => {
      caller.abort(new ConnectError("stop", Code.Canceled));
      seen = await aborted(ctx.signal);
      return "x";
    });
    await client.execute({ tool: "t" }, { signal: caller.signal });
    assert.equal((seen as ConnectError).rawMessage, "stop");
  });

  it("a caller signal aborted before the call gives an already aborted handler signal", async () => {
    const caller = new AbortController();
    caller.abort(new Error("gone"));
    const client = runnerWith(async (ctx) => String(ctx.signal.aborted));
    assert.equal((await client.execute({ tool: "t" }, { signal: caller.signal })).resultJson, "t:true");
  });

  it("aborts the handler's signal at the deadline with DeadlineExceeded and reports the time left", async () => {
    let left: number | undefined;
    const client = runnerWith(async (ctx) => {
      left = ctx.timeoutMs();
      const reason = await aborted(ctx.signal);
      return Code[ConnectError.from(reason).code];
    });
    const res = await client.execute({ tool: "t" }, { timeoutMs: 30 });
    assert.equal(res.resultJson, "t:DeadlineExceeded");
    assert.ok(left !== undefined && left > 0 && left <= 30, `time left ${left}`);
  });

  it("without a deadline timeoutMs() is undefined", async () => {
    const client = runnerWith(async (ctx) => String(ctx.timeoutMs()));
    assert.equal((await client.execute({ tool: "t" })).resultJson, "t:undefined");
  });

  it("aborts the handler's signal once the call finished and stops listening to the caller", async () => {
    const caller = new AbortController();
    let signal: AbortSignal | undefined;
    const client = runnerWith(async (ctx) => {
      signal = ctx.signal;
      return String(ctx.signal.aborted);
    });
    assert.equal((await client.execute({ tool: "t" }, { signal: caller.signal, timeoutMs: 60_000 })).resultJson, "t:false");
    assert.equal(signal?.aborted, true);
    assert.equal(ConnectError.from(signal?.reason).code, Code.Canceled);
    // A later abort of the caller reaches nothing (and the deadline timer is gone: the test ends).
    caller.abort(new Error("late"));
    assert.equal(ConnectError.from(signal?.reason).rawMessage, "call finished");
  });

  it("surfaces a handler's throw as a ConnectError with its code", async () => {
    const client = runnerWith(async () => {
      throw new ConnectError("no", Code.PermissionDenied);
    });
    await assert.rejects(client.execute({ tool: "t" }), (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied);
  });

  it("gives each call its own response headers and context values", async () => {
    const client = runnerWith(async (ctx) => {
      const before = ctx.responseHeader.get("x-n");
      ctx.responseHeader.set("x-n", "1");
      ctx.responseTrailer.set("x-t", "1");
      return `${before}|${ctx.values === ctx.values}`;
    });
    assert.equal((await client.execute({ tool: "t" })).resultJson, "t:null|true");
    assert.equal((await client.execute({ tool: "t" })).resultJson, "t:null|true");
  });
});
