import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { createAttemptFenceStore } from "./attempt-fences.js";
import { createRunner } from "./runner.js";

const logger = createLogger({ service: "test", level: "silent" });
const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});
async function temp(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "wc-attempt-fences-"));
  dirs.push(dir);
  return dir;
}

const TASK = `wc_task_${"a".repeat(32)}`;
const OTHER_TASK = `wc_task_${"b".repeat(32)}`;
const edit = (callId: string, file: string, content: string, attempt?: { taskId: string; fence: bigint }) => ({
  callId,
  tool: "edit_project_files",
  fence: 1n,
  argumentsJson: JSON.stringify({ changes: [{ kind: "create", path: file, content }] }),
  ...(attempt ? { attempt } : {}),
});

describe("a Runner's Attempt fence marks", () => {
  it("refuse a call whose Attempt fence is below the Task's mark before anything is written or run; the mark survives a restart", async () => {
    const root = await temp();
    const stateDir = await temp();
    execFileSync("git", ["init", "-q"], { cwd: root });
    const first = createRunner({ root, stateDir, logger, spawnHost: false });
    try {
      const client = createInProcessClient(RunnerService, first.service);
      // Attempt 1 (fence 1) writes; attempt 2 (fence 2) takes over and writes.
      assert.equal((await client.execute(edit("c1", "one.txt", "1", { taskId: TASK, fence: 1n }))).failure, undefined);
      assert.equal((await client.execute(edit("c2", "two.txt", "2", { taskId: TASK, fence: 2n }))).failure, undefined);
      // Attempt 1's call arrives late (admitted before the takeover): refused, nothing written.
      const stale = await client.execute(edit("c3", "stale.txt", "stale", { taskId: TASK, fence: 1n }));
      assert.equal(stale.failure?.reasonCode, "fence_stale");
      assert.equal(stale.failure?.failureStage, "authorization");
      assert.equal(stale.failure?.detailCode, "attempt_superseded");
      assert.equal(stale.failure?.stateChanged, false);
      const extra = JSON.parse(stale.failure?.evidenceJson ?? "{}") as { evidence: unknown; follow_up: { tool: string; arguments: unknown } };
      assert.deepEqual(extra.evidence, { attempt_fence: 1, current_fence: 2 });
      assert.deepEqual(extra.follow_up.arguments, { tool: "read_agent_task", arguments: { task_id: TASK } });
      await assert.rejects(readFile(path.join(root, "stale.txt")));
      // Nor is anything spawned.
      const run = await client.execute({
        callId: "c4",
        tool: "run_shell",
        fence: 1n,
        argumentsJson: JSON.stringify({ command: "echo ran > ran.txt" }),
        attempt: { taskId: TASK, fence: 1n },
      });
      assert.equal(run.failure?.reasonCode, "fence_stale");
      await assert.rejects(readFile(path.join(root, "ran.txt")));
      // The same fence keeps working; another Task's marks are its own; calls without an Attempt are not affected.
      assert.equal((await client.execute(edit("c5", "two-again.txt", "2", { taskId: TASK, fence: 2n }))).failure, undefined);
      assert.equal((await client.execute(edit("c6", "other.txt", "o", { taskId: OTHER_TASK, fence: 1n }))).failure, undefined);
      assert.equal((await client.execute(edit("c7", "plain.txt", "p"))).failure, undefined);
      // A malformed task id is refused, never used as a file name.
      const bad = await client.execute(edit("c8", "bad.txt", "b", { taskId: "../../etc/passwd", fence: 9n }));
      assert.equal(bad.failure?.detailCode, "task_not_found");
      await assert.rejects(readFile(path.join(root, "bad.txt")));
      // The marks live outside the workspace: not in the tree, not in git status.
      assert.deepEqual((await readdir(root)).sort(), [".git", "one.txt", "other.txt", "plain.txt", "two-again.txt", "two.txt"]);
      assert.doesNotMatch(execFileSync("git", ["-c", "safe.directory=*", "status", "--porcelain", "--ignored"], { cwd: root, encoding: "utf8" }), /fence/);
    } finally {
      await first.close();
    }

    // A new Runner process on the same workspace and state directory keeps the high-water mark.
    const second = createRunner({ root, stateDir, logger, spawnHost: false });
    try {
      const client = createInProcessClient(RunnerService, second.service);
      const stale = await client.execute(edit("d1", "stale-after-restart.txt", "stale", { taskId: TASK, fence: 1n }));
      assert.deepEqual(
        [stale.failure?.reasonCode, JSON.parse(stale.failure?.evidenceJson ?? "{}").evidence],
        ["fence_stale", { attempt_fence: 1, current_fence: 2 }],
      );
      await assert.rejects(readFile(path.join(root, "stale-after-restart.txt")));
      assert.equal((await client.execute(edit("d2", "three.txt", "3", { taskId: TASK, fence: 3n }))).failure, undefined);
    } finally {
      await second.close();
    }
  });

  it("admits concurrent calls of one Task in one order: a lower fence arriving with a higher one never slips under the mark", async () => {
    const store = createAttemptFenceStore(await temp());
    const fences = Array.from({ length: 50 }, (_, i) => ((i * 7) % 50) + 1);
    const answers = await Promise.all(fences.map((f) => store.admit(TASK, f)));
    // Every admitted fence was at least every fence admitted before it, in admission order.
    let mark = 0;
    for (const [i, a] of answers.entries()) {
      const f = fences[i] as number;
      if (a.admitted) {
        assert.ok(f >= mark);
        mark = f;
      } else assert.ok(f < mark);
    }
    assert.equal(await store.highest(TASK), 50);
    assert.equal(await createAttemptFenceStore(store.dir.replace(/\/attempt-fences$/, "")).highest(TASK), 50, "read back from disk");
  });

  it("a raised mark (a new Attempt started) refuses the earlier Attempt's fence before the new one's first call; it never goes down", async () => {
    const store = createAttemptFenceStore(await temp());
    assert.deepEqual(await store.admit(TASK, 1), { admitted: true, highest: 1 });
    assert.equal(await store.raise(TASK, 2), 2);
    assert.deepEqual(await store.admit(TASK, 1), { admitted: false, highest: 2, why: "fence_below_mark" });
    assert.equal(await store.raise(TASK, 1), 2, "a lower raise (a replayed start) leaves the mark");
    assert.deepEqual(await store.admit(TASK, 2), { admitted: true, highest: 2 });
    assert.equal(await createAttemptFenceStore(store.dir.replace(/\/attempt-fences$/, "")).highest(TASK), 2, "durable");
    assert.equal(await store.raise("../etc/passwd", 3), undefined, "not a task id: no file");
    assert.equal(await store.raise(TASK, 0), undefined);
  });

  it("fails closed when the mark cannot be recorded", async () => {
    const blocker = path.join(await temp(), "not-a-directory");
    await writeFile(blocker, "x");
    const store = createAttemptFenceStore(blocker);
    await assert.rejects(store.admit(TASK, 1));
    await assert.rejects(store.raise(TASK, 1));
  });

  it("task ids and marks are read strictly: anything but wc_task_<32 hex> is no file, a corrupt mark fails closed", async () => {
    const state = await temp();
    const store = createAttemptFenceStore(state);
    for (const bad of [`x${TASK}`, `${TASK}0`, `wc_task_${"A".repeat(32)}`, "../etc/passwd"]) {
      assert.deepEqual(await store.admit(bad, 1), { admitted: false, why: "invalid_task_id" }, bad);
      assert.equal(await store.raise(bad, 1), undefined, bad);
      assert.equal(await store.highest(bad), 0, bad);
    }
    assert.equal(await store.raise(TASK, 1.5), undefined);
    assert.equal(await store.raise(TASK, 2 ** 53), undefined);
    assert.equal(path.basename(store.dir), "attempt-fences");
    assert.equal(path.dirname(store.dir), path.resolve(state));
    // The file holds the mark as a decimal line, written only by us (mode 0600).
    assert.equal(await store.raise(TASK, 7), 7);
    assert.equal(await readFile(path.join(store.dir, TASK), "utf8"), "7\n");
    assert.deepEqual(await readdir(store.dir), [TASK], "no temp file is left");
    for (const corrupt of ["x7\n", "7x", "07", "-1", "7\n\n", " 7"]) {
      await writeFile(path.join(store.dir, OTHER_TASK), corrupt);
      await assert.rejects(createAttemptFenceStore(state).highest(OTHER_TASK), /attempt fence mark of wc_task_b+ is unreadable/, JSON.stringify(corrupt));
    }
    await writeFile(path.join(store.dir, OTHER_TASK), "12");
    assert.equal(await createAttemptFenceStore(state).highest(OTHER_TASK), 12);
  });

  it("an equal fence is admitted without a write; a mark that cannot be read for another reason than absence fails closed", async () => {
    const state = await temp();
    const store = createAttemptFenceStore(state);
    assert.deepEqual(await store.admit(TASK, 3), { admitted: true, highest: 3 });
    // A mark changed on disk behind the store's back: the store keeps the mark it wrote, so an
    // equal fence is admitted from memory and the file is not rewritten.
    await writeFile(path.join(store.dir, TASK), "9\n");
    assert.deepEqual(await store.admit(TASK, 3), { admitted: true, highest: 3 });
    assert.equal(await readFile(path.join(store.dir, TASK), "utf8"), "9\n");
    assert.equal(await store.raise(TASK, 3), 3);
    assert.equal(await readFile(path.join(store.dir, TASK), "utf8"), "9\n");
    // A directory where the mark file should be cannot be read: not taken as "no mark".
    await mkdir(path.join(store.dir, OTHER_TASK));
    await assert.rejects(createAttemptFenceStore(state).highest(OTHER_TASK));
    await assert.rejects(createAttemptFenceStore(state).admit(OTHER_TASK, 1));
  });

  it("a failed write leaves no temp file and no raised mark; a state directory that appears later is used", async () => {
    const state = await temp();
    const store = createAttemptFenceStore(state);
    assert.deepEqual(await store.admit(TASK, 1), { admitted: true, highest: 1 });
    assert.equal((await stat(path.join(store.dir, TASK))).mode & 0o777, 0o600);
    // The mark file replaced by a directory: the rename over it fails, and the temp file is removed.
    await rm(path.join(store.dir, TASK));
    await mkdir(path.join(store.dir, TASK, "x"), { recursive: true });
    await assert.rejects(store.admit(TASK, 2));
    assert.deepEqual((await readdir(store.dir)).sort(), [TASK]);
    // A name that is not a task id is never read, even where a file of that name exists.
    await writeFile(path.join(state, "junk"), "not a mark");
    assert.equal(await store.highest("../junk"), 0);
    // The state directory could not be made at first; once it can, the same store works.
    const parent = path.join(await temp(), "later");
    await writeFile(parent, "a file, not a directory");
    const late = createAttemptFenceStore(parent);
    await assert.rejects(late.admit(TASK, 1));
    await rm(parent);
    assert.deepEqual(await late.admit(TASK, 1), { admitted: true, highest: 1 });
  });
});
