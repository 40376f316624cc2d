/**
 * One small query interface over `pg` (distributed) and PGlite (embedded), so service
 * stores are written once. Each service owns one Postgres schema and its migrations.
 */
import { createRequire } from "node:module";
import type pg from "pg";

/** `pg`, loaded on first use: a process without a Postgres database (a Runner) does not load it at start. */
const loadPg = () => createRequire(import.meta.url)("pg") as typeof pg;

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<R>>;
}

export interface Database extends Queryable {
  /** Runs `fn` in one transaction; rolls back if it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Cheap liveness query for readiness checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface PostgresOptions {
  url: string;
  max?: number;
  /** Milliseconds a query may take before the pool gives up (keeps calls from hanging when Postgres stops). */
  statementTimeoutMs?: number;
  connectionTimeoutMs?: number;
}

/** A Database over a `pg` pool. Pool errors (server gone) surface on the next query, never crash. */
export function createPostgresDatabase(options: PostgresOptions): Database {
  const pool = new (loadPg().Pool)({
    connectionString: options.url,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 3_000,
    statement_timeout: options.statementTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
  });
  pool.on("error", () => {
    // An idle client lost its server; the pool drops it and the next query reports the outage.
  });
  const query = async <R>(sql: string, params?: unknown[]) => {
    const result = await pool.query(sql, params as unknown[]);
    return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
  };
  return {
    query,
    async transaction(fn) {
      const client = await pool.connect();
      // While checked out the pool does not listen for this client's errors: a server that
      // goes away between two statements (a restart, `pg_ctl stop`) would emit an unhandled
      // 'error' and end the process. The next statement reports the loss instead, and the
      // broken client is destroyed rather than returned to the pool.
      let lost: Error | undefined;
      const onError = (error: Error) => {
        lost = error;
      };
      client.on("error", onError);
      try {
        await client.query("BEGIN");
        const tx: Queryable = {
          query: async <R>(sql: string, params?: unknown[]) => {
            const r = await client.query(sql, params as unknown[]);
            return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
          },
        };
        const value = await fn(tx);
        await client.query("COMMIT");
        return value;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        client.off("error", onError);
        client.release(lost);
      }
    },
    async ping() {
      try {
        await pool.query("SELECT 1");
      } catch (error) {
        throw new Error(describePostgresFailure(error), { cause: error });
      }
    },
    close: () => pool.end(),
  };
}

/** Socket-level errors: nothing answers at the address, or the connection was cut. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE"]);

/**
 * A readiness detail for a failed Postgres query: "unreachable (…)" when the server cannot be
 * reached or cut the connection, "unavailable (…)" when it answers that it is shutting down,
 * starting or cannot take connections (SQLSTATE 57P0x, class 08), else "query failed (…)".
 */
export function describePostgresFailure(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  const message = typeof e?.message === "string" && e.message ? e.message : code || String(error);
  if (NETWORK_CODES.has(code) || /Connection terminated|timeout exceeded when trying to connect/i.test(message)) return `unreachable (${message})`;
  if (/^57P0\d$/.test(code) || code.startsWith("08")) return `unavailable (${message}, SQLSTATE ${code})`;
  return `query failed (${message})`;
}

export interface Migration {
  /** Monotonic, never renamed once shipped, e.g. "0001_projects". */
  id: string;
  sql: string;
}

/**
 * Applies `migrations` in order inside `schema`, each once, recorded in
 * `<schema>.schema_migrations`. Safe to run concurrently from several replicas: an
 * advisory lock serializes them. Migrations a newer build recorded are left alone (they only
 * add); a schema that does not record this list's first migration is refused with a message.
 */
export async function runMigrations(db: Database, schema: string, migrations: readonly Migration[]): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`webcodex.migrate.${schema}`]);
    await tx.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await tx.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id));
    const first = migrations[0]?.id;
    if (first !== undefined && done.size > 0 && !done.has(first)) {
      // Migrated by a build with another migration history (one from before a baseline):
      // applying this baseline over it would fail half-way or mix two schemas.
      throw new Error(
        `schema ${schema} was created by a build with another migration history (it records ${[...done].sort().join(", ")}; this build starts at ${first}): ` +
          `start with an empty database (or a new --data-dir), or run the build that created it`,
      );
    }
    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.id)) continue;
      await tx.query(m.sql.replaceAll("{{schema}}", schema));
      await tx.query(`INSERT INTO ${schema}.schema_migrations (id) VALUES ($1)`, [m.id]);
      applied.push(m.id);
    }
    return applied;
  });
}
