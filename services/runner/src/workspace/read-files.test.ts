import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, symlink, truncate, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { readItem, tempWorkspace } from "./workspace.test-support.js";
import { createPathPolicy } from "./path-policy.js";
import { DEFAULT_READ_LIMITS, MAX_READ_FILE_BYTES, readFiles } from "./read-files.js";
import { detectLineEnding, LineIndex, readRevision } from "./text-bytes.js";
import type { ReadTextItem } from "./types.js";

const numbered = (count: number): string => Array.from({ length: count }, (_, i) => `line ${i + 1}\n`).join("");

describe("read_files", () => {
  it("returns items in request order with per-item failures", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n", "b.txt": "b\n" });
    await mkdir(path.join(root, "dir"));
    const { items } = await ws.readFiles({ files: [{ path: "b.txt" }, { path: "missing.txt" }, { path: "dir" }, { path: "a.txt" }, { path: "../x" }] });
    assert.deepEqual(
      items.map((item) => (item.success ? item.path : `${item.path}:${item.error.reason_code}`)),
      ["b.txt", "missing.txt:path_not_found", "dir:not_a_file", "a.txt", "../x:path_outside_project"],
    );
  });

  it("small files (read synchronously) and large ones (read in chunks) give the same facts", async () => {
    const line = "é€😀 text\r\n";
    const small = line.repeat(100);
    const large = line.repeat(30_000); // ~480 KiB: above the synchronous-read size
    const { ws } = await tempWorkspace({ "small.txt": small, "large.txt": large });
    const budget = 1_048_576;
    for (const [name, text] of [
      ["small.txt", small],
      ["large.txt", large],
    ] as const) {
      const item = await readItem(ws, name, {}, budget);
      assert.equal(item.content, text, name);
      assert.equal(item.read_revision, readRevision(Buffer.from(text)), name);
      assert.deepEqual([item.total_lines, item.line_ending, item.truncated], [text.split("\r\n").length - 1, "crlf", false], name);
    }
    const tail = await readItem(ws, "large.txt", { start_line: 29_999 }, budget);
    assert.equal(tail.content, line.repeat(2));
  });

  it("a FIFO is refused at once as not_a_file: opening it never waits for a writer", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    execFileSync("mkfifo", [path.join(root, "pipe")]);
    const started = performance.now();
    const { items } = await ws.readFiles({ files: [{ path: "pipe" }, { path: "a.txt" }] });
    assert.ok(performance.now() - started < 2_000);
    assert.equal(items[0]?.success === false && items[0].error.reason_code, "not_a_file");
    assert.equal(items[1]?.success, true);
  });

  it("a budget inside stray UTF-8 continuation bytes returns through the first real character and continues right after it", async () => {
    const { root, ws } = await tempWorkspace({});
    await writeFile(path.join(root, "latin1.txt"), Buffer.from([0x80, 0x80, 0x80, 0x41, 0x0a, 0x42, 0x0a]));
    const first = await readItem(ws, "latin1.txt", {}, 3);
    assert.ok(!first.content.includes("B"), JSON.stringify(first));
    assert.equal(first.content.endsWith("A"), true);
    assert.deepEqual([first.truncated, first.next_start_line, first.next_start_column, first.rest_of_line_skipped], [true, 1, 2, undefined]);
    const rest = await readItem(ws, "latin1.txt", { start_line: 1, start_column: 2 }, 64);
    assert.equal(rest.content, "\nB\n");
  });

  it("a budget smaller than the only character returns it whole, with no continuation past the end", async () => {
    const { ws } = await tempWorkspace({ "e.txt": "é" });
    const item = await readItem(ws, "e.txt", {}, 1);
    assert.deepEqual([item.content, item.truncated, item.next_start_line, item.next_start_column], ["é", false, undefined, undefined]);
  });

  it("reads a line range with 1-based inclusive lines and a whole-file revision", async () => {
    const { ws } = await tempWorkspace({ "a.txt": numbered(10) });
    const whole = await readItem(ws, "a.txt");
    const part = await readItem(ws, "a.txt", { start_line: 3, end_line: 4 });
    assert.equal(part.content, "line 3\nline 4\n");
    assert.deepEqual([part.start_line, part.end_line, part.total_lines, part.truncated], [3, 4, 10, false]);
    assert.equal(part.read_revision, whole.read_revision);
    assert.match(part.read_revision, /^r_[0-9a-f]{16}$/);
    assert.equal("next_start_line" in part, false);
  });

  it("clamps a range past the end of the file and returns the effective lines", async () => {
    const { ws } = await tempWorkspace({ "a.txt": numbered(3) });
    const tail = await readItem(ws, "a.txt", { start_line: 2, end_line: 99 });
    assert.deepEqual([tail.content, tail.start_line, tail.end_line], ["line 2\nline 3\n", 2, 3]);
    const beyond = await readItem(ws, "a.txt", { start_line: 50 });
    assert.deepEqual([beyond.content, beyond.start_line, beyond.end_line, beyond.total_lines], ["", 4, 3, 3]);
  });

  it("truncates at a whole line under max_bytes_per_file and next_start_line returns the rest", async () => {
    const text = numbered(100);
    const { ws } = await tempWorkspace({ "a.txt": text });
    let content = "";
    let start = 1;
    let calls = 0;
    for (;;) {
      const item = await readItem(ws, "a.txt", { start_line: start }, 100);
      calls++;
      assert.ok(Buffer.byteLength(item.content) <= 100);
      assert.ok(item.content.endsWith("\n"));
      content += item.content;
      if (!item.truncated) break;
      assert.equal(item.next_start_line, item.end_line + 1);
      start = item.next_start_line as number;
    }
    assert.equal(content, text);
    assert.ok(calls > 5);
  });

  it("cuts a single line longer than the budget at a character boundary and continues at the next column", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "é".repeat(100) + "\nnext\n" });
    const item = await readItem(ws, "a.txt", {}, 51);
    assert.equal(item.content, "é".repeat(25));
    assert.deepEqual([item.truncated, item.line_truncated, item.end_line, item.next_start_line, item.next_start_column], [true, true, 1, 1, 26]);
    assert.equal(item.truncated_by, "max_bytes_per_file");
    const rest = await readItem(ws, "a.txt", { start_line: 1, start_column: 26 }, 1000);
    assert.equal(rest.content, "é".repeat(75) + "\nnext\n", "the rest of the long line is not skipped");
    assert.deepEqual([rest.start_line, rest.start_column, rest.end_line, rest.truncated], [1, 26, 2, false]);
  });

  it("an over-long last line of the range still says how to continue", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "short\n" + "x".repeat(300) + "\nafter\n" });
    const item = await readItem(ws, "a.txt", { start_line: 2, end_line: 2 }, 100);
    assert.deepEqual([item.content.length, item.truncated, item.next_start_line, item.next_start_column], [100, true, 2, 101]);
    const rest = await readItem(ws, "a.txt", { start_line: 2, start_column: 101, end_line: 2 }, 1000);
    assert.deepEqual([rest.content, rest.end_line, rest.truncated], ["x".repeat(200) + "\n", 2, false]);
  });

  it("continuing with next_start_line and next_start_column reassembles the file exactly", async () => {
    const text = ["tiny", "ü".repeat(40) + "✓".repeat(30), "", "mid 😀 line\r", "z".repeat(90)].join("\n") + "\nlast without newline";
    const { ws } = await tempWorkspace({ "a.txt": text });
    for (const budget of [1, 2, 3, 7, 33, 64]) {
      let content = "";
      let start: { start_line: number; start_column?: number } = { start_line: 1 };
      for (let calls = 0; ; calls++) {
        assert.ok(calls < 2000, "continuation makes progress");
        const item = await readItem(ws, "a.txt", start, budget);
        content += item.content;
        if (!item.truncated) break;
        assert.ok(item.next_start_line !== undefined);
        start = { start_line: item.next_start_line, ...(item.next_start_column === undefined ? {} : { start_column: item.next_start_column }) };
      }
      assert.equal(content, text, `budget ${budget}`);
    }
  });

  it("returns at least one whole character when the budget is smaller than it", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "😀😀\n" });
    const item = await readItem(ws, "a.txt", {}, 1);
    assert.deepEqual([item.content, item.next_start_line, item.next_start_column], ["😀", 1, 2]);
  });

  it("a start_column past the end of its line is invalid_value", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "abc\nde" });
    const ok = await readItem(ws, "a.txt", { start_line: 1, start_column: 4 });
    assert.equal(ok.content, "\nde", "the line ending is the line's last column");
    for (const spec of [
      { start_line: 1, start_column: 5 },
      { start_line: 2, start_column: 3 },
      { start_line: 9, start_column: 2 },
    ]) {
      const [item] = (await ws.readFiles({ files: [{ path: "a.txt", ...spec }] })).items;
      assert.ok(item?.success === false, JSON.stringify(spec));
      assert.equal(item.error.detail_code, "start_column_past_line_end");
    }
  });

  it("spends the batch budget in request order; a cut item continues exactly", async () => {
    const { root } = await tempWorkspace({ "a.txt": "a".repeat(59) + "\n", "b.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "c.txt": "c\n" });
    const resolver = await createPathPolicy(root).open();
    const limits = { ...DEFAULT_READ_LIMITS, maxBatchBytes: 66 };
    const { items } = await readFiles(resolver, { files: [{ path: "a.txt" }, { path: "b.txt" }, { path: "c.txt" }] }, limits);
    const [a, b, c] = items as ReadTextItem[];
    assert.deepEqual([a?.content.length, a?.truncated], [60, false]);
    assert.deepEqual([b?.content, b?.truncated, b?.truncated_by, b?.end_line, b?.next_start_line], ["1\n2\n3\n", true, "batch_budget", 3, 4]);
    assert.deepEqual([c?.content, c?.truncated, c?.truncated_by, c?.end_line, c?.next_start_line], ["", true, "batch_budget", 0, 1]);
    const again = await readFiles(
      resolver,
      {
        files: [
          { path: "b.txt", start_line: 4 },
          { path: "c.txt", start_line: 1 },
        ],
      },
      limits,
    );
    assert.deepEqual(
      again.items.map((i) => ("content" in i ? i.content : "")),
      ["4\n5\n6\n7\n8\n9\n", "c\n"],
    );
  });

  it("streams the file in chunks with the same answer as one read", async () => {
    const text = Buffer.concat([Buffer.from("α\r\nbeta\n\n" + "long ".repeat(30) + "\r\n"), Buffer.from("ünïcödé\nend")]);
    const { root } = await tempWorkspace({ "a.txt": text, "bin.dat": Buffer.concat([Buffer.from("text"), Buffer.from([0, 1])]) });
    const resolver = await createPathPolicy(root).open();
    const specs = [{}, { start_line: 2 }, { start_line: 3, end_line: 4 }, { start_line: 4, start_column: 7 }, { start_line: 6 }, { start_line: 7 }];
    for (const budget of [1, 5, 16, 1000]) {
      for (const chunkBytes of [1, 2, 3, 7]) {
        const request = { files: [...specs.map((spec) => ({ path: "a.txt", ...spec })), { path: "bin.dat" }], max_bytes_per_file: budget };
        const chunked = await readFiles(resolver, request, { ...DEFAULT_READ_LIMITS, chunkBytes });
        const whole = await readFiles(resolver, request);
        assert.deepEqual(chunked, whole, `budget ${budget}, chunks of ${chunkBytes}`);
      }
    }
    const whole = (await readFiles(resolver, { files: [{ path: "a.txt" }] })).items[0] as ReadTextItem;
    assert.equal(whole.read_revision, readRevision(text));
    assert.equal(whole.total_lines, new LineIndex(text).totalLines);
    assert.equal(whole.line_ending, detectLineEnding(text));
  });

  it("refuses a file above the size cap with file_too_large, without reading it", async () => {
    const { root, ws } = await tempWorkspace();
    // Sparse: the size is real, the disk blocks are not.
    await truncate(path.join(root, "huge.log"), MAX_READ_FILE_BYTES + 1).catch(async () => {
      await writeFile(path.join(root, "huge.log"), "");
      await truncate(path.join(root, "huge.log"), MAX_READ_FILE_BYTES + 1);
    });
    const started = Date.now();
    const [item] = (await ws.readFiles({ files: [{ path: "huge.log" }] })).items;
    assert.ok(item?.success === false);
    assert.equal(item.error.reason_code, "file_too_large");
    assert.deepEqual(item.error.evidence, { path: "huge.log", size_bytes: MAX_READ_FILE_BYTES + 1, max_bytes: MAX_READ_FILE_BYTES });
    assert.match(item.error.message ?? "", /run_process/);
    assert.ok(Date.now() - started < 2_000, "refused from its size, not after reading it");
  });

  it("preserves CRLF in content and reports the file's line ending", async () => {
    const { ws } = await tempWorkspace({ "crlf.txt": "a\r\nb\r\n", "mixed.txt": "a\r\nb\n", "none.txt": "abc", "lf.txt": "a\n" });
    const crlf = await readItem(ws, "crlf.txt");
    assert.equal(crlf.content, "a\r\nb\r\n");
    assert.equal(crlf.line_ending, "crlf");
    assert.equal((await readItem(ws, "mixed.txt")).line_ending, "mixed");
    assert.equal((await readItem(ws, "none.txt")).line_ending, "none");
    assert.equal((await readItem(ws, "none.txt")).total_lines, 1);
    assert.equal((await readItem(ws, "lf.txt")).line_ending, "lf");
  });

  it("reports a file with a NUL byte as binary without content", async () => {
    const { ws } = await tempWorkspace({ "img.bin": Buffer.from([0x89, 0x50, 0x00, 0x01, 0x02]) });
    const [item] = (await ws.readFiles({ files: [{ path: "img.bin" }] })).items;
    assert.ok(item?.success === true && "binary" in item);
    assert.equal(item.size_bytes, 5);
    assert.match(item.read_revision, /^r_/);
    assert.equal("content" in item, false);
  });

  it("refuses a symlink that points outside the root", async () => {
    const { root, ws } = await tempWorkspace();
    const outside = (await tempWorkspace({ "secret.txt": "s\n" })).root;
    await symlink(path.join(outside, "secret.txt"), path.join(root, "leak.txt"));
    const [item] = (await ws.readFiles({ files: [{ path: "leak.txt" }] })).items;
    assert.ok(item?.success === false);
    assert.equal(item.error.reason_code, "path_outside_project");
    assert.equal(item.error.failure_stage, "resolution");
  });

  it("refuses absolute paths even when they point inside the root", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    const [item] = (await ws.readFiles({ files: [{ path: path.join(root, "a.txt") }] })).items;
    assert.ok(item?.success === false);
    assert.equal(item.error.reason_code, "path_outside_project");
  });
});
