import assert from "node:assert/strict";
import { mkdir, symlink } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode, ToolFailureError } from "@webcodex/contracts";
import { expectFailure, tempDir } from "./workspace.test-support.js";
import { createPathPolicy, globToRegExp, normalizeProjectPath } from "./path-policy.js";

const reasonOf = (run: () => unknown): string | undefined => {
  try {
    run();
    return undefined;
  } catch (error) {
    return error instanceof ToolFailureError ? error.failure.reason_code : "not a ToolFailureError";
  }
};

describe("path policy", () => {
  it("normalizes project-relative POSIX paths and maps '' and '.' to the root", () => {
    assert.equal(normalizeProjectPath(""), "");
    assert.equal(normalizeProjectPath("."), "");
    assert.equal(normalizeProjectPath("./src//a.ts"), "src/a.ts");
    assert.equal(normalizeProjectPath("src/"), "src");
    assert.equal(normalizeProjectPath("src/x/../a.ts"), "src/a.ts");
  });

  it("refuses absolute paths and '..' escapes as path_outside_project", () => {
    for (const input of ["/etc/passwd", "..", "../a", "a/../../b"]) {
      assert.equal(
        reasonOf(() => normalizeProjectPath(input)),
        ReasonCode.pathOutsideProject,
        input,
      );
    }
  });

  it("refuses a symlinked directory and a dangling symlink that lead outside", async () => {
    const root = await tempDir();
    const outside = await tempDir();
    await symlink(outside, path.join(root, "out"));
    await symlink(path.join(outside, "nothing-here"), path.join(root, "dangling"));
    const resolver = await createPathPolicy(root).open();
    await expectFailure(resolver.resolve("out"), ReasonCode.pathOutsideProject);
    await expectFailure(resolver.resolve("out/sub/new.txt"), ReasonCode.pathOutsideProject);
    await expectFailure(resolver.resolve("dangling"), ReasonCode.pathOutsideProject);
  });

  it("accepts symlinks that stay inside the root and reports their real path", async () => {
    const root = await tempDir();
    await mkdir(path.join(root, "real"));
    await symlink("real", path.join(root, "alias"));
    const resolver = await createPathPolicy(root).open();
    const resolved = await resolver.resolve("alias/new.txt");
    assert.equal(resolved.rel, "alias/new.txt");
    assert.equal(resolved.realRel, "real/new.txt");
  });

  it("refuses the root for single-file operations unless allowed", async () => {
    const resolver = await createPathPolicy(await tempDir()).open();
    await expectFailure(resolver.resolve("."), ReasonCode.invalidValue);
    assert.equal((await resolver.resolve(".", { allowRoot: true })).rel, "");
  });

  it("marks .git internals and the default credential globs as sensitive for writes", () => {
    const policy = createPathPolicy("/unused");
    for (const sensitive of [
      ".git/config",
      "sub/.git/HEAD",
      ".GIT/config",
      ".env",
      ".ENV",
      "a/.Env.Local",
      "certs/X.PEM",
      "ID_RSA",
      ".SSH/config",
      "a/.env",
      ".env.local",
      "certs/x.pem",
      "id_rsa",
      "home/id_rsa.pub",
      ".ssh/config",
      "u/.ssh/keys/k",
    ]) {
      assert.equal(policy.isSensitive(sensitive), true, sensitive);
    }
    for (const ordinary of ["src/env.ts", ".envrc", "pem.txt", "git/config", ".gitignore", "ssh/config"]) {
      assert.equal(policy.isSensitive(ordinary), false, ordinary);
    }
  });

  it("compiles globs with ** across directories, * within one segment and braces", () => {
    assert.ok(globToRegExp("src/**/*.ts").test("src/a/b/c.ts"));
    assert.ok(globToRegExp("src/**/*.ts").test("src/c.ts"));
    assert.ok(!globToRegExp("src/*.ts").test("src/a/c.ts"));
    assert.ok(globToRegExp("*.{key,crt}").test("deep/dir/site.crt"));
    assert.ok(globToRegExp("secrets/**").test("secrets"));
    assert.ok(!globToRegExp("secrets/**").test("secretsx/a"));
  });
});
