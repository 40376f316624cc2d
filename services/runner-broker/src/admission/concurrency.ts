/**
 * Per-Project concurrency admission: at most `limit` calls in flight per Project across all
 * broker replicas. A slot is a member of a per-Project sorted set scored by its expiry, so a
 * broker that dies mid-call cannot leak a slot for longer than the slot TTL (the dispatch
 * deadline plus a margin). Over the limit, a call is refused before dispatch (rate_limited).
 */
import type { Redis } from "@webcodex/platform";

export type SlotAdmission = { admitted: true; inFlight: number } | { admitted: false; inFlight: number };

export interface ConcurrencyLimiter {
  readonly limit: number;
  tryAcquire(scope: string, callId: string, ttlMs: number): Promise<SlotAdmission>;
  release(scope: string, callId: string): Promise<void>;
  inFlight(scope: string): Promise<number>;
}

export function createMemoryConcurrencyLimiter(options: { limit: number; now?: () => number }): ConcurrencyLimiter {
  const now = options.now ?? Date.now;
  const slots = new Map<string, Map<string, number>>();
  const live = (scope: string) => {
    const s = slots.get(scope);
    if (!s) return undefined;
    const t = now();
    for (const [id, exp] of s) if (exp <= t) s.delete(id);
    if (s.size === 0) slots.delete(scope);
    return s.size ? s : undefined;
  };
  return {
    limit: options.limit,
    async tryAcquire(scope, callId, ttlMs) {
      const s = live(scope) ?? new Map<string, number>();
      if (s.size >= options.limit && !s.has(callId)) return { admitted: false, inFlight: s.size };
      s.set(callId, now() + ttlMs);
      slots.set(scope, s);
      return { admitted: true, inFlight: s.size };
    },
    async release(scope, callId) {
      live(scope)?.delete(callId);
    },
    async inFlight(scope) {
      return live(scope)?.size ?? 0;
    },
  };
}

const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[1]) and not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return {0, n} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {1, redis.call('ZCARD', KEYS[1])}
`;

const COUNT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`;

type Scripted = Redis & {
  wcxSlotAcquire(key: string, limit: number, callId: string, ttl: number): Promise<[number, number]>;
  wcxSlotCount(key: string): Promise<number>;
};

export function createRedisConcurrencyLimiter(redis: Redis, options: { limit: number; prefix?: string }): ConcurrencyLimiter {
  const p = options.prefix ?? "webcodex:broker:";
  const r = redis as Scripted;
  if (typeof r.wcxSlotAcquire !== "function") {
    redis.defineCommand("wcxSlotAcquire", { numberOfKeys: 1, lua: ACQUIRE });
    redis.defineCommand("wcxSlotCount", { numberOfKeys: 1, lua: COUNT });
  }
  const key = (scope: string) => `${p}inflight:{${scope}}`;
  return {
    limit: options.limit,
    async tryAcquire(scope, callId, ttlMs) {
      const [ok, n] = await r.wcxSlotAcquire(key(scope), options.limit, callId, Math.ceil(ttlMs));
      return { admitted: ok === 1, inFlight: Number(n) };
    },
    async release(scope, callId) {
      await redis.zrem(key(scope), callId);
    },
    async inFlight(scope) {
      return Number(await r.wcxSlotCount(key(scope)));
    },
  };
}
