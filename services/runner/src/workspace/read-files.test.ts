import assert from "node:assert/strict";
import { mkdir, symlink } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { readItem, tempWorkspace } from "./fixtures.js";

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

  it("cuts a single line longer than the budget at a character boundary and says so", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "é".repeat(100) + "\nnext\n" });
    const item = await readItem(ws, "a.txt", {}, 51);
    assert.equal(item.content, "é".repeat(25));
    assert.deepEqual([item.truncated, item.line_truncated, item.end_line, item.next_start_line], [true, true, 1, 2]);
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
