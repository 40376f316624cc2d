/** Redis client factory: bounded reconnects and fast failure so calls never hang on an outage. */
import { createRequire } from "node:module";
import type * as ioredis from "ioredis";
import type { Redis } from "ioredis";

/** `ioredis`, loaded on first use: a process without Redis (a Runner) does not load it at start. */
const loadIoredis = () => createRequire(import.meta.url)("ioredis") as typeof ioredis;

export function createRedis(url: string, options: { keyPrefix?: string } = {}): Redis {
  const client = new (loadIoredis().Redis)(url, {
    lazyConnect: false,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2_000,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    ...(options.keyPrefix !== undefined ? { keyPrefix: options.keyPrefix } : {}),
  });
  client.on("error", () => {
    // Reported through failing commands and readiness; an idle connection error must not crash.
  });
  return client;
}
export type { Redis };
