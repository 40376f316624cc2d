/**
 * The Code Mode sandbox, run in a worker thread so a runaway cell never holds the gateway's
 * event loop. Each cell gets a fresh QuickJS runtime (WebAssembly): no filesystem, network,
 * process, timers or module loader exist inside it; its memory and stack are capped, and an
 * interrupt handler stops it at its deadline. Its only ways out are two host functions: a
 * child tool call (a JSON string out, a JSON envelope string back, answered by the gateway)
 * and `text`, whose output is capped here. Nothing else of the host is reachable.
 *
 * Protocol (parent <-> worker): `run` in; `call` out / `answer` in per child call; `done` out.
 */
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort } from "node:worker_threads";
import { newQuickJSWASMModuleFromVariant } from "quickjs-emscripten-core";
import type { QuickJSContext, QuickJSDeferredPromise, QuickJSHandle, QuickJSSyncVariant, QuickJSWASMModule } from "quickjs-emscripten-core";
import variant from "@jitl/quickjs-wasmfile-release-sync";
import type { CellDone, CellRunRequest, ParentMessage } from "./protocol.js";

/** The name the cell's code is evaluated under: error lines are counted in it from 1. */
const CELL_FILE = "cell.js";
const STACK_BYTES = 256 * 1024;

/**
 * Runs in the VM before the cell: takes the two host functions off the global object and
 * exposes them only through `tools` (a proxy: any name is a call the gateway admits or refuses)
 * and `text`. Results come back as JSON strings, so no host object ever enters the VM.
 */
const PRELUDE = `(() => {
  const call = globalThis.__wc_call, out = globalThis.__wc_text;
  delete globalThis.__wc_call; delete globalThis.__wc_text;
  const parse = JSON.parse, stringify = JSON.stringify;
  const invoke = async (name, args) => {
    // Taken before the first await, so a failure names the cell line that made the call.
    const site = new Error().stack;
    const envelope = parse(await call(String(name), stringify(args === undefined ? {} : args)));
    if (envelope.ok) return envelope.result;
    const f = envelope.failure;
    const error = new Error(f.message ? f.reason_code + ": " + f.message : f.reason_code);
    for (const k of Object.keys(f)) error[k] = f[k];
    error.stack = site;
    throw error;
  };
  const tools = new Proxy(Object.freeze(Object.create(null)), {
    get: (_t, name) => (typeof name === "string" && name !== "then" ? (args) => invoke(name, args) : undefined),
    set: () => false, defineProperty: () => false, deleteProperty: () => false,
  });
  const text = (value) => { out(typeof value === "string" ? value : stringify(value, null, 2) ?? String(value)); };
  Object.defineProperty(globalThis, "tools", { value: tools, writable: false, configurable: false });
  Object.defineProperty(globalThis, "text", { value: text, writable: false, configurable: false });
})();`;

/**
 * A cell thread runs at a low CPU priority (nice 19, this thread only: Linux applies
 * setpriority to a thread id), so spinning cells yield the cores to the gateway's own event
 * loop and to other callers. Where /proc/thread-self is absent the thread keeps its priority.
 */
const CELL_THREAD_NICE = 19;
function lowerThreadPriority(): void {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, CELL_THREAD_NICE);
  } catch {
    // not Linux, or not permitted: the interrupt handler and the hard deadline still bound the cell
  }
}
lowerThreadPriority();

let modulePromise: Promise<QuickJSWASMModule> | undefined;
const quickjs = () => (modulePromise ??= newQuickJSWASMModuleFromVariant(variant as unknown as QuickJSSyncVariant));

interface Dumped {
  name?: string;
  message?: string;
  stack?: string;
  reason_code?: string;
}

function describe(error: unknown): { kind: CellDone["kind"]; message: string; line?: number; reasonCode?: string } {
  const e = (typeof error === "object" && error !== null ? error : { message: String(error) }) as Dumped;
  const message = String(e.message ?? e.name ?? "error").slice(0, 1_000);
  const match = typeof e.stack === "string" ? new RegExp(`${CELL_FILE.replace(".", "\\.")}:(\\d+)`).exec(e.stack) : null;
  const line = match ? Number(match[1]) : undefined;
  // The interrupt handler's stop reads "interrupted" wherever it lands (the prelude, a job, the cell).
  const kind: CellDone["kind"] =
    message === "interrupted"
      ? "timeout"
      : e.name === "InternalError" && message === "out of memory"
        ? "memory"
        : e.name === "InternalError" && message === "stack overflow"
          ? "stack"
          : "threw";
  return { kind, message, ...(line !== undefined ? { line } : {}), ...(typeof e.reason_code === "string" ? { reasonCode: e.reason_code } : {}) };
}

async function runCell(req: CellRunRequest): Promise<CellDone> {
  const mod = await quickjs();
  const deadline = Date.now() + req.timeoutMs;
  parentPort?.postMessage({ type: "started" });
  const runtime = mod.newRuntime();
  runtime.setMemoryLimit(req.memoryBytes);
  runtime.setMaxStackSize(STACK_BYTES);
  runtime.setInterruptHandler(() => Date.now() > deadline);
  const ctx: QuickJSContext = runtime.newContext();
  const pending = new Map<number, QuickJSDeferredPromise>();
  let nextId = 0;
  let text = "";
  let textBytes = 0;
  let truncated = false;
  const encoder = new TextEncoder();

  const finish = (done: Omit<CellDone, "type" | "text" | "truncated">): CellDone => ({ type: "done", text, truncated, ...done });
  try {
    const callFn = ctx.newFunction("__wc_call", (nameHandle, argsHandle) => {
      const deferred = ctx.newPromise();
      const id = nextId++;
      pending.set(id, deferred);
      parentPort?.postMessage({ type: "call", id, name: ctx.getString(nameHandle), args: ctx.getString(argsHandle) });
      return deferred.handle;
    });
    ctx.setProp(ctx.global, "__wc_call", callFn);
    callFn.dispose();
    const textFn = ctx.newFunction("__wc_text", (valueHandle) => {
      if (truncated) return;
      const value = ctx.getString(valueHandle) + "\n";
      const bytes = encoder.encode(value);
      if (textBytes + bytes.length <= req.textBytes) {
        text += value;
        textBytes += bytes.length;
        return;
      }
      // Cut at the byte budget on a character boundary (the decoder drops a partial one).
      const room = req.textBytes - textBytes;
      text += new TextDecoder("utf-8", { fatal: false }).decode(bytes.subarray(0, room)).replace(/\uFFFD$/, "");
      textBytes = req.textBytes;
      truncated = true;
    });
    ctx.setProp(ctx.global, "__wc_text", textFn);
    textFn.dispose();
    ctx.unwrapResult(ctx.evalCode(PRELUDE, "prelude.js")).dispose();

    const evaluated = ctx.evalCode(`(async () => {${req.code}\n})()`, CELL_FILE);
    if (evaluated.error) {
      const dumped = ctx.dump(evaluated.error) as unknown;
      evaluated.error.dispose();
      return finish(describe(dumped));
    }
    const main: QuickJSHandle = evaluated.value;

    // Drives the VM's job queue until the cell settles; child answers arrive as messages.
    return await new Promise<CellDone>((resolve) => {
      const settle = () => {
        const jobs = runtime.executePendingJobs();
        if (jobs.error) {
          const dumped = ctx.dump(jobs.error) as unknown;
          jobs.error.dispose();
          return resolve(finish(describe(dumped)));
        }
        const state = ctx.getPromiseState(main);
        if (state.type === "fulfilled") {
          state.value.dispose();
          return resolve(finish({ kind: "ok" }));
        }
        if (state.type === "rejected") {
          const dumped = ctx.dump(state.error) as unknown;
          state.error.dispose();
          return resolve(finish(describe(dumped)));
        }
        if (Date.now() > deadline) return resolve(finish({ kind: "timeout", message: "the cell ran past its deadline" }));
        if (pending.size === 0)
          return resolve(finish({ kind: "threw", message: "the cell awaits a promise that nothing can settle (no child call is in flight)" }));
      };
      const onMessage = (message: ParentMessage) => {
        if (message.type !== "answer") return;
        const deferred = pending.get(message.id);
        if (!deferred) return;
        pending.delete(message.id);
        const value = ctx.newString(message.envelope);
        deferred.resolve(value);
        value.dispose();
        deferred.dispose();
        settle();
      };
      parentPort?.on("message", onMessage);
      settle();
    }).finally(() => {
      parentPort?.removeAllListeners("message");
      main.dispose();
    });
  } finally {
    try {
      for (const d of pending.values()) d.dispose();
      ctx.dispose();
      runtime.dispose();
    } catch {
      reusable = false;
    }
  }
}

/** False once a VM could not be torn down cleanly: this worker then serves no further cell. */
let reusable = true;

// One cell at a time per worker; a worker whose cell timed out or crashed is terminated by the parent.
parentPort?.on("message", function start(message: ParentMessage) {
  if (message.type !== "run") return;
  parentPort?.off("message", start);
  void runCell(message)
    .catch((error: unknown): CellDone => {
      // A host-side throw: the interrupt (e.g. in the prelude of a cell that waited long for a slot) is a timeout.
      const described = describe(error);
      return { type: "done", kind: described.kind === "timeout" ? "timeout" : "crashed", text: "", truncated: false, message: described.message };
    })
    .then((done) => {
      parentPort?.postMessage({ ...done, reusable });
      parentPort?.on("message", start);
    });
});
