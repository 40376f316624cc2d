/**
 * Live Job state backends. Redis layout (prefix p):
 *   p job:{<project>}:<job_id>  hash (client, runner, tool, call, fence, state, created, updated), PX lease TTL
 *   p jobs:all, p jobs:client:<client_id>  index sets of "<project>\n<job_id>" (pruned lazily)
 * The fenced writes are Lua scripts on the one job key.
 */
import { JOB_STATE } from "@webcodex/contracts";
import type { Redis } from "@webcodex/platform";
import type { FencedWrite, JobKey, LiveJob, LiveJobBackend, LiveJobState } from "./job-store.js";

export function createMemoryLiveJobBackend(options: { now?: () => number } = {}): LiveJobBackend {
  const now = options.now ?? Date.now;
  const jobs = new Map<string, { job: LiveJob; expiresAt: number }>();
  const id = (k: JobKey) => `${k.projectCanonicalId}\n${k.jobId}`;
  const live = (k: JobKey) => {
    const e = jobs.get(id(k));
    if (e && e.expiresAt <= now()) {
      jobs.delete(id(k));
      return undefined;
    }
    return e;
  };
  return {
    async put(job, ttlMs) {
      const e = live(job);
      if (e && e.job.fence > job.fence) return { ok: false, reason: "stale_fence", fence: e.job.fence };
      jobs.set(id(job), { job: { ...job }, expiresAt: now() + ttlMs });
      return { ok: true, adopted: e !== undefined && job.fence > e.job.fence };
    },
    async update(key, fence, change, ttlMs, nowMs) {
      const e = live(key);
      if (!e) return { ok: false, reason: "not_found" };
      if (fence < e.job.fence) return { ok: false, reason: "stale_fence", fence: e.job.fence };
      const adopted = fence > e.job.fence;
      e.job = {
        ...e.job,
        fence,
        updatedAtMs: nowMs,
        ...(change.state ? { state: change.state } : {}),
        ...(change.runnerId ? { runnerId: change.runnerId } : {}),
      };
      e.expiresAt = now() + ttlMs;
      return { ok: true, adopted };
    },
    async fence(key) {
      return live(key)?.job.fence;
    },
    async remove(key, fence) {
      const e = live(key);
      if (e && e.job.fence <= fence) jobs.delete(id(key));
    },
    async get(key) {
      const e = live(key);
      return e ? { ...e.job } : undefined;
    },
    async exists(keys) {
      return keys.map((k) => live(k) !== undefined);
    },
    async list(scope) {
      const out: LiveJob[] = [];
      for (const [k, e] of jobs) {
        if (e.expiresAt <= now()) {
          jobs.delete(k);
          continue;
        }
        if (scope.clientId === undefined || e.job.clientId === scope.clientId) out.push({ ...e.job });
      }
      return out;
    },
  };
}

const PUT = `
local f = redis.call('HGET', KEYS[1], 'fence')
if f and tonumber(f) > tonumber(ARGV[1]) then return {'stale', f} end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'state', ARGV[2], 'client', ARGV[3], 'runner', ARGV[4], 'tool', ARGV[5], 'call', ARGV[6], 'created', ARGV[7], 'updated', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
if f and tonumber(f) < tonumber(ARGV[1]) then return {'adopted'} end
return {'ok'}
`;

const UPDATE = `
local f = redis.call('HGET', KEYS[1], 'fence')
if not f then return {'missing'} end
if tonumber(f) > tonumber(ARGV[1]) then return {'stale', f} end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'updated', ARGV[4])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'state', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'runner', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if tonumber(f) < tonumber(ARGV[1]) then return {'adopted'} end
return {'ok'}
`;

const REMOVE = `
local f = redis.call('HGET', KEYS[1], 'fence')
if f and tonumber(f) <= tonumber(ARGV[1]) then redis.call('DEL', KEYS[1]) return 1 end
return 0
`;

type Scripted = Redis & {
  wcxJobPut(key: string, ...args: (string | number)[]): Promise<string[]>;
  wcxJobUpdate(key: string, ...args: (string | number)[]): Promise<string[]>;
  wcxJobRemove(key: string, fence: number): Promise<number>;
};

const fenced = (r: string[]): FencedWrite => {
  switch (r[0]) {
    case "ok":
      return { ok: true, adopted: false };
    case "adopted":
      return { ok: true, adopted: true };
    case "stale":
      return { ok: false, reason: "stale_fence", fence: Number(r[1]) };
    default:
      return { ok: false, reason: "not_found" };
  }
};

export function createRedisLiveJobBackend(redis: Redis, options: { prefix?: string } = {}): LiveJobBackend {
  const p = options.prefix ?? "webcodex:broker:";
  const r = redis as Scripted;
  if (typeof r.wcxJobPut !== "function") {
    redis.defineCommand("wcxJobPut", { numberOfKeys: 1, lua: PUT });
    redis.defineCommand("wcxJobUpdate", { numberOfKeys: 1, lua: UPDATE });
    redis.defineCommand("wcxJobRemove", { numberOfKeys: 1, lua: REMOVE });
  }
  const member = (k: JobKey) => `${k.projectCanonicalId}\n${k.jobId}`;
  const key = (k: JobKey) => `${p}job:{${k.projectCanonicalId}}:${k.jobId}`;
  const fromMember = (m: string): JobKey => {
    const i = m.indexOf("\n");
    return { projectCanonicalId: m.slice(0, i), jobId: m.slice(i + 1) };
  };
  const parse = (k: JobKey, h: Record<string, string>): LiveJob | undefined => {
    if (!h["fence"]) return undefined;
    const job: LiveJob = {
      ...k,
      clientId: h["client"] ?? "",
      runnerId: h["runner"] ?? "",
      tool: h["tool"] ?? "",
      fence: Number(h["fence"]),
      state: (h["state"] ?? JOB_STATE.queued) as LiveJobState,
      createdAtMs: Number(h["created"] ?? 0),
      updatedAtMs: Number(h["updated"] ?? 0),
    };
    if (h["call"]) job.callId = h["call"];
    return job;
  };
  return {
    async put(job, ttlMs) {
      const res = fenced(
        await r.wcxJobPut(
          key(job),
          job.fence,
          job.state,
          job.clientId,
          job.runnerId,
          job.tool,
          job.callId ?? "",
          job.createdAtMs,
          job.updatedAtMs,
          Math.ceil(ttlMs),
        ),
      );
      if (res.ok) await redis.multi().sadd(`${p}jobs:all`, member(job)).sadd(`${p}jobs:client:${job.clientId}`, member(job)).exec();
      return res;
    },
    async update(k, fence, change, ttlMs, nowMs) {
      return fenced(await r.wcxJobUpdate(key(k), fence, change.state ?? "", change.runnerId ?? "", nowMs, Math.ceil(ttlMs)));
    },
    async fence(k) {
      const f = await redis.hget(key(k), "fence");
      return f === null ? undefined : Number(f);
    },
    async remove(k, fence) {
      await r.wcxJobRemove(key(k), fence);
    },
    async get(k) {
      return parse(k, await redis.hgetall(key(k)));
    },
    async exists(keys) {
      if (keys.length === 0) return [];
      const pipe = redis.pipeline();
      for (const k of keys) pipe.exists(key(k));
      const res = (await pipe.exec()) ?? [];
      return keys.map((_, i) => Number(res[i]?.[1] ?? 0) === 1);
    },
    async list(scope) {
      const index = scope.clientId === undefined ? `${p}jobs:all` : `${p}jobs:client:${scope.clientId}`;
      const members = await redis.smembers(index);
      if (members.length === 0) return [];
      const keys = members.map(fromMember);
      const pipe = redis.pipeline();
      for (const k of keys) pipe.hgetall(key(k));
      const res = (await pipe.exec()) ?? [];
      const out: LiveJob[] = [];
      const gone: string[] = [];
      for (const [i, k] of keys.entries()) {
        const job = parse(k, (res[i]?.[1] ?? {}) as Record<string, string>);
        if (job) out.push(job);
        else gone.push(members[i]!);
      }
      // Expired or finished Jobs: drop them from the indexes (their durable record stays).
      if (gone.length > 0) {
        const prune = redis.multi().srem(`${p}jobs:all`, ...gone);
        if (scope.clientId !== undefined) prune.srem(index, ...gone);
        await prune.exec();
      }
      return out;
    },
  };
}
