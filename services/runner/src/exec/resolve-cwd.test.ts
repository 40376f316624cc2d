import assert from "node:assert/strict";
import { mkdir, realpath, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { isToolFailureError, ReasonCode } from "@webcodex/contracts";
import { failsWith, tempRoot } from "./exec.test-support.js";
import { resolveCwd } from "./resolve-cwd.js";

describe("resolveCwd", () => {
  let root = "";
  let cleanup = async (): Promise<void> => {};
  before(async () => {
    const temp = await tempRoot();
    cleanup = temp.cleanup;
    root = await realpath(temp.root);
    await mkdir(path.join(root, "src", "lib"), { recursive: true });
    await writeFile(path.join(root, "file.txt"), "x");
    await symlink("/", path.join(root, "escape"));
    await symlink(path.join(root, "src"), path.join(root, "inside"));
    await symlink(".", path.join(root, "self"));
    await symlink("..", path.join(root, "src", "up"));
  });
  after(() => cleanup());

  it("defaults to the root, reported as '.'", async () => {
    assert.deepEqual(await resolveCwd(root, undefined), { absolute: root, relative: "." });
  });

  it("accepts nested and dotted project-relative paths, reporting the real directory", async () => {
    assert.equal((await resolveCwd(root, "src/lib")).relative, "src/lib");
    assert.equal((await resolveCwd(root, "src/../src/lib/..")).relative, "src");
    assert.equal((await resolveCwd(root, "inside/lib")).relative, "src/lib");
    assert.deepEqual(await resolveCwd(root, "."), { absolute: root, relative: "." });
    // A symlink that leads back to the root itself stays inside.
    assert.deepEqual(await resolveCwd(root, "self"), { absolute: root, relative: "." });
    assert.deepEqual(await resolveCwd(root, "src/up"), { absolute: root, relative: "." });
    assert.deepEqual(await resolveCwd(root, ""), { absolute: root, relative: "." });
  });

  it("refuses absolute paths even inside the root, like every other project path", async () => {
    await assert.rejects(resolveCwd(root, path.join(root, "src")), failsWith(ReasonCode.pathOutsideProject, "absolute_path"));
    await assert.rejects(resolveCwd(root, root), failsWith(ReasonCode.pathOutsideProject, "absolute_path"));
  });

  it("refuses '..' escapes (existing or not) and outward symlinks, naming the cwd field", async () => {
    await assert.rejects(resolveCwd(root, ".."), failsWith(ReasonCode.pathOutsideProject, "parent_escape"));
    await assert.rejects(resolveCwd(root, "src/../../no-such-dir"), failsWith(ReasonCode.pathOutsideProject, "parent_escape"));
    await assert.rejects(resolveCwd(root, "/etc"), failsWith(ReasonCode.pathOutsideProject, "absolute_path"));
    await assert.rejects(resolveCwd(root, "escape"), failsWith(ReasonCode.pathOutsideProject, "symlink_escape"));
    await assert.rejects(resolveCwd(root, "escape/tmp"), failsWith(ReasonCode.pathOutsideProject, "symlink_escape"));
    await assert.rejects(resolveCwd(root, "escape/no-such-dir"), failsWith(ReasonCode.pathOutsideProject));
    await assert.rejects(
      resolveCwd(root, ".."),
      (error: unknown) => isToolFailureError(error) && error.failure.evidence?.["field"] === "cwd" && error.failure.failure_stage === "resolution",
    );
  });

  it("reports a missing directory as path_not_found and a file as invalid", async () => {
    await assert.rejects(resolveCwd(root, "nope"), failsWith(ReasonCode.pathNotFound));
    await assert.rejects(resolveCwd(root, "file.txt"), failsWith(ReasonCode.invalidValue, "cwd_not_a_directory"));
  });
});
