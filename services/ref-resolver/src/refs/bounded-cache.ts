/**
 * A small in-memory cache with a size bound (oldest insertion evicted first) and an optional
 * time-to-live. `maxEntries: 0` or `ttlMs <= 0` disables it: every get misses and nothing
 * is stored, which is how resolution is measured cold.
 */
export interface BoundedCache<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
  readonly size: number;
}

export function createBoundedCache<V>(options: { maxEntries: number; ttlMs?: number; now?: () => number }): BoundedCache<V> {
  const ttl = options.ttlMs ?? Number.POSITIVE_INFINITY;
  const now = options.now ?? Date.now;
  const enabled = options.maxEntries > 0 && ttl > 0;
  const entries = new Map<string, { at: number; value: V }>();
  return {
    get(key) {
      if (!enabled) return undefined;
      const hit = entries.get(key);
      if (!hit) return undefined;
      if (now() - hit.at >= ttl) {
        entries.delete(key);
        return undefined;
      }
      return hit.value;
    },
    set(key, value) {
      if (!enabled) return;
      entries.delete(key);
      while (entries.size >= options.maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done) break;
        entries.delete(oldest.value);
      }
      entries.set(key, { at: now(), value });
    },
    delete(key) {
      entries.delete(key);
    },
    get size() {
      return entries.size;
    },
  };
}
