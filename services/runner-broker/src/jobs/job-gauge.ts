/** `webcodex_jobs{state}`, sampled from the Job store (the one canonical Job count). */
import type { Logger, WorkMetrics } from "@webcodex/platform";
import type { JobStore } from "./job-store.js";

/** How often the gauge is refreshed (a typical scrape interval). */
export const JOB_GAUGE_INTERVAL_MS = 15_000;

/** Samples the Job counts into the gauge now and every `intervalMs`; a failed sample warns and keeps the last values. */
export function startJobGauge(jobs: Pick<JobStore, "counts">, work: WorkMetrics, intervalMs: number, logger: Logger): { stop(): void } {
  const sample = () => {
    jobs.counts().then(
      (c) => work.setJobs({ running: c.running, queued: c.queued, recovering: c.recovering, lost_after_reconcile: c.lostAfterReconcile }),
      (error: unknown) => logger.warn("job counts for metrics failed", { error }),
    );
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
