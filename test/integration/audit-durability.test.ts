/**
 * Audit durability with the real audit service process (`webcodex serve audit`) and real
 * Postgres, driven through the gateway's audit recorder: the audit service is killed in the
 * middle of 1,000 effectful calls and restarted, and every call has exactly one row; a
 * gateway restart replays its spool; a record that cannot be made durable is not acknowledged;
 * a read-only call's record is stored before the call is answered.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { appendFileSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AuditService } from "@webcodex/proto";
import { createLogger, createPostgresDatabase } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { AuditNotDurableError, createAuditRecorder } from "@webcodex/gateway";
import type { ActionRecordInit } from "@webcodex/gateway";
import { cliPath, createTestDatabase, tempDir, until } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";
import { freePort } from "../support/ports.js";

const logger = createLogger({ service: "test", level: "silent" });

interface AuditProcess {
  child: ChildProcess;
  kill(): Promise<void>;
}

/** `webcodex serve audit` on a fixed port; resolves once /readyz answers 200. */
async function startAudit(port: number, postgresUrl: string): Promise<AuditProcess> {
  const child = spawn(process.execPath, [cliPath, "serve", "audit"], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      WEBCODEX_PORT: String(port),
      WEBCODEX_HOST: "127.0.0.1",
      WEBCODEX_POSTGRES_URL: postgresUrl,
      WEBCODEX_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`audit exited with ${child.exitCode}: ${stderr}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(500) })).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`audit not ready: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    kill: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      }),
  };
}

function effectfulRecord(tag: string): ActionRecordInit {
  return {
    callId: randomUUID(),
    clientId: "acme",
    subject: tag,
    tool: "edit_project_files",
    projectCanonicalId: "agent:acme:p",
    effect: "workspace_write",
    outcome: "success",
    stateChanged: true,
    startedAtUnixMs: BigInt(Date.now()),
    durationUs: 2000,
    stageDurationsUs: { normalization: 10, resolution: 100, dispatch: 1800 },
  };
}

async function countRows(db: Database, subject: string): Promise<{ rows: number; distinct: number }> {
  const r = await db.query<{ rows: string; distinct: string }>(
    `SELECT count(*) AS rows, count(DISTINCT call_id) AS distinct FROM audit.action_audit WHERE subject = $1`,
    [subject],
  );
  return { rows: Number(r.rows[0]?.rows), distinct: Number(r.rows[0]?.distinct) };
}

describe("audit durability across audit-service and gateway restarts", () => {
  let database: TestDatabase;
  let db: Database;
  let port: number;
  let audit: AuditProcess | undefined;
  let client: Client<typeof AuditService>;

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 2 });
    port = await freePort();
    audit = await startAudit(port, database.url);
    client = createClient(AuditService, createConnectTransport({ baseUrl: `http://127.0.0.1:${port}`, httpVersion: "2" }));
  });
  after(async () => {
    await audit?.kill();
    await db?.close();
    await database?.drop();
  });

  it("the audit service killed during 1,000 effectful calls and restarted: 1,000 rows, no duplicates", async () => {
    const spoolDir = tempDir("wcx-spool-");
    const recorder = createAuditRecorder(client, logger, { spoolDir, deliveryTimeoutMs: 1_000, retryMaxMs: 200 });
    const total = 1_000;
    let done = 0;
    let maxBacklog = 0;
    let restarted: Promise<void> | undefined;
    const worker = async (w: number) => {
      for (let i = w; i < total; i += 8) {
        await recorder.record(effectfulRecord("kill-run"), true);
        done += 1;
        maxBacklog = Math.max(maxBacklog, recorder.backlog());
        if (done === 300) await audit?.kill();
        if (done === 700)
          restarted = startAudit(port, database.url).then((a) => {
            audit = a;
          });
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
    assert.equal(done, total, "every call was acknowledged (stored or spooled)");
    await restarted;
    assert.ok(maxBacklog > 0, "some records were spooled while the audit service was down");
    await until("spool drained", async () => (await recorder.replay()) >= 0 && recorder.backlog() === 0, 30_000);
    assert.deepEqual(await countRows(db, "kill-run"), { rows: total, distinct: total });
    await recorder.close();
    assert.deepEqual(
      readdirSync(spoolDir).filter((f) => f.endsWith(".jsonl")),
      [],
      "delivered segments are deleted",
    );
  });

  it("a read-only call's record is stored before record() resolves (concurrent ones share a batch), so a gateway killed after answering loses no row", async () => {
    const recorder = createAuditRecorder(client, logger, { flushMs: 60_000 });
    const readOnly = () => ({ ...effectfulRecord("group-commit"), tool: "read_files", effect: "read_only", stateChanged: false });
    await recorder.record(readOnly(), false);
    assert.deepEqual(await countRows(db, "group-commit"), { rows: 1, distinct: 1 }, "stored when record() resolved, without waiting for a batch window");
    await Promise.all(Array.from({ length: 50 }, () => recorder.record(readOnly(), false)));
    assert.deepEqual(await countRows(db, "group-commit"), { rows: 51, distinct: 51 });
    assert.equal(recorder.backlog(), 0);
    await recorder.close();
  });

  it("with readsWaitForStore false (one process holds gateway and store), a read-only record() resolves when queued and its batch is stored after flushMs", async () => {
    const recorder = createAuditRecorder(client, logger, { flushMs: 300, readsWaitForStore: false });
    const readOnly = () => ({ ...effectfulRecord("batched-reads"), tool: "read_files", effect: "read_only", stateChanged: false });
    await Promise.all(Array.from({ length: 20 }, () => recorder.record(readOnly(), false)));
    assert.deepEqual(await countRows(db, "batched-reads"), { rows: 0, distinct: 0 }, "answered before the batch window closed");
    await until("batch stored", async () => (await countRows(db, "batched-reads")).rows === 20, 10_000);
    assert.deepEqual(await countRows(db, "batched-reads"), { rows: 20, distinct: 20 });
    // Effectful records are still answered only once stored.
    await recorder.record(effectfulRecord("batched-reads-effectful"), true);
    assert.deepEqual(await countRows(db, "batched-reads-effectful"), { rows: 1, distinct: 1 });
    await recorder.close();
  });

  it("with a spool, a read-only record() resolves once fsync'd there (no audit commit on the answer path), is shipped within shipMs, and a gateway stopped right after answering loses none", async () => {
    const spoolDir = tempDir("wcx-spool-");
    const readOnly = (tag: string) => ({ ...effectfulRecord(tag), tool: "read_files", effect: "read_only", stateChanged: false });
    // An audit service that answers nothing for 2 s and then fails: a read that waited for its commit would not be answered in time.
    const stalled = {
      recordActions: () => new Promise((_, reject) => setTimeout(() => reject(new Error("audit unavailable")), 2_000)),
    } as unknown as Client<typeof AuditService>;
    const first = createAuditRecorder(stalled, logger, { spoolDir, flushMs: 60_000, deliveryTimeoutMs: 60_000 });
    const t = performance.now();
    await Promise.all(Array.from({ length: 30 }, () => first.record(readOnly("spooled-reads"), false)));
    const answeredMs = performance.now() - t;
    const onDisk = readdirSync(spoolDir)
      .filter((f) => f.endsWith(".jsonl"))
      // (the open segment is preallocated: zeros after its records)
      .map((f) => readFileSync(join(spoolDir, f), "utf8").replace(/\0+$/, "").split("\n").filter(Boolean).length)
      .reduce((a, b) => a + b, 0);
    assert.equal(onDisk, 30, "every answered read is in the spool on disk");
    assert.deepEqual(await countRows(db, "spooled-reads"), { rows: 0, distinct: 0 }, "answered before anything was stored");
    process.stdout.write(`# 30 concurrent reads answered from the spool in ${Math.round(answeredMs)} ms\n`);
    assert.ok(answeredMs < 2_000, "answered without waiting for the audit service");
    // The gateway stops while the audit service is still unreachable: the rows stay in the spool.
    await first.close();
    assert.deepEqual(await countRows(db, "spooled-reads"), { rows: 0, distinct: 0 });
    const second = createAuditRecorder(client, logger, { spoolDir, flushMs: 20, shipMs: 20, retryMaxMs: 100 });
    await until("shipped on restart", async () => (await countRows(db, "spooled-reads")).rows === 30, 10_000);
    // And in steady state: shipped within shipMs, once.
    for (let i = 0; i < 10; i++) await second.record(readOnly("spooled-steady"), false);
    await until("shipped", async () => (await countRows(db, "spooled-steady")).rows === 10, 10_000);
    await until("spool empty", async () => second.backlog() === 0, 5_000);
    assert.deepEqual(await countRows(db, "spooled-reads"), { rows: 30, distinct: 30 });
    assert.deepEqual(await countRows(db, "spooled-steady"), { rows: 10, distinct: 10 });
    await second.close();
  });

  it("a gateway restart replays its spool (a torn last line is skipped) and read-only batches are spooled too", async () => {
    const spoolDir = tempDir("wcx-spool-");
    const dead = createClient(AuditService, createConnectTransport({ baseUrl: `http://127.0.0.1:${await freePort()}`, httpVersion: "2" }));
    const first = createAuditRecorder(dead, logger, { spoolDir, deliveryTimeoutMs: 500, retryMaxMs: 100 });
    for (let i = 0; i < 40; i++) await first.record(effectfulRecord("gateway-restart"), true);
    for (let i = 0; i < 10; i++)
      await first.record({ ...effectfulRecord("gateway-restart"), tool: "read_files", effect: "read_only", stateChanged: false }, false);
    await first.flush();
    assert.equal(first.backlog(), 50);
    await first.close();
    // A crash mid-append leaves a partial line behind.
    const segment =
      readdirSync(spoolDir)
        .filter((f) => f.endsWith(".jsonl"))
        .sort()
        .at(-1) ?? "";
    appendFileSync(join(spoolDir, segment), '{"callId":"torn-');
    assert.deepEqual(await countRows(db, "gateway-restart"), { rows: 0, distinct: 0 });

    const second = createAuditRecorder(client, logger, { spoolDir, retryMaxMs: 100 });
    await until("replay on start", async () => (await countRows(db, "gateway-restart")).rows === 50, 10_000);
    await until("backlog empty", async () => second.backlog() === 0, 5_000);
    // Replaying again (e.g. after a crash between delivery and deletion) adds nothing.
    await second.replay();
    assert.deepEqual(await countRows(db, "gateway-restart"), { rows: 50, distinct: 50 });
    await second.close();
  });

  it("an effectful record that can be neither stored nor spooled is not acknowledged", async () => {
    const spoolDir = tempDir("wcx-spool-");
    const dead = createClient(AuditService, createConnectTransport({ baseUrl: `http://127.0.0.1:${await freePort()}`, httpVersion: "2" }));
    const holder = createAuditRecorder(client, logger, { spoolDir });
    await holder.record(effectfulRecord("locked"), true);
    // A second gateway on the same spool directory cannot take it over.
    const intruder = createAuditRecorder(dead, logger, { spoolDir, deliveryTimeoutMs: 300 });
    await assert.rejects(intruder.record(effectfulRecord("locked"), true), (error: unknown) => error instanceof AuditNotDurableError);
    // A full spool refuses too.
    const fullDir = tempDir("wcx-spool-");
    const full = createAuditRecorder(dead, logger, { spoolDir: fullDir, deliveryTimeoutMs: 300, maxSpoolBytes: 10 });
    await assert.rejects(full.record(effectfulRecord("full"), true), (error: unknown) => error instanceof AuditNotDurableError);
    await Promise.all([holder.close(), intruder.close(), full.close()]);
  });
});
