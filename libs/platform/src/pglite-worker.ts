/**
 * Worker thread that owns the embedded PGlite instance. PGlite runs Postgres in WASM on the
 * thread that calls it and syncs its data dir after every statement, which would block the
 * event loop of the embedded server for milliseconds per query; here it runs beside it.
 * Protocol: {id, op: "query"|"exec"|"close", sql?, params?} → {id, ok, rows?, rowCount?, error?, memory}.
 * `memory` is the size of PGlite's WebAssembly memory and of this thread's V8 heap, in bytes.
 */
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import { pgliteOptions } from "./pglite-options.js";

interface Request {
  id: number;
  op: "query" | "exec" | "close";
  sql?: string;
  params?: unknown[];
}

const port = parentPort;
if (!port) throw new Error("pglite-worker must run in a worker thread");

// Postgres's WebAssembly is compiled by V8's baseline compiler only. By default V8 also
// recompiles the functions it finds hot with its optimizing compiler and keeps both copies
// (with the optimizer's working memory): 30-60 MB more resident for queries that spend their
// time syncing the data dir, not computing. Read when the module is compiled (PGlite.create);
// the flag is process-wide, and no other WebAssembly of the process is hot.
setFlagsFromString("--liftoff-only");

const ready = PGlite.create(pgliteOptions((workerData as { dataDir: string }).dataDir));
let pglite: PGlite | undefined;
// A WebAssembly memory only grows; reading its size costs nothing. A closed instance has no
// module left: the last size read stands.
let wasmBytes = 0;
const memory = () => {
  wasmBytes = (pglite?.closed ? undefined : pglite?.Module?.wasmMemory?.buffer.byteLength) ?? wasmBytes;
  return { wasmBytes, heapUsedBytes: getHeapStatistics().used_heap_size };
};
ready.then(
  (db) => {
    pglite = db;
    port.postMessage({ id: 0, ok: true, memory: memory() });
  },
  (error: unknown) => port.postMessage({ id: 0, ok: false, error: { message: String(error) } }),
);

port.on("message", (req: Request) => {
  void (async () => {
    const db = await ready;
    try {
      if (req.op === "close") {
        await db.close();
        port.postMessage({ id: req.id, ok: true, memory: memory() });
        return;
      }
      if (req.op === "exec") {
        const results = await db.exec(req.sql ?? "");
        const last = results[results.length - 1];
        port.postMessage({ id: req.id, ok: true, rows: last?.rows ?? [], rowCount: last?.affectedRows ?? last?.rows.length ?? 0, memory: memory() });
        return;
      }
      const r = await db.query(req.sql ?? "", req.params ?? []);
      port.postMessage({ id: req.id, ok: true, rows: r.rows, rowCount: r.affectedRows ?? r.rows.length, memory: memory() });
    } catch (error) {
      const e = error as { message?: string; code?: string };
      port.postMessage({ id: req.id, ok: false, error: { message: e.message ?? String(error), code: e.code }, memory: memory() });
    }
  })();
});
