import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SPAWNER_MODES, eventually, tempRoot } from "./exec.test-support.js";
import { pidGone } from "./process-probes.test-support.js";
import { createExecutor } from "./index.js";
import type { Spawner } from "./spawner.js";
import type { CompletedResult, Executor } from "./index.js";

function pidsOf(stdout: string): number[] {
  return stdout.trim().split("\n").map(Number);
}

for (const [mode, makeSpawner] of SPAWNER_MODES) {
  describe(`process groups (${mode})`, () => {
    let cleanup = async (): Promise<void> => {};
    let executor: Executor;
    let spawner: Spawner;
    before(async () => {
      const temp = await tempRoot();
      cleanup = temp.cleanup;
      spawner = makeSpawner();
      executor = createExecutor({ root: temp.root, spawner });
    });
    after(async () => {
      await executor.shutdown();
      await spawner.close();
      await cleanup();
    });

    it("timeout kills a SIGTERM-ignoring process and its grandchild after the 2 s grace", async () => {
      // The shell ignores TERM, and so does the grandchild sleep (ignored dispositions inherit).
      const result = await executor.runShell({
        command: "trap '' TERM; sleep 60 & echo $!; echo $$; wait",
        timeout_ms: 300,
        wait_ms: 10_000,
      });
      const done = result as CompletedResult;
      assert.equal(done.execution_state, "completed");
      assert.equal(done.state, "timed_out");
      assert.equal(done.timed_out, true);
      assert.equal(done.signal, "SIGKILL");
      assert.equal(done.exit_code, null);
      assert.ok(done.duration_ms >= 2_000, `SIGKILL only after the grace, took ${done.duration_ms} ms`);
      const [grandchild = 0, shell = 0] = pidsOf(done.stdout);
      assert.ok(grandchild > 0 && shell > 0);
      assert.ok(await eventually(() => pidGone(grandchild) && pidGone(shell), 1_000), "no process of the job survives");
    });

    it("a timeout of a well-behaved process ends it with SIGTERM at once", async () => {
      const result = (await executor.runProcess({ args: ["sleep", "30"], timeout_ms: 200 })) as CompletedResult;
      assert.equal(result.state, "timed_out");
      assert.equal(result.signal, "SIGTERM");
      assert.ok(result.duration_ms < 1_500);
    });

    it("background processes left behind by a finished command are terminated too", async () => {
      const result = (await executor.runShell({ command: "sleep 30 > /dev/null 2>&1 & echo $!" })) as CompletedResult;
      assert.equal(result.exit_code, 0);
      const [orphan = 0] = pidsOf(result.stdout);
      assert.ok(await eventually(() => pidGone(orphan), 3_000), "the background sleep is not left orphaned");
    });

    it("cancel reaches the whole tree of a detached job", async () => {
      const started = await executor.runDetachedProcess({ args: ["bash", "-c", "sleep 60 & echo $!; wait"] });
      let grandchild = 0;
      await eventually(() => {
        const [observed] = executor.observeJobs({ job_ids: [started.job_id] }).jobs;
        grandchild = observed && "stdout_tail" in observed ? Number(observed.stdout_tail.trim()) : 0;
        return grandchild > 0;
      }, 2_000);
      assert.ok(grandchild > 0);
      await executor.cancelJob(started.job_id);
      assert.ok(await eventually(() => pidGone(grandchild), 1_000));
    });
  });
}
