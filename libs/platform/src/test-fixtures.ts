/**
 * Test support (not part of the public surface): a fresh Postgres database per test, chosen
 * by the rule test/support/backing-services.ts uses. WEBCODEX_TEST_POSTGRES_URL names a
 * server; unset, a Docker engine that answers runs one (testcontainers), else the local server
 * (postgres://postgres@127.0.0.1:5432/test). Never skipped: no server is a failure that says so.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

let admin: Promise<string> | undefined;

/** The admin URL of the server. A container is reaped by testcontainers when the process exits. */
async function startAdmin(): Promise<string> {
  const configured = process.env["WEBCODEX_TEST_POSTGRES_URL"];
  if (configured === undefined) {
    const { getContainerRuntimeClient } = await import("testcontainers");
    const docker = await getContainerRuntimeClient().then(() => true, () => false);
    if (docker) {
      const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
      const container = await new PostgreSqlContainer("postgres:16-alpine").start();
      return container.getConnectionUri();
    }
  }
  const url = configured ?? "postgres://postgres@127.0.0.1:5432/test";
  const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await probe.connect();
  } catch (error) {
    throw new Error(`this test needs Postgres: no Docker engine for testcontainers, and ${url} is not reachable (${String(error)}). Set WEBCODEX_TEST_POSTGRES_URL or run tools/scripts/ensure-services.sh.`);
  } finally {
    await probe.end().catch(() => undefined);
  }
  return url;
}

export interface TestPostgresDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

/** A fresh, empty database; `drop` removes it (open connections included). */
export async function createTestPostgresDatabase(): Promise<TestPostgresDatabase> {
  admin ??= startAdmin();
  const adminUrl = await admin;
  const name = `wcx_platform_${randomBytes(6).toString("hex")}`;
  const run = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
