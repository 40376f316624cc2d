import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { eventually, SPAWNER_MODES, tempRoot } from "./exec.test-support.js";
import { pidGone } from "./process-probes.test-support.js";
import { createExecutor, detectContainment } from "./index.js";
import type { CompletedResult, Containment } from "./index.js";

/**
 * A cgroup per Job: limits and one kill for everything the Job started. These run where the
 * machine offers writable cgroups to root (CI and the development machines: a hybrid layout,
 * cgroup v1 pids and memory plus a v2 hierarchy with cgroup.kill); elsewhere they are skipped
 * with the reason, and the process-tree tests below still run.
 */
const detected = detectContainment({ pidsMax: 48, memoryMaxBytes: 64 * 1024 * 1024 });
const cgroupSkip = detected.mode === "process_tree" ? `no writable cgroup here (${detected.fallbackReason})` : false;

function jobCgroupDirs(jobId: string): string[] {
  const found: string[] = [];
  for (const base of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"]) {
    const stack = [base];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      let entries: string[];
      try {
        entries = readdirSync(dir);
      } catch {
        continue;
      }
      for (const name of entries) {
        if (name === `webcodex-${jobId}`) found.push(path.join(dir, name));
        else if (name.startsWith("webcodex-") || name === "process_api" || /^[0-9a-f]{32}$/.test(name)) stack.push(path.join(dir, name));
      }
    }
  }
  return found;
}

describe("job cgroups: detection", () => {
  it("root on this machine gets a cgroup mode with the configured limits", { skip: process.getuid?.() !== 0 ? "needs root" : false }, () => {
    assert.notEqual(detected.mode, "process_tree", `expected a cgroup mode, fell back: ${detected.fallbackReason}`);
    assert.equal(detected.pidsMax, 48);
    assert.equal(detected.memoryMaxBytes, 64 * 1024 * 1024);
  });

  it("process_tree is used and reported when configured", () => {
    const forced = detectContainment({ mode: "process_tree" });
    assert.equal(forced.mode, "process_tree");
    assert.equal(forced.fallbackReason, "configured");
    assert.equal(forced.create("job_x"), undefined);
    assert.equal(forced.pidsMax, undefined);
  });
});

for (const [spawnerMode, makeSpawner] of SPAWNER_MODES) {
  describe(`job cgroups (${detected.mode}, ${spawnerMode})`, { skip: cgroupSkip }, () => {
    const run = async (containment: Containment, body: (executor: ReturnType<typeof createExecutor>, root: string) => Promise<void>) => {
      const { root, cleanup } = await tempRoot();
      const executor = createExecutor({ root, spawner: makeSpawner(), containment, limits: { killGraceMs: 300 } });
      try {
        await body(executor, root);
      } finally {
        await executor.shutdown();
        await cleanup();
      }
    };

    it("a fork bomb is capped by pids.max, reported, and gone with its Job", async () => {
      await run(detected, async (executor) => {
        const result = (await executor.runShell({
          command: "bomb() { bomb | bomb & }; bomb; sleep 30",
          timeout_ms: 1_500,
          wait_ms: 20_000,
        })) as CompletedResult;
        assert.equal(result.execution_state, "completed");
        assert.equal(result.timed_out, true);
        assert.deepEqual(result.limit_exceeded, { pids_max: 48 });
        assert.ok(await eventually(() => jobCgroupDirs(result.job_id).length === 0, 10_000), "the Job's cgroups are removed");
      });
    });

    it("a memory hog is killed at memory.max and reported structurally", async () => {
      await run(detected, async (executor) => {
        const result = (await executor.runScript({
          language: "python",
          code: "x = b'a' * (512 * 1024 * 1024)\nprint('survived')",
          timeout_ms: 20_000,
          wait_ms: 25_000,
        })) as CompletedResult;
        assert.equal(result.execution_state, "completed");
        assert.equal(result.timed_out, false);
        assert.equal(result.signal, "SIGKILL");
        assert.doesNotMatch(result.stdout, /survived/);
        assert.deepEqual(result.limit_exceeded, { memory_max_bytes: 64 * 1024 * 1024 });
      });
    });

    it("a double-forked setsid child that cleared its environment dies with its Job", async () => {
      await run(detected, async (executor, root) => {
        // `env -i` drops the Job's tag: only the cgroup still knows this process.
        const result = (await executor.runShell({
          command: "(env -i setsid sh -c 'echo $$ > daemon.pid; exec sleep 97' </dev/null >/dev/null 2>&1 &); sleep 0.2; echo done",
          wait_ms: 10_000,
        })) as CompletedResult;
        assert.equal(result.exit_code, 0);
        assert.equal(result.limit_exceeded, undefined);
        const pid = Number(readFileSync(path.join(root, "daemon.pid"), "utf8").trim());
        assert.ok(pid > 0);
        assert.ok(await eventually(() => pidGone(pid), 5_000), `daemon ${pid} outlived its Job`);
        assert.ok(await eventually(() => jobCgroupDirs(result.job_id).length === 0, 5_000), "the Job's cgroups are removed");
      });
    });

    it("a setsid child without the tag is gone once its Job times out", async () => {
      await run(detected, async (executor, root) => {
        const result = (await executor.runShell({
          command: "env -i setsid sh -c 'echo $$ > escaped.pid; exec sleep 97' </dev/null >/dev/null 2>&1 & sleep 30",
          timeout_ms: 700,
          wait_ms: 10_000,
        })) as CompletedResult;
        assert.equal(result.timed_out, true);
        const pidFile = path.join(root, "escaped.pid");
        assert.ok(existsSync(pidFile), "the escaping child started");
        const pid = Number(readFileSync(pidFile, "utf8").trim());
        assert.ok(await eventually(() => pidGone(pid), 5_000), `setsid child ${pid} outlived its Job's timeout`);
      });
    });
  });
}
