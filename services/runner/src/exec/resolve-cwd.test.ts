import assert from "node:assert/strict";
import { mkdir, realpath, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { failsWith, tempRoot } from "./exec-fixtures.js";
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
  });
  after(() => cleanup());

  it("defaults to the root, reported as '.'", async () => {
    assert.deepEqual(await resolveCwd(root, undefined), { absolute: root, relative: "." });
  });

  it("accepts nested, dotted and absolute paths that stay inside", async () => {
    assert.equal((await resolveCwd(root, "src/lib")).relative, "src/lib");
    assert.equal((await resolveCwd(root, "src/../src/lib/..")).relative, "src");
    assert.equal((await resolveCwd(root, path.join(root, "src"))).relative, "src");
    assert.equal((await resolveCwd(root, "inside/lib")).relative, "src/lib");
  });

  it("refuses '..' escapes, absolute outside paths and outward symlinks", async () => {
    const outside = failsWith(ReasonCode.pathOutsideProject);
    await assert.rejects(resolveCwd(root, ".."), outside);
    await assert.rejects(resolveCwd(root, "src/../../x"), outside);
    await assert.rejects(resolveCwd(root, "/etc"), outside);
    await assert.rejects(resolveCwd(root, "escape"), outside);
    await assert.rejects(resolveCwd(root, "escape/tmp"), outside);
  });

  it("reports a missing directory as path_not_found and a file as invalid", async () => {
    await assert.rejects(resolveCwd(root, "nope"), failsWith(ReasonCode.pathNotFound));
    await assert.rejects(resolveCwd(root, "file.txt"), failsWith(ReasonCode.invalidValue, "cwd_not_a_directory"));
  });
});
