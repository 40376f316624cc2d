import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createCoalescer } from "./coalescer.js";

const tick = () => new Promise<void>((r) => setImmediate(r));

describe("coalescer", () => {
  it("batches requests that arrive while a flush for the same key is in flight", async () => {
    const flushes: number[][] = [];
    const coalescer = createCoalescer<number, number[]>(
      async (_key, items) => {
        flushes.push(items);
        await tick();
        return items;
      },
      { maxBatch: 100 },
    );
    const results = await Promise.all([1, 2, 3, 4, 5].map((i) => coalescer.submit("k", [i])));
    assert.deepEqual(flushes, [[1], [2, 3, 4, 5]]);
    assert.deepEqual(results[4], [2, 3, 4, 5]);
  });

  it("keeps keys independent and respects the batch bound", async () => {
    const flushes: Array<[string, number[]]> = [];
    const coalescer = createCoalescer<number, void>(
      async (key, items) => {
        flushes.push([key, items]);
        await tick();
      },
      { maxBatch: 2 },
    );
    await Promise.all([
      coalescer.submit("a", [1]),
      coalescer.submit("b", [1]),
      coalescer.submit("a", [2]),
      coalescer.submit("a", [3]),
      coalescer.submit("a", [4]),
    ]);
    assert.deepEqual(
      flushes.filter(([k]) => k === "a").map(([, i]) => i),
      [[1], [2, 3], [4]],
    );
    assert.deepEqual(
      flushes.filter(([k]) => k === "b").map(([, i]) => i),
      [[1]],
    );
  });

  it("isolates a failing request from the others in its batch", async () => {
    const coalescer = createCoalescer<number, string>(
      async (_key, items) => {
        await tick();
        if (items.includes(13)) throw new Error("bad item");
        return items.join(",");
      },
      { maxBatch: 100 },
    );
    const outcomes = await Promise.allSettled([
      coalescer.submit("k", [1]),
      coalescer.submit("k", [2]),
      coalescer.submit("k", [13]),
      coalescer.submit("k", [4]),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ["fulfilled", "fulfilled", "rejected", "fulfilled"],
    );
  });
});
