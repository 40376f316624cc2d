/**
 * The broker's shared state in distributed mode: the Runner registry, leases and fences,
 * per-project admission and Job records, in Redis (live state) and Postgres (fence
 * high-water marks, Job records), so any replica can serve any call.
 */
import type { Database, Redis, WorkMetrics } from "@webcodex/platform";
import { createRedisRunnerRegistry } from "./runner-registry.js";
import type { RunnerRegistry } from "./runner-registry.js";
import { createLeaseStore } from "./leases/lease-store.js";
import type { LeaseStore } from "./leases/lease-store.js";
import { createRedisLeaseBackend } from "./leases/redis-lease-backend.js";
import { createPostgresFenceHighWaterMark } from "./leases/fence-hwm.js";
import { createMeteredLeaseStore } from "./leases/metered-lease-store.js";
import { createRedisConcurrencyLimiter } from "./admission/concurrency.js";
import type { ConcurrencyLimiter } from "./admission/concurrency.js";
import { createJobStore } from "./jobs/job-store.js";
import { createJobContinuationStore } from "./jobs/job-continuations.js";
import type { JobContinuationStore } from "./jobs/job-continuations.js";
import type { JobStore } from "./jobs/job-store.js";
import { createRedisLiveJobBackend } from "./jobs/live-job-backends.js";

export interface DistributedStoresOptions {
  redis: Redis;
  db: Database;
  /** Redis key prefix shared by every store. */
  prefix: string;
  /** A Runner is lost after this long without a heartbeat (two heartbeat intervals). */
  lostAfterMs: number;
  projectConcurrency: number;
  work: WorkMetrics;
}

export interface DistributedStores {
  registry: RunnerRegistry;
  leases: LeaseStore;
  concurrency: ConcurrencyLimiter;
  jobs: JobStore;
  continuations: JobContinuationStore;
}

export function createDistributedStores(o: DistributedStoresOptions): DistributedStores {
  const { redis, db, prefix } = o;
  return {
    registry: createRedisRunnerRegistry(redis, { lostAfterMs: o.lostAfterMs, prefix }),
    leases: createMeteredLeaseStore(createLeaseStore(createRedisLeaseBackend(redis, { prefix }), createPostgresFenceHighWaterMark(db)), o.work),
    concurrency: createRedisConcurrencyLimiter(redis, { limit: o.projectConcurrency, prefix }),
    jobs: createJobStore({ live: createRedisLiveJobBackend(redis, { prefix }), db }),
    continuations: createJobContinuationStore({ db }),
  };
}
