/**
 * A Runner that contains its Jobs in cgroups removes each Job's cgroups when the Job ends:
 * after a normal exit, a timeout kill (with a setsid child left running), a fork bomb held at
 * the pids limit, and a Job still running when `webcodex dev` stops. Probed on `webcodex dev`
 * as root; skipped (with the reason) where the Runner cannot make cgroups.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { detectContainment } from "@webcodex/runner";
import { callTool, connectMcp, createProjectDir, firstProjectRef, hostPids, killAll, sleepTag, startDevServer, tempDir, until } from "../support/index.js";

const machine = detectContainment();
const skip =
  process.getuid?.() !== 0
    ? "needs root (the mode under test)"
    : machine.mode === "process_tree"
      ? `no writable cgroup here (${machine.fallbackReason})`
      : false;

/** Every cgroup directory named for `jobId`, in any hierarchy. */
function jobCgroupDirs(jobId: string): string[] {
  const found: string[] = [];
  const stack = ["/sys/fs/cgroup"];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      if (e.name === `webcodex-${jobId}`) found.push(join(dir, e.name));
      else stack.push(join(dir, e.name));
    }
  }
  return found;
}

describe("Job cgroups are removed when Jobs end", { skip }, () => {
  it("after an exit, a timeout kill, a fork bomb, and a server stop mid-Job: no cgroup of theirs is left", async () => {
    const token = `cg-${"x".repeat(20)}`;
    const server = await startDevServer({
      projectDir: createProjectDir({ "a.txt": "a\n" }, { name: "cgroups" }),
      dataDir: tempDir("wcx-cg-data-"),
      token,
      env: { WEBCODEX_RUNNER_JOB_PIDS_MAX: "32" },
    });
    const client = await connectMcp(server.mcpUrl, token);
    const jobs: Array<{ what: string; id: string }> = [];
    const tag = sleepTag();
    const runningTag = sleepTag();
    try {
      const project = await firstProjectRef(client);
      // Each Job is started without waiting (so its id is known), then waited for unless `wait` is false.
      const run = async (what: string, args: Record<string, unknown>, wait = true) => {
        const started = await callTool(client, "run_shell", { project, ...args, command: `sleep 0.5; ${String(args["command"])}`, wait_ms: 0 });
        assert.equal(started.isError, false, JSON.stringify(started.result).slice(0, 500));
        const id = String(started.result["job_id"]);
        assert.equal(started.result["execution_state"], "pending", JSON.stringify(started.result).slice(0, 300));
        jobs.push({ what, id });
        let result = started.result;
        for (let i = 0; wait && i < 10 && result["execution_state"] === "pending"; i++) {
          const waited = await callTool(client, "wait_for_job_terminal", { project, job_id: id, wait_ms: 30_000 });
          assert.equal(waited.isError, false, JSON.stringify(waited.result).slice(0, 500));
          result = waited.result;
        }
        return result;
      };
      // While a Job runs, its cgroup exists (so looking for it finds it).
      const live = await run("running", { command: `sleep ${runningTag}`, timeout_ms: 120_000 }, false);
      await until("the running Job's cgroup", () => jobCgroupDirs(String(live["job_id"])).length > 0, 20_000);

      assert.equal((await run("exit", { command: "echo done" }))["exit_code"], 0);
      const timedOut = await run("timeout", { command: `setsid sh -c 'exec sleep ${tag}' </dev/null >/dev/null 2>&1 & sleep 30`, timeout_ms: 1_000 });
      assert.equal(timedOut["timed_out"], true);
      const bomb = await run("fork bomb", { command: "bomb() { bomb | bomb & }; bomb; sleep 30", timeout_ms: 1_500 });
      assert.deepEqual(bomb["limit_exceeded"], { pids_max: 32 });
      for (const j of jobs.filter((j) => j.what !== "running")) {
        await until(`the cgroups of the ${j.what} Job to be removed`, () => jobCgroupDirs(j.id).length === 0, 15_000);
      }
      assert.deepEqual(hostPids(tag), [], "the timed-out Job's setsid child is gone");
    } finally {
      await client.close();
      await server.stop();
      killAll([...hostPids(tag), ...hostPids(runningTag)]);
    }
    // The Job still running when the server stopped: its processes and cgroups are gone too.
    const running = jobs.find((j) => j.what === "running")!;
    assert.deepEqual(hostPids(runningTag), [], "the running Job's process outlived the server");
    await until("the running Job's cgroups to be removed", () => jobCgroupDirs(running.id).length === 0, 15_000);
  });
});
