import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { omissionMarker, OutputCapture, utf8SafeEnd, utf8SafeStart } from "./output-capture.js";

describe("OutputCapture", () => {
  it("returns small output whole, with its exact byte count and nothing omitted", () => {
    const capture = new OutputCapture(8, 8);
    capture.write(Buffer.from("hello "));
    capture.write(Buffer.from("wörld"));
    assert.equal(capture.totalBytes, 12);
    assert.deepEqual(capture.render(), { text: "hello wörld", omittedBytes: 0 });
  });

  it("keeps head and tail of large output and counts the dropped middle exactly", () => {
    const capture = new OutputCapture(10, 10);
    for (let i = 0; i < 1000; i++) capture.write(Buffer.from(String(i % 10).repeat(7)));
    const { text, omittedBytes } = capture.render();
    assert.equal(capture.totalBytes, 7000);
    assert.equal(omittedBytes, 7000 - 20);
    assert.equal(text, "0000000111" + omissionMarker(6980) + "8889999999");
  });

  it("never splits a multi-byte character at either cut and still accounts for every byte", () => {
    const capture = new OutputCapture(16, 16);
    const text = "€".repeat(100); // 3 bytes each: both cuts land inside a character
    capture.write(Buffer.from(text));
    const rendered = capture.render();
    assert.ok(!rendered.text.includes("\uFFFD"));
    const [head = "", tail = ""] = rendered.text.split(omissionMarker(rendered.omittedBytes));
    assert.equal(head, "€".repeat(5));
    assert.equal(tail, "€".repeat(5));
    assert.equal(Buffer.byteLength(head) + Buffer.byteLength(tail) + rendered.omittedBytes, 300);
  });

  it("shows a character-aligned tail of the stream so far", () => {
    const capture = new OutputCapture(4, 64);
    capture.write(Buffer.from("ab€cd€"));
    assert.equal(capture.tail(5), "cd€");
    assert.equal(capture.tail(100), "ab€cd€");
    // A write that ends inside a character shows only the complete part.
    capture.write(Buffer.from("€").subarray(0, 2));
    assert.equal(capture.tail(100), "ab€cd€");
  });

  it("finds UTF-8 boundaries for 1- to 4-byte sequences", () => {
    const bytes = Buffer.from("a😀b");
    assert.equal(utf8SafeEnd(bytes, 1), 1);
    assert.equal(utf8SafeEnd(bytes, 3), 1);
    assert.equal(utf8SafeEnd(bytes, 5), 5);
    assert.equal(utf8SafeStart(bytes.subarray(2)), 3);
    assert.equal(utf8SafeStart(bytes.subarray(1)), 0);
  });
});
