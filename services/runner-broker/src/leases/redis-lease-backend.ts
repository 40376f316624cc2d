/**
 * Redis LeaseBackend: each primitive is one Lua script, so set-if-absent + INCR (grant) and
 * compare-and-set on (owner, fence) (renew, release) are atomic. Keys of one scope share a
 * hash tag, so the scripts also run on Redis Cluster:
 *   <prefix>lease:{<scope>}  "<fence>|<owner>" with PX ttl
 *   <prefix>fence:{<scope>}  the scope's fence counter (no TTL)
 */
import type { Redis } from "@webcodex/platform";
import type { GrantResult, Lease, LeaseBackend } from "./lease-store.js";

const GRANT = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, '|', 1, true)
  local fence = string.sub(cur, 1, sep - 1)
  local owner = string.sub(cur, sep + 1)
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {'mine', fence}
  end
  return {'held', fence, tostring(redis.call('PTTL', KEYS[1])), owner}
end
if redis.call('EXISTS', KEYS[2]) == 0 then return {'unseeded'} end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. '|' .. ARGV[1], 'PX', ARGV[2])
return {'granted', tostring(fence)}
`;

const SEED = `
local c = redis.call('GET', KEYS[1])
if (not c) or tonumber(c) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return c
`;

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`;

type Scripted = Redis & {
  wcxLeaseGrant(lease: string, counter: string, owner: string, ttl: number): Promise<string[]>;
  wcxLeaseSeed(counter: string, floor: number): Promise<string>;
  wcxLeaseRenew(lease: string, value: string, ttl: number): Promise<number>;
  wcxLeaseRelease(lease: string, value: string): Promise<number>;
};

/** Registers the scripts once per client (ioredis caches them by SHA and falls back to EVAL). */
function scripted(redis: Redis): Scripted {
  const r = redis as Scripted;
  if (typeof r.wcxLeaseGrant !== "function") {
    redis.defineCommand("wcxLeaseGrant", { numberOfKeys: 2, lua: GRANT });
    redis.defineCommand("wcxLeaseSeed", { numberOfKeys: 1, lua: SEED });
    redis.defineCommand("wcxLeaseRenew", { numberOfKeys: 1, lua: RENEW });
    redis.defineCommand("wcxLeaseRelease", { numberOfKeys: 1, lua: RELEASE });
  }
  return r;
}

const parse = (scope: string, value: string, ttlMs: number): Lease => {
  const sep = value.indexOf("|");
  return { scope, fence: Number(value.slice(0, sep)), owner: value.slice(sep + 1), ttlMs };
};

export function createRedisLeaseBackend(redis: Redis, options: { prefix?: string } = {}): LeaseBackend {
  const p = options.prefix ?? "webcodex:broker:";
  const r = scripted(redis);
  const leaseKey = (scope: string) => `${p}lease:{${scope}}`;
  const counterKey = (scope: string) => `${p}fence:{${scope}}`;
  return {
    async grant(scope, owner, ttlMs): Promise<GrantResult> {
      const [kind, a, b, c] = await r.wcxLeaseGrant(leaseKey(scope), counterKey(scope), owner, Math.ceil(ttlMs));
      switch (kind) {
        case "granted":
          return { kind, fence: Number(a) };
        case "mine":
          return { kind, fence: Number(a) };
        case "held":
          return { kind, holder: { scope, fence: Number(a), ttlMs: Number(b), owner: c ?? "" } };
        default:
          return { kind: "unseeded" };
      }
    },
    async seed(scope, floor) {
      return Number(await r.wcxLeaseSeed(counterKey(scope), floor));
    },
    async renew(scope, owner, fence, ttlMs) {
      return (await r.wcxLeaseRenew(leaseKey(scope), `${fence}|${owner}`, Math.ceil(ttlMs))) === 1;
    },
    async release(scope, owner, fence) {
      return (await r.wcxLeaseRelease(leaseKey(scope), `${fence}|${owner}`)) === 1;
    },
    async current(scope) {
      const res = await redis.multi().get(leaseKey(scope)).pttl(leaseKey(scope)).exec();
      const value = res?.[0]?.[1] as string | null | undefined;
      return value ? parse(scope, value, Number(res?.[1]?.[1] ?? 0)) : undefined;
    },
    async counter(scope) {
      return Number((await redis.get(counterKey(scope))) ?? 0);
    },
  };
}
