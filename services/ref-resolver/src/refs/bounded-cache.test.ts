import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createBoundedCache } from "./bounded-cache.js";

describe("bounded cache", () => {
  it("evicts the oldest entry at its size bound", () => {
    const cache = createBoundedCache<number>({ maxEntries: 2 });
    cache.set("a", 1);
    cache.set("b", 2);
    cache.set("c", 3);
    assert.equal(cache.get("a"), undefined);
    assert.equal(cache.get("b"), 2);
    assert.equal(cache.get("c"), 3);
    assert.equal(cache.size, 2);
  });

  it("expires entries after the ttl", () => {
    let t = 0;
    const cache = createBoundedCache<string>({ maxEntries: 10, ttlMs: 100, now: () => t });
    cache.set("k", "v");
    t = 99;
    assert.equal(cache.get("k"), "v");
    t = 100;
    assert.equal(cache.get("k"), undefined);
  });

  it("stores nothing when disabled by size or ttl", () => {
    for (const options of [{ maxEntries: 0 }, { maxEntries: 10, ttlMs: 0 }]) {
      const cache = createBoundedCache<number>(options);
      cache.set("k", 1);
      assert.equal(cache.get("k"), undefined);
      assert.equal(cache.size, 0);
    }
  });
});
