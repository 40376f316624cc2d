/**
 * The embedded Postgres (PGlite, Postgres in WASM) behind the same Database interface.
 * Its data dir lives on disk: a cold in-memory start costs seconds and ~1 GB, reopening a
 * data dir is fast, and the embedded default must be durable anyway.
 */
import { mkdirSync } from "node:fs";
import type { Database, Queryable } from "./database.js";

export async function createPgliteDatabase(dataDir: string): Promise<Database> {
  mkdirSync(dataDir, { recursive: true });
  const { PGlite } = await import("@electric-sql/pglite");
  const db = await PGlite.create({ dataDir });
  // PGlite runs one statement at a time; queue explicitly so a transaction never interleaves.
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T,>(fn: () => Promise<T>): Promise<T> => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
  const exec = async <R,>(target: Pick<typeof db, "query" | "exec">, sql: string, params?: unknown[]) => {
    if (params === undefined || params.length === 0) {
      // exec allows several statements (migrations); query allows parameters.
      if (sql.includes(";")) {
        const results = await target.exec(sql);
        const last = results[results.length - 1];
        return { rows: (last?.rows ?? []) as R[], rowCount: last?.affectedRows ?? last?.rows.length ?? 0 };
      }
    }
    const r = await target.query<R>(sql, params);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  };
  return {
    query: (sql, params) => serial(() => exec(db, sql, params)),
    transaction: (fn) =>
      serial(() =>
        db.transaction(async (tx) => {
          const q: Queryable = { query: (sql, params) => exec(tx, sql, params) };
          return fn(q);
        }),
      ),
    ping: async () => { await serial(() => db.query("SELECT 1")); },
    close: () => db.close(),
  };
}
