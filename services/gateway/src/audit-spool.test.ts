import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Spool } from "./audit-spool.js";

const record = (callId: string) => ({ callId, clientId: "c", subject: "s", tool: "read_files", effect: "read_only", outcome: "success", startedAtUnixMs: 1n });
const jsonl = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort();

describe("audit spool", () => {
  it("appends into a preallocated segment (the file does not grow per append), seals it to its records, and leaves no empty segment at close", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-spool-unit-"));
    const spool = await Spool.open(dir, 1024 ** 2);
    await spool.append([record("a")]);
    await Promise.all([spool.append([record("b")]), spool.append([record("c")])]);
    const [open] = jsonl(dir);
    assert.ok(open);
    const size = statSync(join(dir, open)).size;
    assert.ok(size >= 64 * 1024, `preallocated (${size} bytes)`);
    assert.equal(spool.pending, 3);
    await spool.seal();
    assert.deepEqual(
      spool.segments().map((s) => s.records),
      [3],
    );
    const sealed = readFileSync(join(dir, open), "utf8");
    assert.ok(!sealed.includes("\0"), "a sealed segment is truncated to its records");
    assert.equal(sealed.split("\n").filter(Boolean).length, 3);
    const { records, torn } = await spool.read(spool.segments()[0]!);
    assert.deepEqual(
      records.map((r) => r.callId),
      ["a", "b", "c"],
    );
    assert.equal(torn, 0);
    // The next segment already exists; an append lands there.
    await spool.append([record("d")]);
    assert.equal(spool.pending, 4);
    await spool.remove(spool.segments()[0]!);
    await spool.close();
    const left = jsonl(dir);
    assert.equal(left.length, 1, "the sealed-at-close segment with d");
    assert.equal(readFileSync(join(dir, left[0]!), "utf8").split("\n").filter(Boolean).length, 1);
    const again = await Spool.open(dir, 1024 ** 2);
    assert.equal(again.pending, 1);
    await again.close();
  });

  it("reads a segment a crash left with preallocated zeros after its records, and a torn last record", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-spool-unit-"));
    const line = (id: string) =>
      `${JSON.stringify({ callId: id, clientId: "c", subject: "s", tool: "read_files", effect: "read_only", outcome: "success" })}\n`;
    const text = line("x") + line("y") + '{"callId":"tor';
    writeFileSync(join(dir, "segment-000000000007.jsonl"), Buffer.concat([Buffer.from(text), Buffer.alloc(4096)]));
    const spool = await Spool.open(dir, 1024 ** 2);
    assert.equal(spool.pending, 3, "counted by lines before the zeros (the torn one included until read)");
    const { records, torn } = await spool.read(spool.segments()[0]!);
    assert.deepEqual(
      records.map((r) => r.callId),
      ["x", "y"],
    );
    assert.equal(torn, 1);
    await spool.append([record("z")]);
    await spool.seal();
    assert.deepEqual(
      spool.segments().map((s) => s.seq),
      [7, 8],
      "new appends go to a later segment",
    );
    await spool.close();
  });
});

describe("audit spool: records delivered from memory", () => {
  it("seals the open segment when its preallocated space is used up, and deletes a sealed segment once all its records are delivered", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-spool-unit-"));
    const spool = await Spool.open(dir, 16 * 1024 ** 2);
    const first = await spool.append([record("a"), record("b")]);
    await spool.delivered(first, 1);
    assert.equal(spool.pending, 1);
    await spool.delivered(first, 1);
    assert.equal(spool.pending, 0);
    assert.equal(jsonl(dir).length, 1, "the open segment stays while it has room");
    // Fill past the preallocated space (256 KiB): it is sealed, and deleted once everything is delivered.
    const big = Array.from({ length: 800 }, (_, i) => ({ ...record(`r${i}`), tool: "x".repeat(400) }));
    const seq = await spool.append(big);
    assert.equal(seq, first);
    await spool.delivered(seq, big.length);
    assert.equal(spool.pending, 0);
    assert.deepEqual(spool.segments(), [], "nothing left to replay");
    const next = await spool.append([record("c")]);
    assert.ok(next > first, "appends go to the next segment");
    assert.equal(jsonl(dir).length, 1, "the full, delivered segment was deleted");
    // A sealed segment with undelivered records stays until they are delivered.
    await spool.seal();
    assert.equal(spool.pending, 1);
    await spool.delivered(next, 1);
    assert.deepEqual(spool.segments(), []);
    await spool.close();
    assert.deepEqual(jsonl(dir), []);
  });
});
