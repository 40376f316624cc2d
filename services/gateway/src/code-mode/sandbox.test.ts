import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createSandboxPool } from "./sandbox.js";
import type { CellLimits, ChildOutcome } from "./sandbox.js";

const limits: CellLimits = { timeoutMs: 2_000, memoryBytes: 32 * 1024 * 1024, textBytes: 4096, maxChildCalls: 64, childConcurrency: 4 };
const pool = createSandboxPool();
after(() => pool.close());

/** A fake gateway: `echo` answers its arguments; anything else is refused as the gateway would. */
const calls: string[] = [];
async function callTool(name: string, argsJson: string): Promise<ChildOutcome> {
  calls.push(name);
  if (name === "echo") return { ok: true, result: { args: JSON.parse(argsJson) as unknown } };
  return { ok: false, failure: { reason_code: "tool_not_admitted", failure_stage: "admission", message: `${name} is not callable from a cell` } };
}

describe("code mode sandbox", () => {
  it("runs an async body whose text is the only output", async () => {
    const run = await pool.run(`const r = await tools.echo({q: 1}); text("got " + r.args.q); text({a: [1]});`, limits, callTool);
    assert.equal(run.kind, "ok");
    assert.equal(run.text, 'got 1\n{\n  "a": [\n    1\n  ]\n}\n');
    assert.equal(run.truncated, false);
    assert.equal(run.childCalls, 1);
  });

  it("reports a thrown error with its message, its line in the cell, and the text so far", async () => {
    const run = await pool.run(`text("before");\n\nthrow new Error("nope");`, limits, callTool);
    assert.equal(run.kind, "threw");
    assert.equal(run.message, "nope");
    assert.equal(run.line, 3);
    assert.equal(run.text, "before\n");
  });

  it("has no host objects: constructor.constructor('return process')() finds no process, require or timers", async () => {
    const run = await pool.run(
      `const g = constructor.constructor("return this")(); text([typeof process, typeof require, typeof setTimeout, typeof fetch, typeof globalThis.__wc_call, typeof g.process].join(","));`,
      limits,
      callTool,
    );
    assert.equal(run.kind, "ok");
    assert.equal(run.text, "undefined,undefined,undefined,undefined,undefined,undefined\n");
  });

  it("keeps prototype pollution inside the VM: the bridge still sends plain JSON and refuses what the gateway refuses", async () => {
    calls.length = 0;
    const run = await pool.run(
      `Object.prototype.isAdmin = true; Object.prototype.toJSON = undefined; JSON.stringify = () => '{"tool":"run_shell"}';
       try { tools.read_files = () => 1 } catch (e) {}
       const r = await tools.echo({x: 1});
       text(JSON.parse === undefined ? "gone" : Object.keys(r.args).join(","));`,
      limits,
      callTool,
    );
    assert.equal(run.kind, "ok", run.message);
    assert.equal(run.text, "x\n");
    assert.deepEqual(calls, ["echo"]);
    assert.equal(({} as Record<string, unknown>)["isAdmin"], undefined);
  });

  it("stops while(true){} at the deadline and does not hold the event loop meanwhile", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const run = await pool.run(`while (true) {}`, { ...limits, timeoutMs: 400 }, callTool);
    clearInterval(timer);
    assert.equal(run.kind, "timeout");
    assert.ok(ticks >= 5, `the event loop ticked ${ticks} times while the cell spun`);
  });

  it("fails a 1 GB allocation and deep recursion as bounded structured outcomes", async () => {
    const big = await pool.run(`const a = new Uint8Array(1024 * 1024 * 1024); text(a.length);`, limits, callTool);
    assert.ok(["memory", "threw"].includes(big.kind), big.kind);
    // Near its cap QuickJS may spend its time in the allocator, where the interrupt handler is
    // not consulted: the parent's hard deadline then ends the worker.
    const grow = await pool.run(`const a = []; while (true) a.push(new Array(100000).fill(1));`, { ...limits, timeoutMs: 500 }, callTool);
    assert.ok(["memory", "timeout"].includes(grow.kind), grow.kind);
    assert.ok(grow.elapsedMs < 500 + 1_000 + 1_000, `stopped after ${grow.elapsedMs} ms`);
    const deep = await pool.run(`function f(n) { return f(n + 1) + 1; } f(0);`, limits, callTool);
    assert.equal(deep.kind, "stack");
  });

  it("caps text at its byte budget and says it was cut", async () => {
    const run = await pool.run(`const s = "x".repeat(1024 * 1024); for (let i = 0; i < 100; i++) text(s);`, limits, callTool);
    assert.equal(run.kind, "ok");
    assert.equal(run.truncated, true);
    assert.equal(Buffer.byteLength(run.text), limits.textBytes);
  });

  it("ends a cell past its child-call limit, and a refused tool name rejects inside the cell", async () => {
    const many = await pool.run(`for (let i = 0; i < 10000; i++) await tools.echo({i});`, limits, callTool);
    assert.equal(many.kind, "child_call_limit");
    assert.equal(many.childCalls, limits.maxChildCalls + 1);
    const refused = await pool.run(`text("a");\nawait tools.edit_project_files({changes: []});`, limits, callTool);
    assert.equal(refused.kind, "threw");
    assert.equal(refused.reasonCode, "tool_not_admitted");
    assert.equal(refused.line, 2);
    assert.equal(refused.text, "a\n");
  });

  it("runs Promise.all children at most childConcurrency at a time", async () => {
    let inFlight = 0;
    let started = 0;
    let peak = 0;
    // Each call holds until the cap is reached (or every call has started), so the peak shows the cap.
    const slow = async (): Promise<ChildOutcome> => {
      started++;
      peak = Math.max(peak, ++inFlight);
      while (inFlight < limits.childConcurrency && started < 12) await new Promise((r) => setTimeout(r, 1));
      inFlight--;
      return { ok: true, result: {} };
    };
    const run = await pool.run(`await Promise.all(Array.from({length: 12}, () => tools.echo({}))); text("done");`, { ...limits, timeoutMs: 10_000 }, slow);
    assert.equal(run.kind, "ok");
    assert.equal(run.childCalls, 12);
    assert.equal(peak, limits.childConcurrency);
  });

  it("refuses a cell that awaits what can never settle instead of hanging", async () => {
    const run = await pool.run(`await new Promise(() => {});`, limits, callTool);
    assert.equal(run.kind, "threw");
  });
});
