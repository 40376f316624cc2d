/**
 * The durable floor under fencing tokens. Redis counters are fast but can lose their data;
 * Postgres keeps, per lease scope, the highest fence ever handed out. A grant is only
 * returned after `advance` records its fence strictly above the stored mark, so the
 * sequence of fences a scope ever hands out is exactly the sequence of successful
 * `advance` calls: strictly increasing, whatever happened to Redis in between.
 */
import type { Queryable } from "@webcodex/platform";

export interface FenceHighWaterMark {
  /** The highest fence recorded for `scope` (0 when none). */
  read(scope: string): Promise<number>;
  /**
   * Records `fence` iff it is strictly above the stored mark (compare-and-set). False means
   * the fence is not new: the counter that produced it was behind (stale seed, lost data).
   */
  advance(scope: string, fence: number): Promise<boolean>;
}

/** Postgres (or PGlite) table `<schema>.fence_hwm`, created by the broker migrations. */
export function createPostgresFenceHighWaterMark(db: Queryable, schema = "broker"): FenceHighWaterMark {
  return {
    async read(scope) {
      const r = await db.query<{ hwm: string | number }>(`SELECT hwm FROM ${schema}.fence_hwm WHERE scope = $1`, [scope]);
      return r.rows[0] ? Number(r.rows[0].hwm) : 0;
    },
    async advance(scope, fence) {
      const r = await db.query(
        `INSERT INTO ${schema}.fence_hwm (scope, hwm) VALUES ($1, $2)
         ON CONFLICT (scope) DO UPDATE SET hwm = EXCLUDED.hwm, updated_at = now()
         WHERE ${schema}.fence_hwm.hwm < EXCLUDED.hwm
         RETURNING hwm`,
        [scope, fence],
      );
      return r.rowCount === 1;
    },
  };
}

/** In-process marks: embedded mode without a database, and unit tests. */
export function createMemoryFenceHighWaterMark(): FenceHighWaterMark {
  const marks = new Map<string, number>();
  return {
    async read(scope) {
      return marks.get(scope) ?? 0;
    },
    async advance(scope, fence) {
      if ((marks.get(scope) ?? 0) >= fence) return false;
      marks.set(scope, fence);
      return true;
    },
  };
}
