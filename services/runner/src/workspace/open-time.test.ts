import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { link, mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { expectFailure, revisionOf, tempDir, tempWorkspace } from "./workspace.test-support.js";
import { ReasonCode } from "@webcodex/contracts";

/**
 * A concurrent process (a Job) swapping an entry for a symlink to outside the root between the
 * Runner's check and its open must never make a read return, or a write reach, the outside.
 */
function swapper(script: string, args: string[]): ChildProcess {
  return spawn(process.execPath, ["-e", script, ...args], { stdio: "ignore" });
}

const FILE_SWAP = `
const fs = require("node:fs"); const [root, outside] = process.argv.slice(1);
for (;;) { try {
  fs.symlinkSync(outside, root + "/l.tmp"); fs.renameSync(root + "/l.tmp", root + "/f");
  fs.writeFileSync(root + "/f.tmp", "inside"); fs.renameSync(root + "/f.tmp", root + "/f");
} catch {} }`;

const DIR_SWAP = `
const fs = require("node:fs"); const [root, outside] = process.argv.slice(1);
for (;;) { try {
  fs.symlinkSync(outside, root + "/l.tmp"); fs.renameSync(root + "/l.tmp", root + "/d");
  fs.rmSync(root + "/d"); fs.mkdirSync(root + "/d.tmp", { recursive: true }); fs.writeFileSync(root + "/d.tmp/x", "inside");
  fs.renameSync(root + "/d.tmp", root + "/d");
  fs.rmSync(root + "/d", { recursive: true, force: true });
} catch {} }`;

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const gone = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await gone;
}

describe("open-time confinement", () => {
  it("a file swapped for a symlink to outside never yields outside content in 10,000 reads", async () => {
    const outsideDir = await tempDir();
    const outside = path.join(outsideDir, "secret");
    await writeFile(outside, "OUTSIDE-SECRET");
    const { root, ws } = await tempWorkspace({ f: "inside" });
    const child = swapper(FILE_SWAP, [root, outside]);
    let inside = 0;
    try {
      for (let i = 0; i < 10_000; i++) {
        const { items } = await ws.readFiles({ files: [{ path: "f" }] });
        const item = items[0];
        if (item?.success === true && "content" in item) {
          assert.equal(item.content.includes("OUTSIDE"), false, `read ${i} returned the outside file`);
          inside++;
        }
      }
    } finally {
      await stop(child);
    }
    assert.ok(inside > 0, "some reads saw the inside file (the probe ran)");
  });

  it("a directory swapped for a symlink to outside never yields outside content in 10,000 reads", async () => {
    const outsideDir = await tempDir();
    await writeFile(path.join(outsideDir, "x"), "OUTSIDE-SECRET");
    const { root, ws } = await tempWorkspace({ "d/x": "inside" });
    const child = swapper(DIR_SWAP, [root, outsideDir]);
    try {
      for (let i = 0; i < 10_000; i++) {
        const { items } = await ws.readFiles({ files: [{ path: "d/x" }] });
        const item = items[0];
        if (item?.success === true && "content" in item) assert.equal(item.content.includes("OUTSIDE"), false, `read ${i} returned the outside file`);
      }
    } finally {
      await stop(child);
    }
  });

  it("creates into a directory swapped for a symlink to outside never land outside", async () => {
    const outsideDir = await tempDir();
    const { root, ws } = await tempWorkspace({ "d/x": "inside" });
    const child = swapper(DIR_SWAP, [root, outsideDir]);
    try {
      for (let i = 0; i < 2_000; i++) {
        await ws.editProjectFiles({ changes: [{ kind: "create", path: `d/new-${i}.txt`, content: "written" }] }).catch(() => undefined);
      }
    } finally {
      await stop(child);
    }
    assert.deepEqual(
      readdirSync(outsideDir).filter((name) => name !== "x"),
      [],
      "a create reached the outside directory",
    );
  });

  it("an edit through a hard link replaces the workspace entry and leaves the other link's file unchanged", async () => {
    const outsideDir = await tempDir();
    const outside = path.join(outsideDir, "shared.txt");
    await writeFile(outside, "outside\n");
    const { root, ws } = await tempWorkspace({});
    await link(outside, path.join(root, "linked.txt"));
    await ws.editProjectFiles({
      changes: [
        {
          kind: "edit",
          path: "linked.txt",
          expected_read_revision: await revisionOf(ws, "linked.txt"),
          edits: [{ replace_exact: { old_text: "outside", new_text: "changed" } }],
        },
      ],
    });
    assert.equal(await readFile(outside, "utf8"), "outside\n");
    assert.equal(await readFile(path.join(root, "linked.txt"), "utf8"), "changed\n");
  });

  it("a symlink into a sibling folder whose name starts with the root's name is outside", async () => {
    const parent = await tempDir();
    const root = path.join(parent, "proj");
    const sibling = path.join(parent, "proj-other");
    await mkdir(root);
    await mkdir(sibling);
    await writeFile(path.join(sibling, "secret.txt"), "SIBLING");
    await symlink(path.join(sibling, "secret.txt"), path.join(root, "peek.txt"));
    await symlink(sibling, path.join(root, "peekdir"));
    const { createWorkspace } = await import("./workspace.js");
    const ws = createWorkspace({ root });
    const { items } = await ws.readFiles({ files: [{ path: "peek.txt" }, { path: "peekdir/secret.txt" }] });
    for (const item of items) {
      assert.equal(item.success, false);
      if (!item.success) assert.equal(item.error.reason_code, ReasonCode.pathOutsideProject);
    }
    await expectFailure(ws.editProjectFiles({ changes: [{ kind: "create", path: "peekdir/new.txt", content: "x" }] }), ReasonCode.pathOutsideProject);
    assert.equal(existsSync(path.join(sibling, "new.txt")), false);
  });
});
