import { test } from "node:test";
import assert from "node:assert/strict";
import { createMetrics, createWorkMetrics } from "@webcodex/platform";
import { createLeaseStore, createMemoryLeaseBackend } from "./lease-store.js";
import type { LeaseStore } from "./lease-store.js";
import { createMemoryFenceHighWaterMark } from "./fence-hwm.js";
import { createMeteredLeaseStore } from "./metered-lease-store.js";

const count = (text: string, op: string, result: string) =>
  Number(new RegExp(`webcodex_lease_operations_total\\{op="${op}",result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);

test("lease operations are counted by operation and result; a backend error is counted and rethrown", async () => {
  const metrics = createMetrics();
  const leases = createMeteredLeaseStore(createLeaseStore(createMemoryLeaseBackend(), createMemoryFenceHighWaterMark()), createWorkMetrics(metrics));
  const first = await leases.acquire("agent:acme:p", "runner-a", 10_000);
  assert.ok(first.held);
  assert.equal((await leases.acquire("agent:acme:p", "runner-b", 10_000)).held, false, "held by runner-a");
  assert.equal(await leases.renew("agent:acme:p", "runner-a", first.lease.fence, 10_000), true);
  assert.equal(await leases.renew("agent:acme:p", "runner-b", first.lease.fence, 10_000), false);
  assert.equal(await leases.release("agent:acme:p", "runner-a", first.lease.fence), true);
  const text = metrics.render();
  assert.deepEqual(
    [
      count(text, "acquire", "ok"),
      count(text, "acquire", "rejected"),
      count(text, "renew", "ok"),
      count(text, "renew", "rejected"),
      count(text, "release", "ok"),
    ],
    [1, 1, 1, 1, 1],
  );

  const failing = { acquire: () => Promise.reject(new Error("redis down")) } as unknown as LeaseStore;
  const meteredFailing = createMeteredLeaseStore(failing, createWorkMetrics(metrics));
  await assert.rejects(meteredFailing.acquire("s", "o", 1), /redis down/);
  assert.equal(count(metrics.render(), "acquire", "error"), 1);
});
