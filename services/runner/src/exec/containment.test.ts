import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { eventually, SPAWNER_MODES, tempRoot } from "./exec.test-support.js";
import { pidGone } from "./process-probes.test-support.js";
import { createExecutor } from "./index.js";
import type { CompletedResult } from "./index.js";

/** A process that leaves the Job's group and session must still end with the Job. */
for (const [mode, makeSpawner] of SPAWNER_MODES) {
  describe(`job containment (${mode})`, () => {
    it("a setsid child is gone once its Job times out", async () => {
      const { root, cleanup } = await tempRoot();
      const executor = createExecutor({ root, spawner: makeSpawner() });
      try {
        const result = await executor.runShell({
          command: "setsid sh -c 'echo $$ > escaped.pid; exec sleep 97' </dev/null >/dev/null 2>&1 & sleep 30",
          timeout_ms: 700,
          wait_ms: 10_000,
        });
        assert.equal(result.execution_state, "completed");
        assert.equal((result as CompletedResult).timed_out, true);
        const pidFile = path.join(root, "escaped.pid");
        assert.ok(existsSync(pidFile), "the escaping child started");
        const pid = Number(readFileSync(pidFile, "utf8").trim());
        assert.ok(pid > 0);
        assert.ok(await eventually(() => pidGone(pid), 5_000), `setsid child ${pid} outlived its Job's timeout`);
      } finally {
        await executor.shutdown();
        await cleanup();
      }
    });

    it("a double-forked setsid daemon is gone once its Job's leader exits", async () => {
      const { root, cleanup } = await tempRoot();
      const executor = createExecutor({ root, spawner: makeSpawner() });
      try {
        const result = await executor.runShell({
          command: "(setsid sh -c 'echo $$ > daemon.pid; exec sleep 97' </dev/null >/dev/null 2>&1 &); sleep 0.2; echo done",
          wait_ms: 10_000,
        });
        assert.equal((result as CompletedResult).exit_code, 0);
        const pid = Number(readFileSync(path.join(root, "daemon.pid"), "utf8").trim());
        assert.ok(await eventually(() => pidGone(pid), 5_000), `daemon ${pid} outlived its Job`);
      } finally {
        await executor.shutdown();
        await cleanup();
      }
    });
  });
}
