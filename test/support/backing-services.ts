/**
 * Postgres and Redis for integration tests. With a Docker engine, testcontainers starts them;
 * without one (these machines), the servers named by WEBCODEX_TEST_POSTGRES_URL /
 * WEBCODEX_TEST_REDIS_URL are used (default: the local ones). Never skipped: if neither is
 * available, the suite fails with a message that says so.
 *
 * Isolation: each test gets its own database (created here, dropped on release) and its own
 * Redis key prefix, so runs never collide.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export interface BackingServices {
  /** Admin URL of the Postgres server (database "postgres" or the given one). */
  postgresAdminUrl: string;
  redisUrl: string;
  source: "testcontainers" | "configured";
  stop(): Promise<void>;
}

let shared: Promise<BackingServices> | undefined;

async function dockerAvailable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function start(): Promise<BackingServices> {
  if (process.env["WEBCODEX_TEST_POSTGRES_URL"] === undefined && (await dockerAvailable())) {
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const { RedisContainer } = await import("@testcontainers/redis");
    const [postgres, redis] = await Promise.all([new PostgreSqlContainer("postgres:16-alpine").start(), new RedisContainer("redis:7-alpine").start()]);
    return {
      postgresAdminUrl: postgres.getConnectionUri(),
      redisUrl: redis.getConnectionUrl(),
      source: "testcontainers",
      stop: async () => {
        await Promise.all([postgres.stop(), redis.stop()]);
      },
    };
  }
  const postgresAdminUrl = process.env["WEBCODEX_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test";
  const redisUrl = process.env["WEBCODEX_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379";
  const client = new pg.Client({ connectionString: postgresAdminUrl, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    throw new Error(
      `integration tests need Postgres: no Docker engine for testcontainers, and ${postgresAdminUrl} is not reachable (${String(error)}). Set WEBCODEX_TEST_POSTGRES_URL or run tools/scripts/ensure-services.sh.`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
  return { postgresAdminUrl, redisUrl, source: "configured", stop: async () => undefined };
}

/** The shared backing services of this test process. */
export function backingServices(): Promise<BackingServices> {
  shared ??= start();
  return shared;
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh, empty database for one test; `drop` removes it. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const services = await backingServices();
  const name = `wcx_test_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: services.postgresAdminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(services.postgresAdminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: services.postgresAdminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A unique Redis key prefix for one test. */
export function redisKeyPrefix(): string {
  return `wcx-test:${randomBytes(6).toString("hex")}:`;
}
