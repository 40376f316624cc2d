import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createLeaseStore, createMemoryLeaseBackend, FenceUnavailableError } from "./lease-store.js";
import { createMemoryFenceHighWaterMark } from "./fence-hwm.js";
import type { FenceHighWaterMark } from "./fence-hwm.js";

const clock = () => {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

describe("lease store (in-process backend)", () => {
  it("grants one owner at a time with increasing fences", async () => {
    const c = clock();
    const leases = createLeaseStore(createMemoryLeaseBackend({ now: c.now }), createMemoryFenceHighWaterMark());
    const a = await leases.acquire("p", "a", 100);
    assert.ok(a.held && a.fresh);
    const b = await leases.acquire("p", "b", 100);
    assert.ok(!b.held);
    assert.equal(b.holder.owner, "a");
    const again = await leases.acquire("p", "a", 100);
    assert.ok(again.held && !again.fresh && again.lease.fence === a.lease.fence, "the holder keeps its fence");
    c.advance(101);
    const b2 = await leases.acquire("p", "b", 100);
    assert.ok(b2.held && b2.lease.fence > a.lease.fence, "after expiry the next owner gets a higher fence");
  });

  it("renews and releases only by compare-and-set on owner and fence", async () => {
    const c = clock();
    const leases = createLeaseStore(createMemoryLeaseBackend({ now: c.now }), createMemoryFenceHighWaterMark());
    const a = await leases.acquire("p", "a", 100);
    assert.ok(a.held);
    assert.equal(await leases.renew("p", "b", a.lease.fence, 100), false, "another owner cannot renew");
    assert.equal(await leases.renew("p", "a", a.lease.fence + 1, 100), false, "a wrong fence cannot renew");
    c.advance(90);
    assert.equal(await leases.renew("p", "a", a.lease.fence, 100), true);
    c.advance(90);
    assert.equal((await leases.current("p"))?.owner, "a", "renewal extended the TTL");
    assert.equal(await leases.release("p", "b", a.lease.fence), false);
    assert.equal(await leases.release("p", "a", a.lease.fence), true);
    assert.equal(await leases.current("p"), undefined);
  });

  it("never hands out a fence the high-water mark has not recorded above every earlier one", async () => {
    const hwm = createMemoryFenceHighWaterMark();
    await hwm.advance("p", 41); // fences up to 41 were issued before the counter was lost
    const backend = createMemoryLeaseBackend();
    await backend.seed("p", 3); // a stale counter survived somewhere
    const leases = createLeaseStore(backend, hwm);
    const a = await leases.acquire("p", "a", 100);
    assert.ok(a.held);
    assert.equal(a.lease.fence, 42);
    assert.equal(await hwm.read("p"), 42);
  });

  it("seeds a missing counter from the high-water mark", async () => {
    const hwm = createMemoryFenceHighWaterMark();
    await hwm.advance("p", 7);
    const leases = createLeaseStore(createMemoryLeaseBackend(), hwm);
    const a = await leases.acquire("p", "a", 100);
    assert.ok(a.held && a.lease.fence === 8);
    assert.equal(await leases.highestFence("p"), 8);
  });

  it("withdraws a grant whose fence could not be recorded", async () => {
    const down: FenceHighWaterMark = {
      read: async () => 0,
      advance: async () => {
        throw new Error("postgres down");
      },
    };
    const leases = createLeaseStore(createMemoryLeaseBackend(), down);
    await assert.rejects(leases.acquire("p", "a", 100), FenceUnavailableError);
    assert.equal(await leases.current("p"), undefined, "no lease is left behind");
  });
});
