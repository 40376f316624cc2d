/**
 * A LeaseStore that reports every acquire, renew and release to the platform's work metrics
 * (`webcodex_lease_operations_total{op,result}`): `ok`, `rejected` (held by another owner, or
 * the caller's fence no longer holds) or `error` (the backend failed; the error is rethrown).
 * Reads (`current`, `highestFence`) are not counted.
 */
import type { WorkMetrics } from "@webcodex/platform";
import type { LeaseStore } from "./lease-store.js";

type LeaseOperation = "acquire" | "renew" | "release";

export function createMeteredLeaseStore(store: LeaseStore, work: WorkMetrics): LeaseStore {
  const metered = async <T>(op: LeaseOperation, run: () => Promise<T>, accepted: (result: T) => boolean): Promise<T> => {
    let result: T;
    try {
      result = await run();
    } catch (error) {
      work.leaseOperation(op, "error");
      throw error;
    }
    work.leaseOperation(op, accepted(result) ? "ok" : "rejected");
    return result;
  };
  return {
    acquire: (scope, owner, ttlMs) =>
      metered(
        "acquire",
        () => store.acquire(scope, owner, ttlMs),
        (a) => a.held,
      ),
    renew: (scope, owner, fence, ttlMs) =>
      metered(
        "renew",
        () => store.renew(scope, owner, fence, ttlMs),
        (held) => held,
      ),
    release: (scope, owner, fence) =>
      metered(
        "release",
        () => store.release(scope, owner, fence),
        (released) => released,
      ),
    current: (scope) => store.current(scope),
    highestFence: (scope) => store.highestFence(scope),
  };
}
