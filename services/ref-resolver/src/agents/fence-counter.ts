/**
 * Task fences: a fast counter per Task, ratcheted from the Task's durable high-water mark in
 * Postgres (`agent_tasks.current_fence`), as Runner fences are. The caller holds the Task row
 * lock, passes the recorded mark as `floor`, and records the returned fence as the new mark in
 * the same transaction; a counter that lost its data (Redis FLUSHALL, failover) is lifted to
 * the floor before it counts, so a fence is always above every earlier one.
 */
import type { Redis } from "@webcodex/platform";

export interface TaskFenceCounter {
  /** The next fence for `taskId`: strictly above `floor`. */
  next(taskId: string, floor: number): Promise<number>;
}

const RATCHET = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if cur < floor then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])
`;

type RatchetRedis = Redis & { wcxTaskFence(key: string, floor: string): Promise<number> };

/** Redis-backed counter (distributed mode); keys `<prefix>task-fence:{<task_id>}`, no TTL. */
export function createRedisTaskFenceCounter(redis: Redis, keyPrefix = ""): TaskFenceCounter {
  const r = redis as RatchetRedis;
  if (typeof r.wcxTaskFence !== "function") redis.defineCommand("wcxTaskFence", { numberOfKeys: 1, lua: RATCHET });
  return {
    async next(taskId, floor) {
      const fence = Number(await r.wcxTaskFence(`${keyPrefix}task-fence:{${taskId}}`, String(floor)));
      // Defence in depth: a counter behind the floor never yields a reused fence.
      return Math.max(fence, floor + 1);
    },
  };
}

/** In-process counter (embedded mode, one process): the Postgres mark alone decides. */
export function createMemoryTaskFenceCounter(): TaskFenceCounter {
  const counters = new Map<string, number>();
  return {
    async next(taskId, floor) {
      const fence = Math.max(counters.get(taskId) ?? 0, floor) + 1;
      counters.set(taskId, fence);
      return fence;
    },
  };
}
