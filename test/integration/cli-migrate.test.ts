/**
 * `webcodex migrate` (the chart's pre-install hook) applies every service's schema, including
 * the runner-broker's (fence high-water marks and Job records), and is idempotent.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { spawn } from "node:child_process";
import pg from "pg";
import { cliPath, createTestDatabase, startTcpProxy, until } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const run = promisify(execFile);

describe("webcodex migrate", () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  it("applies the refs, audit and broker migrations once; a second run applies nothing", async () => {
    const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", WEBCODEX_POSTGRES_URL: db.url, WEBCODEX_LOG_LEVEL: "warn" };
    const first = await run(process.execPath, [cliPath, "migrate"], { env });
    assert.match(first.stdout, /broker [1-9]\d*/, first.stdout);
    const again = await run(process.execPath, [cliPath, "migrate"], { env });
    assert.match(again.stdout, /refs 0, audit 0, broker 0/);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ t: string }>("SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'broker' ORDER BY 1");
      assert.deepEqual(
        rows.map((r) => r.t).filter((t) => t !== "schema_migrations"),
        ["fence_hwm", "job_continuations", "jobs"],
      );
    } finally {
      await client.end();
    }
  });

  it("waits for a database that is not up yet (WEBCODEX_MIGRATE_WAIT_S), and gives up after it with the reason", async () => {
    // migrate dials a relay to the database on 127.0.0.1, wherever the database itself is
    // (testcontainers may give its host as the Docker bridge's address rather than localhost).
    const target = new URL(db.url);
    const relay = await startTcpProxy(target.hostname, Number(target.port || 5432));
    await relay.down();
    const late = new URL(db.url);
    late.hostname = "127.0.0.1";
    late.port = String(relay.port);
    const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", WEBCODEX_POSTGRES_URL: late.toString(), WEBCODEX_LOG_LEVEL: "warn" };
    // The database is not up yet: without a wait budget the hook fails at once.
    await assert.rejects(run(process.execPath, [cliPath, "migrate"], { env }), /did not accept connections within 0 s/);
    const child = spawn(process.execPath, [cliPath, "migrate"], { env: { ...env, WEBCODEX_MIGRATE_WAIT_S: "60" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let exitedAt = 0;
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) =>
      child.once("exit", (code) => {
        exitedAt = Date.now();
        r(code);
      }),
    );
    // A second attempt proves it kept waiting past a refused one (with no budget it gave up at once).
    await until("a second connection attempt", () => /waiting for the database \(attempt 2\)/.test(err) || exitedAt !== 0, 20_000);
    assert.equal(exitedAt, 0, `still waiting while the database is down: ${err}`);
    const upAt = Date.now();
    await relay.up(); // the database comes up
    try {
      const code = await exited;
      assert.equal(code, 0, err);
      assert.ok(exitedAt >= upAt, "it finished only after the database came up");
      assert.match(out, /migrations applied/);
    } finally {
      await relay.close();
    }
  });
});
