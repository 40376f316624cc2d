/**
 * Postgres and Redis for integration tests. With a Docker engine, testcontainers starts them;
 * without one, the servers named by WEBCODEX_TEST_POSTGRES_URL / WEBCODEX_TEST_REDIS_URL are used
 * (default: the local ones). Never skipped: if neither is available, the suite fails with a
 * message that says so.
 *
 * The testcontainers images are WEBCODEX_TEST_POSTGRES_IMAGE / WEBCODEX_TEST_REDIS_IMAGE
 * (default: webcodex-test/postgres:15-bookworm and webcodex-test/redis:7-bookworm, which
 * tools/scripts/test-images.sh builds from Debian packages, so no image registry is needed;
 * `make test` runs it when an engine answers). Ryuk is off unless TESTCONTAINERS_RYUK_DISABLED
 * says otherwise (its image comes from a registry): a detached watchdog removes this process's
 * containers once it exits, however it exits.
 *
 * Isolation: each test gets its own database (created here, dropped on release) and its own
 * Redis key prefix, so runs never collide.
 */
import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
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

const POSTGRES_IMAGE = process.env["WEBCODEX_TEST_POSTGRES_IMAGE"] ?? "webcodex-test/postgres:15-bookworm";
const REDIS_IMAGE = process.env["WEBCODEX_TEST_REDIS_IMAGE"] ?? "webcodex-test/redis:7-bookworm";

/** Removes the containers once `pid` has exited (Ryuk's job, without Ryuk's image). */
function watchdog(pid: number, containerIds: string[]): void {
  const script = `while kill -0 ${pid} 2>/dev/null; do sleep 2; done; docker rm -f -v ${containerIds.join(" ")} >/dev/null 2>&1`;
  spawn("sh", ["-c", script], { detached: true, stdio: "ignore", env: process.env }).unref();
}

async function startContainers(): Promise<BackingServices> {
  const { GenericContainer, Wait } = await import("testcontainers");
  const started = Date.now();
  let postgres, redis;
  try {
    [postgres, redis] = await Promise.all([
      new GenericContainer(POSTGRES_IMAGE)
        .withExposedPorts(5432)
        .withEnvironment({ POSTGRES_DB: "test" })
        .withLabels({ "webcodex-test": "1" })
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/))
        .withStartupTimeout(120_000)
        .start(),
      new GenericContainer(REDIS_IMAGE)
        .withExposedPorts(6379)
        .withLabels({ "webcodex-test": "1" })
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .withStartupTimeout(60_000)
        .start(),
    ]);
  } catch (error) {
    throw new Error(
      `integration tests: a Docker engine answers, but testcontainers could not start ${POSTGRES_IMAGE} and ${REDIS_IMAGE} (${String(error)}). Build them with tools/scripts/test-images.sh, or set WEBCODEX_TEST_POSTGRES_URL and WEBCODEX_TEST_REDIS_URL to use running servers.`,
    );
  }
  const ryukOff = process.env["TESTCONTAINERS_RYUK_DISABLED"] === "true";
  if (ryukOff) watchdog(process.pid, [postgres.getId(), redis.getId()]);
  const postgresAdminUrl = `postgres://postgres@${postgres.getHost()}:${postgres.getMappedPort(5432)}/test`;
  const redisUrl = `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`;
  process.stderr.write(
    `backing services: testcontainers (${POSTGRES_IMAGE} at ${postgresAdminUrl}, ${REDIS_IMAGE} at ${redisUrl}, ${Date.now() - started} ms${ryukOff ? "; Ryuk off, a watchdog removes them" : ""})\n`,
  );
  return {
    postgresAdminUrl,
    redisUrl,
    source: "testcontainers",
    stop: async () => {
      await Promise.all([postgres.stop(), redis.stop()]);
    },
  };
}

async function start(): Promise<BackingServices> {
  if (process.env["WEBCODEX_TEST_POSTGRES_URL"] === undefined) {
    // Ryuk's image comes from a registry; without it, the watchdog above does its job.
    process.env["TESTCONTAINERS_RYUK_DISABLED"] ??= "true";
    if (await dockerAvailable()) return startContainers();
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
