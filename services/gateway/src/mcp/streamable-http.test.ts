import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { JSON_LIMITS, JsonShapeScanner, jsonShapeProblem, MAX_BATCH_MESSAGES } from "./streamable-http.js";

const batchExceeds = (body: Buffer, limit: number) => jsonShapeProblem(body, { ...JSON_LIMITS, batch: limit })?.kind === "batch";

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

describe("request shape bounds", () => {
  it("refuses a body nested deeper than the limit, counting only brackets outside strings", () => {
    const deep = (n: number) => Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"x","params":${"[".repeat(n)}${"]".repeat(n)}}`);
    assert.equal(jsonShapeProblem(deep(JSON_LIMITS.depth - 1)), undefined);
    assert.deepEqual(jsonShapeProblem(deep(JSON_LIMITS.depth)), { kind: "depth", limit: JSON_LIMITS.depth });
    const quoted = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { s: "[{".repeat(10_000) } }));
    assert.equal(jsonShapeProblem(quoted), undefined, "brackets inside a string are text");
  });

  it("decides a 4M-deep body on its first bytes", () => {
    const body = Buffer.alloc(4 * 1024 * 1024, "[");
    assert.equal(jsonShapeProblem(body)?.kind, "depth");
    assert.equal(jsonShapeProblem(body.subarray(0, 100))?.kind, "depth");
  });

  it("refuses an object of 400,000 keys, and keeps a request with many members inside one long string", () => {
    const keys = Buffer.from(
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{${Array.from({ length: 400_000 }, (_, k) => `"k${k}":${k}`).join(",")}}}}`,
    );
    assert.deepEqual(jsonShapeProblem(keys), { kind: "values", limit: JSON_LIMITS.values });
    const text = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { content: "a,b:c,".repeat(500_000) } }));
    assert.equal(jsonShapeProblem(text), undefined);
  });

  it("an escaped quote does not end a string", () => {
    const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { s: '\\"[[[[' + "[".repeat(100) } }));
    assert.equal(jsonShapeProblem(body), undefined);
  });
});

describe("request shape bounds, chunk by chunk", () => {
  it("gives the same answer whatever the chunking, strings and escapes split across chunks included", () => {
    const bodies = [
      Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { s: '\\"[[[' + "[".repeat(80), t: [1, 2, 3] } })),
      Buffer.from(`{"a":${"[".repeat(70)}`),
      Buffer.from(`[${Array.from({ length: 40 }, () => '{"jsonrpc":"2.0","id":1,"method":"ping"}').join(",")}]`),
    ];
    for (const body of bodies) {
      const whole = jsonShapeProblem(body);
      for (const size of [1, 2, 3, 7, 64]) {
        const scanner = new JsonShapeScanner();
        let found;
        for (let i = 0; i < body.length && !found; i += size) found = scanner.feed(body.subarray(i, i + size));
        assert.deepEqual(found, whole, `chunks of ${size}`);
      }
    }
  });
});
