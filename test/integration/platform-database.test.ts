/** libs/platform against a real Postgres: the per-service migrations runner and Database.ping. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import net from "node:net";
import { createPostgresDatabase, runMigrations } from "@webcodex/platform";
import type { Database, Migration } from "@webcodex/platform";
import { createTestDatabase } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

// Each migration logs itself into {{schema}}.log (no unique key), so a migration applied twice
// leaves two rows.
const migrations: Migration[] = [
  {
    id: "0001_log",
    sql: "CREATE TABLE {{schema}}.log (id text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp()); INSERT INTO {{schema}}.log (id) VALUES ('0001_log')",
  },
  { id: "0002_items", sql: "CREATE TABLE {{schema}}.items (name text PRIMARY KEY); INSERT INTO {{schema}}.log (id) VALUES ('0002_items')" },
];
const slow: Migration = { id: "0003_slow", sql: "SELECT pg_sleep(0.5); INSERT INTO {{schema}}.log (id) VALUES ('0003_slow')" };

describe("runMigrations against Postgres", () => {
  let database: TestDatabase;
  const opened: Database[] = [];
  const open = () => {
    const db = createPostgresDatabase({ url: database.url, max: 2 });
    opened.push(db);
    return db;
  };
  const log = async (db: Database, schema: string) => (await db.query<{ id: string }>(`SELECT id FROM ${schema}.log ORDER BY at`)).rows.map((r) => r.id);
  const recorded = async (db: Database, schema: string) =>
    (await db.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations ORDER BY id`)).rows.map((r) => r.id);

  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    await Promise.all(opened.map((db) => db.close()));
    await database?.drop();
  });

  it("applies migrations in order inside the schema and records each version", async () => {
    const db = open();
    assert.deepEqual(await runMigrations(db, "ordered", migrations), ["0001_log", "0002_items"]);
    assert.deepEqual(await log(db, "ordered"), ["0001_log", "0002_items"]);
    assert.deepEqual(await recorded(db, "ordered"), ["0001_log", "0002_items"]);
    const tables = await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ordered' ORDER BY table_name",
    );
    assert.deepEqual(
      tables.rows.map((r) => r.table_name),
      ["items", "log", "schema_migrations"],
    );
  });

  it("is idempotent: a second run applies nothing; a new migration is applied alone", async () => {
    const db = open();
    await runMigrations(db, "again", migrations);
    assert.deepEqual(await runMigrations(db, "again", migrations), []);
    assert.deepEqual(await runMigrations(db, "again", [...migrations, slow]), ["0003_slow"]);
    assert.deepEqual(await log(db, "again"), ["0001_log", "0002_items", "0003_slow"]);
    assert.deepEqual(await recorded(db, "again"), ["0001_log", "0002_items", "0003_slow"]);
  });

  it("a failing migration rolls back the whole run: nothing of it is applied or recorded", async () => {
    const db = open();
    const broken: Migration = { id: "0003_broken", sql: "INSERT INTO {{schema}}.log (id) VALUES ('0003_broken'); SELECT * FROM {{schema}}.missing_table" };
    await assert.rejects(runMigrations(db, "broken", [...migrations, broken]), /missing_table/);
    const schema = await db.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = 'broken'");
    assert.equal(schema.rowCount, 0, "not even the schema stays");
    assert.deepEqual(await runMigrations(db, "broken", migrations), ["0001_log", "0002_items"]);
  });

  it("two runners started together on separate connections apply each migration exactly once (advisory lock)", async () => {
    const [a, b] = [open(), open()];
    // Watch pg_locks from a third connection: the second runner must be seen waiting on the lock.
    const watcher = new pg.Client({ connectionString: database.url });
    await watcher.connect();
    let sawWaiter = false;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const r = await watcher.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        );
        if ((r.rows[0] as { n: number }).n > 0) sawWaiter = true;
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    try {
      const results = await Promise.all([runMigrations(a, "raced", [...migrations, slow]), runMigrations(b, "raced", [...migrations, slow])]);
      assert.deepEqual(results.map((r) => r.length).sort(), [0, 3], `one runner applied all, the other none: ${JSON.stringify(results)}`);
      assert.equal(sawWaiter, true, "the second runner waited on the advisory lock");
    } finally {
      watching = false;
      await watch;
      await watcher.end();
    }
    assert.deepEqual(await log(a, "raced"), ["0001_log", "0002_items", "0003_slow"]);
    assert.deepEqual(await recorded(a, "raced"), ["0001_log", "0002_items", "0003_slow"]);
  });

  it("leaves migrations a newer build recorded alone, and refuses a schema with another migration history, naming both", async () => {
    const db = open();
    await runMigrations(db, "newer", [...migrations, slow]);
    assert.deepEqual(await runMigrations(db, "newer", migrations), [], "an older build of the same history starts on it");
    const baseline: Migration = { id: "0001_baseline", sql: "CREATE TABLE {{schema}}.log (id text)" };
    await assert.rejects(
      runMigrations(db, "newer", [baseline]),
      /records 0001_log, 0002_items, 0003_slow; this build starts at 0001_baseline\): start with an empty database/,
    );
    assert.deepEqual(await recorded(db, "newer"), ["0001_log", "0002_items", "0003_slow"], "nothing recorded by the refused run");
  });

  it("refuses a schema name that is not a plain identifier", async () => {
    await assert.rejects(runMigrations(open(), "bad; DROP TABLE x", migrations), /invalid schema name/);
  });
});

describe("Database.ping", () => {
  it("resolves against a live server; names an unreachable one as such", async () => {
    const database = await createTestDatabase();
    const live = createPostgresDatabase({ url: database.url });
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", () => r()));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise<void>((r) => probe.close(() => r()));
    const dead = createPostgresDatabase({ url: `postgres://postgres@127.0.0.1:${port}/x`, connectionTimeoutMs: 1_000 });
    try {
      await live.ping();
      await assert.rejects(dead.ping(), (e: Error) => e.message === `unreachable (connect ECONNREFUSED 127.0.0.1:${port})`);
    } finally {
      await Promise.all([live.close(), dead.close()]);
      await database.drop();
    }
  });
});

describe("Database.transaction when the server ends the connection", () => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    await database?.drop();
  });

  it("a connection terminated between two statements fails the transaction instead of ending the process, and the pool recovers", async () => {
    const db = createPostgresDatabase({ url: database.url, max: 1 });
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await assert.rejects(
        db.transaction(async (tx) => {
          const pid = Number((await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid);
          // The server ends this backend while the transaction awaits something else (as a
          // restart does): the checked-out client emits 'error' with no statement running.
          await admin.query("SELECT pg_terminate_backend($1)", [pid]);
          // eslint-disable-next-line no-restricted-syntax -- kept: the pool client's 'error' on the ended backend shows no event the test can await
          await new Promise((r) => setTimeout(r, 300));
          await tx.query("SELECT 1");
        }),
      );
      // The broken client was destroyed, not returned: the only pool slot works again.
      assert.deepEqual((await db.query<{ one: number }>("SELECT 1 AS one")).rows, [{ one: 1 }]);
    } finally {
      await admin.end();
      await db.close();
    }
  });
});
