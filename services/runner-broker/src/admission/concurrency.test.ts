import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMemoryConcurrencyLimiter } from "./concurrency.js";

describe("per-project concurrency (in-process)", () => {
  it("admits up to the limit per project and frees slots on release or expiry", async () => {
    let t = 0;
    const l = createMemoryConcurrencyLimiter({ limit: 2, now: () => t });
    assert.ok((await l.tryAcquire("p", "c1", 100)).admitted);
    assert.ok((await l.tryAcquire("p", "c2", 100)).admitted);
    const refused = await l.tryAcquire("p", "c3", 100);
    assert.deepEqual(refused, { admitted: false, inFlight: 2 });
    assert.ok((await l.tryAcquire("q", "c3", 100)).admitted, "other projects are independent");
    await l.release("p", "c1");
    assert.ok((await l.tryAcquire("p", "c3", 100)).admitted);
    t = 101;
    assert.equal(await l.inFlight("p"), 0, "a leaked slot expires");
  });

  it("a slot lapses at its expiry exactly, a call already holding a slot is re-admitted at the limit, and releasing what is not held is harmless", async () => {
    let t = 1000;
    const l = createMemoryConcurrencyLimiter({ limit: 1, now: () => t });
    await l.release("nothing", "c0");
    assert.deepEqual(await l.tryAcquire("p", "c1", 50), { admitted: true, inFlight: 1 });
    assert.deepEqual(await l.tryAcquire("p", "c1", 50), { admitted: true, inFlight: 1 }, "the same call keeps its slot");
    assert.deepEqual(await l.tryAcquire("p", "c2", 50), { admitted: false, inFlight: 1 });
    t = 1049;
    assert.equal(await l.inFlight("p"), 1);
    t = 1050;
    assert.equal(await l.inFlight("p"), 0);
    assert.deepEqual(await l.tryAcquire("p", "c2", 50), { admitted: true, inFlight: 1 });
    await l.release("p", "c2");
    assert.equal(await l.inFlight("p"), 0);
    assert.equal(l.limit, 1);
  });
});
