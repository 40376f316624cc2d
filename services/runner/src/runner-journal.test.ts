import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { createRunner } from "./runner.js";
import { createEditJournal } from "./workspace/edit-journal.js";

const logger = createLogger({ service: "test", level: "silent" });
const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});
async function temp(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "wc-runner-journal-"));
  dirs.push(dir);
  return dir;
}

describe("a Runner's write journal", () => {
  it("on start, rolls back a transaction an earlier process left half-applied before serving any call", async () => {
    const root = await temp();
    const stateDir = await temp();
    await writeFile(path.join(root, "a.txt"), "before a\n");
    await writeFile(path.join(root, "b.txt"), "before b\n");
    // An earlier process recorded its intent, wrote a.txt, and died before b.txt.
    const journal = createEditJournal({ dir: stateDir });
    await journal.begin("edit_project_files", [
      { rel: "a.txt", target: path.join(root, "a.txt"), before: { capture: path.join(root, "a.txt") }, after: { bytes: Buffer.from("after a\n") } },
      { rel: "b.txt", target: path.join(root, "b.txt"), before: { capture: path.join(root, "b.txt") }, after: { bytes: Buffer.from("after b\n") } },
    ]);
    await writeFile(path.join(root, "a.txt.tmp"), "after a\n");
    await (await import("node:fs/promises")).rename(path.join(root, "a.txt.tmp"), path.join(root, "a.txt"));

    const runner = createRunner({ root, stateDir, logger, spawnHost: false });
    try {
      const client = createInProcessClient(RunnerService, runner.service);
      const read = await client.execute({
        callId: "c1",
        tool: "read_files",
        fence: 1n,
        argumentsJson: JSON.stringify({ files: [{ path: "a.txt" }, { path: "b.txt" }] }),
      });
      const items = (JSON.parse(read.resultJson) as { items: Array<{ content: string }> }).items;
      assert.deepEqual(
        items.map((i) => i.content),
        ["before a\n", "before b\n"],
        "the first call already sees the rolled-back state",
      );
      const recovered = await runner.recovery;
      assert.equal(recovered.length, 1);
      assert.equal(recovered[0]?.outcome, "rolled_back");
      assert.deepEqual(recovered[0]?.paths, ["a.txt", "b.txt"]);
    } finally {
      await runner.close();
    }
  });

  it("a configured state directory that cannot be used refuses workspace calls rather than edit without a journal", async () => {
    const root = await temp();
    const blocker = path.join(await temp(), "not-a-directory");
    await writeFile(blocker, "x");
    await writeFile(path.join(root, "a.txt"), "a\n");
    const runner = createRunner({ root, stateDir: blocker, logger, spawnHost: false });
    try {
      const client = createInProcessClient(RunnerService, runner.service);
      const res = await client.execute({
        callId: "c1",
        tool: "edit_project_files",
        fence: 1n,
        argumentsJson: JSON.stringify({ changes: [{ kind: "create", path: "b.txt", content: "b" }] }),
      });
      assert.ok(res.failure !== undefined, "the call is refused");
      await assert.rejects(readFile(path.join(root, "b.txt")), "nothing was written");
    } finally {
      await runner.close();
    }
  });
});
