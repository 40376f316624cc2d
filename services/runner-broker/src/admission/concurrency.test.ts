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
});
