/** A throwaway Postgres database for one bench, created and dropped through an admin URL. */
import { randomBytes } from "node:crypto";
import pg from "pg";

export interface BenchDatabase {
  /** Connection URL of the new database. */
  url: string;
  /** Drops it (connections still open are terminated). */
  drop(): Promise<void>;
}

async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

export async function createBenchDatabase(adminUrl: string, prefix: string): Promise<BenchDatabase> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** Runs `fn` against a throwaway database, dropped afterwards whatever happens. */
export async function withBenchDatabase<T>(adminUrl: string, prefix: string, fn: (url: string) => Promise<T>): Promise<T> {
  const database = await createBenchDatabase(adminUrl, prefix);
  try {
    return await fn(database.url);
  } finally {
    await database.drop();
  }
}
