/**
 * `webcodex migrate` (the chart's pre-install hook) applies every service's schema, including
 * the runner-broker's (fence high-water marks and Job records), and is idempotent.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";
import { cliPath, createTestDatabase } from "../support/index.js";
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
      assert.deepEqual(rows.map((r) => r.t).filter((t) => t !== "schema_migrations"), ["fence_hwm", "job_continuations", "jobs"]);
    } finally {
      await client.end();
    }
  });
});
