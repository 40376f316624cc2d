import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { eventually, failsWith, tempRoot } from "./exec.test-support.js";
import { createExecutor } from "./index.js";
import type { CompletedResult, Executor, JobEvent, JobSnapshot } from "./index.js";

function snapshotOf(executor: Executor, jobId: string): JobSnapshot {
  const [observed] = executor.observeJobs({ job_ids: [jobId] }).jobs;
  assert.ok(observed && observed.state !== "unknown", `job ${jobId} should be known`);
  return observed as JobSnapshot;
}

describe("jobs", () => {
  let root = "";
  let cleanup = async (): Promise<void> => {};
  let executor: Executor;
  before(async () => {
    ({ root, cleanup } = await tempRoot());
    executor = createExecutor({ root });
  });
  after(async () => {
    await executor.shutdown();
    await cleanup();
  });

  it("returns pending at wait_ms, then waitForJobTerminal delivers the full output", async () => {
    const started = await executor.runShell({ command: "echo start; sleep 0.4; echo done", wait_ms: 50 });
    assert.deepEqual(started, {
      execution_state: "pending",
      job_id: started.job_id,
      effective: { timeout_ms: 120_000, wait_ms: 50 },
    });
    assert.ok(await eventually(() => snapshotOf(executor, started.job_id).stdout_tail === "start\n", 2_000));
    assert.equal(snapshotOf(executor, started.job_id).state, "running");

    const result = await executor.waitForJobTerminal({ job_id: started.job_id, wait_ms: 5_000 });
    assert.equal(result.execution_state, "completed");
    const done = result as CompletedResult;
    assert.equal(done.output, "start\ndone\n");
    assert.equal(done.exit_code, 0);
    assert.equal(done.job_id, started.job_id);
  });

  it("replays the identical terminal result on every later wait (keyed replay)", async () => {
    const first = await executor.runShell({ command: "echo once", wait_ms: 5_000 });
    const again = await executor.waitForJobTerminal({ job_id: first.job_id });
    const third = await executor.waitForJobTerminal({ job_id: first.job_id, wait_ms: 0 });
    assert.equal(first.execution_state, "completed");
    assert.deepEqual(again, first);
    assert.deepEqual(third, first);
    // Callers get copies: mutating one cannot alter the replay.
    (again as CompletedResult).stdout = "tampered";
    assert.deepEqual(await executor.waitForJobTerminal({ job_id: first.job_id }), first);
  });

  it("says pending again when the job outlives the wait", async () => {
    const started = await executor.runDetachedProcess({ args: ["sleep", "5"] });
    const waited = await executor.waitForJobTerminal({ job_id: started.job_id, wait_ms: 30 });
    assert.deepEqual(waited, { execution_state: "pending", job_id: started.job_id, effective: { wait_ms: 30 } });
    await executor.cancelJob(started.job_id);
  });

  it("aborting a wait ends only the wait, never the job", async () => {
    const started = await executor.runShell({ command: "sleep 0.5; echo survived", wait_ms: 0 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const began = Date.now();
    const waited = await executor.waitForJobTerminal({ job_id: started.job_id, wait_ms: 10_000 }, controller.signal);
    assert.equal(waited.execution_state, "pending");
    assert.ok(Date.now() - began < 400);
    assert.equal(snapshotOf(executor, started.job_id).state, "running");
    const result = await executor.waitForJobTerminal({ job_id: started.job_id, wait_ms: 5_000 });
    assert.equal((result as CompletedResult).stdout, "survived\n");
  });

  it("reports an unknown job id as a job_not_found observation, not a job failure", async () => {
    const observed = executor.observeJobs({ job_ids: ["job_doesnotexist"] });
    assert.deepEqual(observed, { jobs: [{ job_id: "job_doesnotexist", state: "unknown", reason_code: ReasonCode.jobNotFound }] });
    assert.deepEqual(await executor.waitForJobTerminal({ job_id: "job_doesnotexist" }), {
      execution_state: "unknown",
      job_id: "job_doesnotexist",
      reason_code: ReasonCode.jobNotFound,
    });
    assert.deepEqual(await executor.cancelJob("job_doesnotexist"), observed.jobs[0]);
  });

  it("observes several jobs at once, in request order", async () => {
    const a = await executor.runProcess({ args: ["echo", "a"] });
    const b = await executor.runDetachedProcess({ args: ["sh", "-c", "echo b-out; echo b-err >&2; sleep 5"] });
    await eventually(() => snapshotOf(executor, b.job_id).stderr_bytes > 0, 2_000);
    const { jobs } = executor.observeJobs({ job_ids: [b.job_id, "job_missing", a.job_id] });
    assert.deepEqual(
      jobs.map((job) => job.state),
      ["running", "unknown", "completed"],
    );
    const running = jobs[0] as JobSnapshot;
    assert.equal(running.kind, "detached");
    assert.equal(running.stdout_tail, "b-out\n");
    assert.equal(running.stderr_tail, "b-err\n");
    assert.equal(running.exit_code, null);
    await executor.cancelJob(b.job_id);
  });

  it("cancelJob kills the group and records state cancelled", async () => {
    const started = await executor.runDetachedProcess({ args: ["sh", "-c", "sleep 30 & sleep 30; wait"] });
    assert.equal(started.execution_state, "running");
    const cancelled = await executor.cancelJob(started.job_id);
    assert.equal(cancelled.state, "cancelled");
    const result = await executor.waitForJobTerminal({ job_id: started.job_id });
    assert.equal(result.execution_state, "completed");
    assert.equal((result as CompletedResult).state, "cancelled");
    assert.equal((result as CompletedResult).signal, "SIGTERM");
    // Cancelling a terminal job changes nothing.
    assert.equal((await executor.cancelJob(started.job_id)).state, "cancelled");
  });

  it("runs 20 concurrent jobs to their correct terminal states", async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => executor.runShell({ command: 'echo "job-$N"; sleep 0.2; exit $((N % 4))', env: { N: String(i) }, wait_ms: 15_000 })),
    );
    results.forEach((result, i) => {
      const done = result as CompletedResult;
      assert.equal(done.execution_state, "completed");
      assert.equal(done.stdout, `job-${i}\n`);
      assert.equal(done.exit_code, i % 4);
    });
    assert.equal(new Set(results.map((result) => result.job_id)).size, 20);
  });

  it("emits output and terminal events with the bytes produced so far", async () => {
    const events: JobEvent[] = [];
    const unsubscribe = executor.onJobEvent((event) => events.push(event));
    const result = await executor.runProcess({ args: ["printf", "12345"] });
    unsubscribe();
    const mine = events.filter((event) => event.job_id === result.job_id);
    assert.deepEqual(mine.at(-1), { job_id: result.job_id, kind: "terminal", bytes_so_far: 5, state: "completed" });
    assert.ok(mine.some((event) => event.kind === "output"));
    const count = events.length;
    await executor.runProcess({ args: ["true"] });
    assert.equal(events.length, count);
  });

  it("a throwing event listener does not disturb jobs", async () => {
    const unsubscribe = executor.onJobEvent(() => {
      throw new Error("listener bug");
    });
    const result = await executor.runProcess({ args: ["echo", "ok"] });
    unsubscribe();
    assert.equal((result as CompletedResult).stdout, "ok\n");
  });
});

describe("executor bounds", () => {
  it("refuses a start beyond maxJobs running jobs and accepts again once one ends", async () => {
    const { root, cleanup } = await tempRoot();
    const executor = createExecutor({ root, limits: { maxJobs: 2 } });
    try {
      const first = await executor.runDetachedProcess({ args: ["sleep", "30"] });
      await executor.runDetachedProcess({ args: ["sleep", "30"] });
      await assert.rejects(executor.runProcess({ args: ["true"] }), failsWith(ReasonCode.rateLimited, "max_running_jobs"));
      await executor.cancelJob(first.job_id);
      assert.equal((await executor.runProcess({ args: ["true"] })).execution_state, "completed");
    } finally {
      await executor.shutdown();
      await cleanup();
    }
  });

  it("forgets terminal jobs beyond the retention bound, oldest first", async () => {
    const { root, cleanup } = await tempRoot();
    const executor = createExecutor({ root, limits: { maxRetainedJobs: 2 } });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await executor.runProcess({ args: ["true"] })).job_id);
      const states = executor.observeJobs({ job_ids: ids }).jobs.map((job) => job.state);
      assert.deepEqual(states, ["unknown", "unknown", "completed", "completed"]);
    } finally {
      await executor.shutdown();
      await cleanup();
    }
  });

  it("shutdown cancels running jobs and refuses new ones", async () => {
    const { root, cleanup } = await tempRoot();
    const executor = createExecutor({ root });
    try {
      const started = await executor.runDetachedProcess({ args: ["sleep", "30"] });
      await executor.shutdown();
      assert.equal(snapshotOf(executor, started.job_id).state, "cancelled");
      await assert.rejects(executor.runProcess({ args: ["true"] }), failsWith(ReasonCode.runnerUnavailable));
    } finally {
      await cleanup();
    }
  });
});
