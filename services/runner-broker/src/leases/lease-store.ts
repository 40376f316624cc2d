/**
 * Leases with fencing tokens, one per scope (a Project workspace). A lease has one owner and
 * a TTL; it is granted with a fence from a per-scope monotonic counter (set-if-absent and
 * INCR in one atomic step), renewed and released only by compare-and-set on (owner, fence).
 *
 * Durability of fences (see fence-hwm.ts): a freshly granted fence is written through to
 * the high-water mark with a strict compare-and-set before the grant is returned. When the
 * counter is missing (Redis lost its data) it is seeded from the mark first; when the mark
 * refuses a fence (the counter was behind), the grant is withdrawn, the counter re-seeded
 * and the grant retried. Renewals touch only the fast backend.
 *
 * The atomic primitives live in a LeaseBackend (Redis Lua scripts, or in-process maps);
 * the grant protocol above is written once, here.
 */
import type { FenceHighWaterMark } from "./fence-hwm.js";

export interface Lease {
  scope: string;
  owner: string;
  fence: number;
  /** Milliseconds left when observed. */
  ttlMs: number;
}

export type LeaseAcquisition =
  { held: true; lease: Lease; /** false when the owner already held it (renewed). */ fresh: boolean } | { held: false; holder: Lease };

export interface LeaseStore {
  /** Grants the scope's lease to `owner` unless another owner holds it; idempotent for the holder. */
  acquire(scope: string, owner: string, ttlMs: number): Promise<LeaseAcquisition>;
  /** Extends the lease iff (owner, fence) still holds it. */
  renew(scope: string, owner: string, fence: number, ttlMs: number): Promise<boolean>;
  /** Drops the lease iff (owner, fence) still holds it. */
  release(scope: string, owner: string, fence: number): Promise<boolean>;
  current(scope: string): Promise<Lease | undefined>;
  /** The highest fence the scope's counter has issued (0 when unknown). Never above a future grant. */
  highestFence(scope: string): Promise<number>;
}

export type GrantResult = { kind: "granted"; fence: number } | { kind: "mine"; fence: number } | { kind: "held"; holder: Lease } | { kind: "unseeded" };

/** Atomic per-scope primitives; each call is one atomic step in its backend. */
export interface LeaseBackend {
  /** If the lease exists: renew it for its owner ("mine") or report it ("held"). Else, unless the counter is missing, INCR it and set the lease. */
  grant(scope: string, owner: string, ttlMs: number): Promise<GrantResult>;
  /** Raises the counter to at least `floor` (creating it). Returns the counter. */
  seed(scope: string, floor: number): Promise<number>;
  renew(scope: string, owner: string, fence: number, ttlMs: number): Promise<boolean>;
  release(scope: string, owner: string, fence: number): Promise<boolean>;
  current(scope: string): Promise<Lease | undefined>;
  counter(scope: string): Promise<number>;
}

export class FenceUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "FenceUnavailableError";
  }
}

export function createLeaseStore(backend: LeaseBackend, hwm: FenceHighWaterMark, options: { maxAttempts?: number } = {}): LeaseStore {
  const maxAttempts = options.maxAttempts ?? 5;
  return {
    async acquire(scope, owner, ttlMs) {
      for (let attempt = 0; attempt < maxAttempts; attempt++) {
        const r = await backend.grant(scope, owner, ttlMs);
        switch (r.kind) {
          case "held":
            return { held: false, holder: r.holder };
          case "mine":
            return { held: true, fresh: false, lease: { scope, owner, fence: r.fence, ttlMs } };
          case "unseeded":
            await backend.seed(scope, await hwm.read(scope));
            continue;
          case "granted": {
            let recorded: boolean;
            try {
              recorded = await hwm.advance(scope, r.fence);
            } catch (error) {
              // A fence that is not durably recorded is never handed out.
              await backend.release(scope, owner, r.fence).catch(() => undefined);
              throw new FenceUnavailableError("fence high-water mark unavailable", { cause: error });
            }
            if (recorded) return { held: true, fresh: true, lease: { scope, owner, fence: r.fence, ttlMs } };
            // The counter was behind the durable mark: withdraw, re-seed above it, retry.
            await backend.release(scope, owner, r.fence);
            await backend.seed(scope, await hwm.read(scope));
            continue;
          }
        }
      }
      throw new FenceUnavailableError(`no fence could be granted for ${scope} after ${maxAttempts} attempts`);
    },
    renew: (scope, owner, fence, ttlMs) => backend.renew(scope, owner, fence, ttlMs),
    release: (scope, owner, fence) => backend.release(scope, owner, fence),
    current: (scope) => backend.current(scope),
    highestFence: (scope) => backend.counter(scope),
  };
}

/** In-process backend (embedded mode): same semantics as the Redis scripts, on a clock. */
export function createMemoryLeaseBackend(options: { now?: () => number } = {}): LeaseBackend {
  const now = options.now ?? Date.now;
  const counters = new Map<string, number>();
  const leases = new Map<string, { owner: string; fence: number; expiresAt: number }>();
  const live = (scope: string) => {
    const l = leases.get(scope);
    if (l && l.expiresAt <= now()) {
      leases.delete(scope);
      return undefined;
    }
    return l;
  };
  return {
    async grant(scope, owner, ttlMs) {
      const l = live(scope);
      if (l) {
        if (l.owner === owner) {
          l.expiresAt = now() + ttlMs;
          return { kind: "mine", fence: l.fence };
        }
        return { kind: "held", holder: { scope, owner: l.owner, fence: l.fence, ttlMs: l.expiresAt - now() } };
      }
      const c = counters.get(scope);
      if (c === undefined) return { kind: "unseeded" };
      const fence = c + 1;
      counters.set(scope, fence);
      leases.set(scope, { owner, fence, expiresAt: now() + ttlMs });
      return { kind: "granted", fence };
    },
    async seed(scope, floor) {
      const c = Math.max(counters.get(scope) ?? -1, floor);
      counters.set(scope, c);
      return c;
    },
    async renew(scope, owner, fence, ttlMs) {
      const l = live(scope);
      if (!l || l.owner !== owner || l.fence !== fence) return false;
      l.expiresAt = now() + ttlMs;
      return true;
    },
    async release(scope, owner, fence) {
      const l = live(scope);
      if (!l || l.owner !== owner || l.fence !== fence) return false;
      leases.delete(scope);
      return true;
    },
    async current(scope) {
      const l = live(scope);
      return l ? { scope, owner: l.owner, fence: l.fence, ttlMs: l.expiresAt - now() } : undefined;
    },
    async counter(scope) {
      return counters.get(scope) ?? 0;
    },
  };
}
