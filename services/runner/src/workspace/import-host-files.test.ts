import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readFile, symlink } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { expectFailure, readText, revisionOf, tempWorkspace } from "./workspace.test-support.js";

describe("import_host_files: one edit transaction", () => {
  it("a failure while applying the last file rolls back the created and the replaced ones", async () => {
    const { root, ws } = await tempWorkspace(
      { "keep.txt": "old\n" },
      {
        hooks: {
          afterFileApplied: (_path, index) => {
            if (index === 2) throw new Error("injected");
          },
        },
      },
    );
    await expectFailure(
      ws.importHostFiles({
        files: [
          { path: "keep.txt", content: "new\n", overwrite: true, expected_read_revision: await revisionOf(ws, "keep.txt") },
          { path: "fresh/dir/a.bin", content_base64: Buffer.from([0, 1, 2, 255]).toString("base64") },
          { path: "b.txt", content: "b\n" },
        ],
      }),
      ReasonCode.applyFailed,
    );
    assert.equal(await readText(root, "keep.txt"), "old\n");
    assert.equal(existsSync(path.join(root, "fresh")), false, "directories it created are removed");
    assert.equal(existsSync(path.join(root, "b.txt")), false);
  });

  it("keeps the mode of a replaced file and reports the revision of the bytes written", async () => {
    const { root, ws } = await tempWorkspace({ "run.sh": "#!/bin/sh\n" });
    const { chmod, stat } = await import("node:fs/promises");
    await chmod(path.join(root, "run.sh"), 0o755);
    const result = await ws.importHostFiles({
      files: [{ path: "run.sh", content: "#!/bin/sh\necho hi\n", overwrite: true, expected_read_revision: await revisionOf(ws, "run.sh") }],
    });
    assert.equal((await stat(path.join(root, "run.sh"))).mode & 0o777, 0o755);
    assert.deepEqual(result.files, [{ path: "run.sh", bytes: 18, read_revision: await revisionOf(ws, "run.sh"), replaced: true }]);
  });

  it("a symlink leaving the workspace is refused; nothing is written", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    await symlink("/tmp", path.join(root, "out"));
    await expectFailure(
      ws.importHostFiles({
        files: [
          { path: "ok.txt", content: "x" },
          { path: "out/evil.txt", content: "x" },
        ],
      }),
      ReasonCode.pathOutsideProject,
    );
    assert.equal(existsSync(path.join(root, "ok.txt")), false);
  });

  it("a revision given for a file that does not exist is path_not_found, not a silent create", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    await expectFailure(
      ws.importHostFiles({ files: [{ path: "missing.txt", content: "x", overwrite: true, expected_read_revision: "sha256:0" }] }),
      ReasonCode.pathNotFound,
    );
    assert.equal(existsSync(path.join(root, "missing.txt")), false);
    assert.equal(await readFile(path.join(root, "a.txt"), "utf8"), "a\n");
  });
});
