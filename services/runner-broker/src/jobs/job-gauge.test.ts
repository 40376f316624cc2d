import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createLogger, createMetrics, createWorkMetrics } from "@webcodex/platform";
import type { JobCounts } from "./job-store.js";
import { startJobGauge } from "./job-gauge.js";

const jobLines = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("webcodex_jobs{"))
    .sort();

describe("startJobGauge", () => {
  it("samples the Job counts at once and on every interval; a failed sample warns and keeps the last values", async () => {
    const metrics = createMetrics();
    const answers: Array<JobCounts | Error> = [
      { active: 3, running: 2, queued: 1, recovering: 0, lostAfterReconcile: 4 },
      new Error("postgres unreachable"),
      { active: 1, running: 1, queued: 0, recovering: 0, lostAfterReconcile: 4 },
    ];
    let calls = 0;
    const jobs = {
      counts: async () => {
        const next = answers[Math.min(calls++, answers.length - 1)];
        if (next instanceof Error) throw next;
        return next as JobCounts;
      },
    };
    const warnings: string[] = [];
    const logger = createLogger({ service: "t", write: (l) => warnings.push(String((JSON.parse(l) as { msg: string }).msg)) });
    const gauge = startJobGauge(jobs, createWorkMetrics(metrics), 30, logger);
    try {
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(jobLines(metrics.render()), [
        'webcodex_jobs{state="lost_after_reconcile"} 4',
        'webcodex_jobs{state="queued"} 1',
        'webcodex_jobs{state="recovering"} 0',
        'webcodex_jobs{state="running"} 2',
      ]);
      while (calls < 3) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(warnings, ["job counts for metrics failed"]);
      assert.ok(jobLines(metrics.render()).includes('webcodex_jobs{state="running"} 1'));
    } finally {
      gauge.stop();
    }
    const after = calls;
    // eslint-disable-next-line no-restricted-syntax -- a window in which no sample may be taken after stop
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(calls, after, "no sample after stop");
  });
});
