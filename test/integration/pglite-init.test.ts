/**
 * The embedded Postgres's first start: initdb runs in a child process, so the server never
 * holds initdb's WASM heap; a data dir that cannot be created fails with a clear error.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDatabase } from "@webcodex/platform";

const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]) / 1024;

describe("embedded Postgres first start", () => {
  it("initializes a fresh data dir outside this process, then serves from it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-pglite-init-"));
    try {
      const before = rssMiB();
      const db = await createPgliteDatabase(join(dir, "pg"));
      assert.ok(existsSync(join(dir, "pg", "PG_VERSION")), "the cluster exists on disk");
      assert.deepEqual((await db.query<{ n: number }>("SELECT 1 AS n")).rows, [{ n: 1 }]);
      // initdb in-process grew the heap by ~600 MiB; reopening costs ~120 MiB.
      const grown = rssMiB() - before;
      assert.ok(grown < 350, `the serving process grew by ${grown.toFixed(0)} MiB`);
      await db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a data dir under a regular file fails with a message naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-pglite-bad-"));
    try {
      writeFileSync(join(dir, "file"), "not a directory");
      await assert.rejects(createPgliteDatabase(join(dir, "file", "pg")), /file\/pg/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
