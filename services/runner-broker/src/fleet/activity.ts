/**
 * Call activity shared by every broker replica: the last call per Project, so the replica that
 * reconciles the fleet counts calls served by the others when it decides a Runner is idle (and
 * starts a Runner a follower's call asked for). Writes are throttled per Project; the idle
 * timeout is minutes, so a few seconds of lag never stops a Runner in use.
 */
import type { Redis } from "@webcodex/platform";

export interface CallActivity {
  /** Records a call for the Project now (throttled). */
  note(canonicalId: string): void;
  /** The last call of every Project any replica recorded (ms). */
  all(): Promise<Map<string, number>>;
}

/** Writes at most once per Project per this long. */
export const ACTIVITY_WRITE_EVERY_MS = 5_000;

export function createMemoryCallActivity(now: () => number = Date.now): CallActivity {
  const last = new Map<string, number>();
  return {
    note: (id) => void last.set(id, now()),
    all: async () => new Map(last),
  };
}

export function createRedisCallActivity(
  redis: Redis,
  o: { prefix: string; logger?: { warn(msg: string, f?: object): void }; now?: () => number },
): CallActivity {
  const key = `${o.prefix}fleet:activity`;
  const now = o.now ?? Date.now;
  const written = new Map<string, number>();
  return {
    note(id) {
      const t = now();
      if (t - (written.get(id) ?? 0) < ACTIVITY_WRITE_EVERY_MS) return;
      written.set(id, t);
      void redis.hset(key, id, String(t)).catch((error: unknown) => o.logger?.warn("call activity not recorded", { error }));
    },
    async all() {
      const raw = await redis.hgetall(key);
      return new Map(Object.entries(raw).map(([id, v]) => [id, Number(v)]));
    },
  };
}
