/**
 * The embedded Postgres (PGlite, Postgres in WASM) behind the same Database interface, run
 * in a worker thread (see pglite-worker.ts). Its data dir lives on disk: a cold in-memory
 * start costs seconds and ~1 GB, reopening a data dir is fast, and the embedded default must
 * be durable anyway.
 */
import { fork } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { Database, QueryResult, Queryable } from "./database.js";

interface Reply {
  id: number;
  ok: boolean;
  rows?: unknown[];
  rowCount?: number;
  error?: { message: string; code?: string };
  memory?: PgliteMemory;
}

/** The embedded database's own memory, as last reported by its worker thread (bytes). */
export interface PgliteMemory {
  /** PGlite's WebAssembly linear memory: Postgres's buffers, caches and heap. It never shrinks. */
  wasmBytes: number;
  /** The worker thread's V8 heap in use. */
  heapUsedBytes: number;
}

export interface PgliteDatabase extends Database {
  memory(): PgliteMemory;
}

const workerUrl = new URL("./pglite-worker.js", import.meta.url);

/**
 * Creates the cluster in a fresh data dir in a child process. initdb grows PGlite's WASM heap
 * to ~650 MB and a WebAssembly memory never shrinks, so a server that ran initdb itself would
 * keep (and peak at) that; reopening the initialized dir takes ~120 MB.
 */
async function initializeCluster(dataDir: string): Promise<void> {
  const child = fork(fileURLToPath(new URL("./pglite-init.js", import.meta.url)), [dataDir], { stdio: ["ignore", "ignore", "pipe", "ipc"] });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (exitCode) => resolve(exitCode));
  });
  if (code !== 0) throw new Error(`PGlite could not initialize ${dataDir} (exit ${code}): ${stderr.trim().slice(-500)}`);
}

/**
 * The database directory is its owner's alone: the directory `0700` (nobody else can reach a
 * file in it, whatever mode PGlite gives the files it makes), and what is already in it `0700`
 * (directories) or `0600` (files). The walk cannot be raced: nobody else can enter the
 * directory once it is closed, which happens first.
 */
export function closeDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
  const stack = [dataDir];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        chmodSync(full, 0o700);
        stack.push(full);
      } else if (entry.isFile()) chmodSync(full, 0o600);
    }
  }
}

export async function createPgliteDatabase(dataDir: string): Promise<PgliteDatabase> {
  closeDataDir(dataDir);
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    await initializeCluster(dataDir);
    closeDataDir(dataDir);
  }
  const worker = new Worker(workerUrl, { workerData: { dataDir } });
  worker.unref();
  let nextId = 1;
  const pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  let fatal: Error | undefined;
  let memory: PgliteMemory = { wasmBytes: 0, heapUsedBytes: 0 };
  const started = new Promise<void>((resolve, reject) => {
    pending.set(0, { resolve: (r) => (r.ok ? resolve() : reject(new Error(`PGlite failed to start: ${r.error?.message}`))), reject });
  });
  worker.on("message", (reply: Reply) => {
    if (reply.memory) memory = reply.memory;
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    p.resolve(reply);
  });
  worker.on("error", (error) => {
    fatal = error;
    for (const p of pending.values()) p.reject(error);
    pending.clear();
  });
  await started;

  const send = (op: "query" | "exec" | "close", sql?: string, params?: unknown[]): Promise<Reply> => {
    if (fatal) return Promise.reject(fatal);
    const id = nextId++;
    return new Promise<Reply>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, op, sql, params });
    });
  };
  const run = async <R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> => {
    // exec runs several statements (migrations) but takes no parameters.
    const multi = (params === undefined || params.length === 0) && sql.includes(";");
    const reply = await send(multi ? "exec" : "query", sql, multi ? undefined : (params ?? []));
    if (!reply.ok) throw Object.assign(new Error(reply.error?.message ?? "PGlite query failed"), { code: reply.error?.code });
    return { rows: (reply.rows ?? []) as R[], rowCount: reply.rowCount ?? 0 };
  };

  // PGlite has one session: statements are queued so a transaction never interleaves with others.
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const result = tail.then(fn, fn);
    tail = result.catch(() => undefined);
    return result;
  };
  return {
    memory: () => memory,
    query: (sql, params) => serial(() => run(sql, params)),
    transaction: (fn) =>
      serial(async () => {
        await run("BEGIN");
        try {
          const tx: Queryable = { query: (sql, params) => run(sql, params) };
          const value = await fn(tx);
          await run("COMMIT");
          return value;
        } catch (error) {
          await run("ROLLBACK").catch(() => undefined);
          throw error;
        }
      }),
    ping: async () => {
      await serial(() => run("SELECT 1"));
    },
    close: async () => {
      await serial(() => send("close"));
      await worker.terminate();
    },
  };
}
