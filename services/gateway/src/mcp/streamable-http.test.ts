import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { batchExceeds, MAX_BATCH_MESSAGES } from "./streamable-http.js";

const batchOf = (n: number, extra = "") =>
  Buffer.from(JSON.stringify(Array.from({ length: n }, (_, id) => ({ jsonrpc: "2.0", id, method: "tools/list", params: { note: extra } }))));

describe("batch cap", () => {
  it("counts top-level batch elements, not commas inside strings, objects or arrays", () => {
    assert.equal(batchExceeds(batchOf(MAX_BATCH_MESSAGES, 'a,b,[c,d],{e,f}\\","'), MAX_BATCH_MESSAGES), false);
    assert.equal(batchExceeds(batchOf(MAX_BATCH_MESSAGES + 1), MAX_BATCH_MESSAGES), true);
    assert.equal(batchExceeds(Buffer.from(`  \n[${"1,".repeat(40)}1]`), MAX_BATCH_MESSAGES), true);
    assert.equal(
      batchExceeds(Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { a: Array(100).fill(1) } })), MAX_BATCH_MESSAGES),
      false,
    );
  });

  it("decides on a 160,000-message batch without reading it all", () => {
    const huge = batchOf(160_000);
    assert.equal(batchExceeds(huge, MAX_BATCH_MESSAGES), true);
    // The first few KiB decide it: the answer is the same on a prefix of the body.
    assert.equal(batchExceeds(huge.subarray(0, 4096), MAX_BATCH_MESSAGES), true);
  });
});
