import assert from "node:assert/strict";
import { closeSync, readFileSync, realpathSync } from "node:fs";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode, ToolFailureError } from "@webcodex/contracts";
import { expectFailure, tempDir } from "./workspace.test-support.js";
import { createPathPolicy, errnoCode, globToRegExp, isInside, normalizeProjectPath, openInside, withPinnedParent } from "./path-policy.js";

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

  it("globs: ? and [...] stay in one segment, [!...] negates, an unclosed [ is literal, braces nest, regex characters are literal", () => {
    const m = (glob: string, rel: string) => globToRegExp(glob).test(rel);
    assert.ok(m("a?c", "abc") && !m("a?c", "a/c") && !m("a?c", "abbc"));
    assert.ok(m("f[0-9].txt", "f7.txt") && !m("f[0-9].txt", "fx.txt"));
    assert.ok(m("f[!0-9].txt", "fx.txt") && !m("f[!0-9].txt", "f7.txt"));
    assert.ok(m("f[!].txt", "f[!].txt") || m("f[!].txt", "f!.txt"));
    assert.ok(m("a[b", "a[b") && !m("a[b", "ab"));
    assert.ok(m("k[\\]", "k\\"));
    assert.ok(m("{a,{b,c}}.key", "c.key") && !m("{a,{b,c}}.key", "d.key"));
    assert.ok(m("x,y}.txt", "x,y}.txt"), "a comma or brace outside braces is literal");
    assert.ok(m("a.b+(c)$", "a.b+(c)$") && !m("a.b", "aXb"));
    assert.ok(m("**/x", "x") && m("**/x", "d/e/x") && !m("**/x", "dx"));
    assert.ok(m("a**b", "a/q/b") && m("a/**b", "a/qb") && !m("a/**/b", "a/qb"));
    assert.ok(m("/top.pem", "top.pem") && !m("/top.pem", "d/top.pem"));
    assert.ok(!m("*.pem", "x.pem.bak"));
    assert.ok(m("d/**", "d/e/f") && !m("d/*", "d/e/f"));
    assert.ok(m("*", ".hidden"));
  });

  it("names why a path is refused: not a string, a NUL, an absolute path (with the project path meant), the root", async () => {
    const root = await tempDir();
    const resolver = await createPathPolicy(root).open();
    const failure = async (input: unknown, options?: { allowRoot?: boolean }) => {
      try {
        await resolver.resolve(input as string, options);
      } catch (error) {
        if (error instanceof ToolFailureError) return error.failure;
        throw error;
      }
      return assert.fail(`resolved ${String(input)}`);
    };
    assert.equal((await failure(7)).detail_code, "path_not_string");
    assert.equal((await failure("a\0b")).detail_code, "nul_in_path");
    assert.equal((await failure(`${resolver.rootReal}/a\0b`)).detail_code, "nul_in_path");
    const absolute = await failure(`${resolver.rootReal}/src//a.ts`);
    assert.equal(absolute.reason_code, ReasonCode.pathOutsideProject);
    assert.equal(absolute.detail_code, "absolute_path");
    assert.deepEqual(absolute.evidence, { path: `${resolver.rootReal}/src//a.ts`, project_path: "src/a.ts" });
    assert.match(absolute.message ?? "", /retry with project_path/);
    const outside = await failure("/etc/passwd");
    assert.deepEqual(outside.evidence, { path: "/etc/passwd" });
    assert.match(outside.message ?? "", /relative to the project root/);
    const escape = await failure("a/../../b");
    assert.equal(escape.detail_code, "parent_escape");
    assert.deepEqual(escape.evidence, { path: "a/../../b" });
    const rootRefused = await failure("./");
    assert.equal(rootRefused.detail_code, "root_not_allowed");
    assert.deepEqual(rootRefused.evidence, { path: "./" });
    assert.deepEqual(await resolver.resolve("", { allowRoot: true }), { rel: "", entry: resolver.rootReal, real: resolver.rootReal, realRel: "" });
    assert.equal(normalizeProjectPath("a//"), "a");
  });

  it("resolves the entry (parent followed, last component not) apart from the real path", async () => {
    const root = await tempDir();
    await writeFile(path.join(root, "real.txt"), "x");
    await symlink("real.txt", path.join(root, "alias.txt"));
    await writeFile(path.join(root, "plain"), "x");
    const resolver = await createPathPolicy(root).open();
    const r = resolver.rootReal;
    assert.deepEqual(await resolver.resolve("alias.txt"), { rel: "alias.txt", entry: `${r}/alias.txt`, real: `${r}/real.txt`, realRel: "real.txt" });
    // A path below a regular file does not exist: resolved from its nearest existing ancestor.
    assert.deepEqual(await resolver.resolve("plain/sub"), { rel: "plain/sub", entry: `${r}/plain/sub`, real: `${r}/plain/sub`, realRel: "plain/sub" });
    assert.deepEqual(await resolver.resolve("new/dir/f.txt"), {
      rel: "new/dir/f.txt",
      entry: `${r}/new/dir/f.txt`,
      real: `${r}/new/dir/f.txt`,
      realRel: "new/dir/f.txt",
    });
  });

  it("a read needs only where the path ends inside; a write also needs the entry's directory inside", async () => {
    const root = await tempDir();
    const outside = await tempDir();
    await writeFile(path.join(root, "inside.txt"), "x");
    await symlink(path.join(realpathSync(root), "inside.txt"), path.join(outside, "back.txt"));
    await symlink(outside, path.join(root, "out"));
    const resolver = await createPathPolicy(root).open();
    assert.equal((await resolver.resolve("out/back.txt", { realOnly: true })).realRel, "inside.txt");
    const f = await expectFailure(resolver.resolve("out/back.txt"), ReasonCode.pathOutsideProject);
    assert.equal(f.detail_code, "symlink_escape");
    assert.deepEqual(f.evidence, { path: "out/back.txt" });
    const read = await expectFailure(resolver.resolve("out", { realOnly: true }), ReasonCode.pathOutsideProject);
    assert.equal(read.detail_code, "symlink_escape");
  });

  it("a symlink loop and a dangling symlink fail closed with their own codes", async () => {
    const root = await tempDir();
    await symlink("b", path.join(root, "a"));
    await symlink("a", path.join(root, "b"));
    await symlink("nowhere", path.join(root, "dangling"));
    const resolver = await createPathPolicy(root).open();
    const loop = await expectFailure(resolver.resolve("a/x"), ReasonCode.pathOutsideProject);
    assert.equal(loop.detail_code, "symlink_loop");
    assert.deepEqual(loop.evidence, { path: "a/x" });
    const dangling = await expectFailure(resolver.resolve("dangling/x"), ReasonCode.pathOutsideProject);
    assert.equal(dangling.detail_code, "dangling_symlink");
    assert.deepEqual(dangling.evidence, { path: "dangling/x" });
  });

  it("refuses writes to the root and to a path whose real path is sensitive, saying so", async () => {
    const root = await tempDir();
    await mkdir(path.join(root, ".git"));
    await symlink(".git", path.join(root, "meta"));
    const resolver = await createPathPolicy(root).open();
    const writable = async (input: string) => {
      try {
        resolver.assertWritable(await resolver.resolve(input, { allowRoot: true }));
        return undefined;
      } catch (error) {
        return error instanceof ToolFailureError ? error.failure : assert.fail(String(error));
      }
    };
    assert.equal(await writable("src/a.ts"), undefined);
    for (const input of [".", "meta/config", ".git/config"]) {
      const f = await writable(input);
      assert.equal(f?.reason_code, ReasonCode.sensitivePath, input);
    }
    const f = await writable("meta/config");
    assert.deepEqual(f?.evidence, { path: "meta/config" });
    assert.match(f?.message ?? "", /sensitive-path policy/);
    assert.equal(createPathPolicy("/unused").isSensitive(""), false);
    assert.equal(createPathPolicy("/unused", []).isSensitive(".env"), false);
    assert.equal(createPathPolicy("/unused", []).isSensitive("a/.git/x"), true);
  });

  it("containment is by whole path segments", () => {
    assert.equal(isInside("/r/root", "/r/root"), true);
    assert.equal(isInside("/r/root", "/r/root/a"), true);
    assert.equal(isInside("/r/root", "/r/rootx"), false);
    assert.equal(isInside("/r/root/", "/r/root/a"), true);
    assert.equal(isInside("/r/root/", "/r/rootx"), false);
    assert.equal(errnoCode({ code: "ENOENT" }), "ENOENT");
    assert.equal(errnoCode({ code: 2 }), undefined);
    assert.equal(errnoCode(null), undefined);
    assert.equal(errnoCode("ENOENT"), undefined);
  });

  it("opens a resolved file without following a swapped last component, and pins a parent for writes", async () => {
    const root = await tempDir();
    const outside = await tempDir();
    await writeFile(path.join(root, "f.txt"), "inside");
    await writeFile(path.join(outside, "secret"), "outside");
    await symlink(path.join(outside, "secret"), path.join(root, "swapped"));
    const rootReal = realpathSync(root);
    const fd = openInside(rootReal, path.join(rootReal, "f.txt"), "f.txt");
    assert.equal(readFileSync(fd, "utf8"), "inside");
    closeSync(fd);
    const swapped = await expectFailure(
      Promise.resolve().then(() => openInside(rootReal, path.join(rootReal, "swapped"), "swapped")),
      ReasonCode.pathOutsideProject,
    );
    assert.equal(swapped.detail_code, "symlink_swapped");
    assert.deepEqual(swapped.evidence, { path: "swapped" });
    // A descriptor that names a file outside the root is refused too.
    const escaped = await expectFailure(
      Promise.resolve().then(() => openInside(rootReal, path.join(realpathSync(outside), "secret"), "x")),
      ReasonCode.pathOutsideProject,
    );
    assert.equal(escaped.detail_code, "symlink_swapped");
    assert.throws(
      () => openInside(rootReal, path.join(rootReal, "missing"), "missing"),
      (e: unknown) => errnoCode(e) === "ENOENT",
    );
    const written = await withPinnedParent(rootReal, path.join(rootReal, "f.txt"), "f.txt", async (pinned) => {
      assert.match(pinned, /^\/proc\/self\/fd\/\d+\/f\.txt$/);
      await writeFile(pinned, "pinned");
      return "done";
    });
    assert.equal(written, "done");
    assert.equal(readFileSync(path.join(root, "f.txt"), "utf8"), "pinned");
  });

  it("edge cases: a link to the root itself is readable, an over-long name is unresolvable, a missing root is named", async () => {
    const root = await tempDir();
    await symlink(".", path.join(root, "self"));
    const resolver = await createPathPolicy(root).open();
    const r = resolver.rootReal;
    // A read follows the whole path; where it ends (the root) is inside. (entry is not used by reads.)
    const self = await resolver.resolve("self", { realOnly: true });
    assert.deepEqual([self.real, self.realRel], [r, ""]);
    const long = await expectFailure(resolver.resolve("a".repeat(300)), ReasonCode.pathOutsideProject);
    assert.equal(long.detail_code, "unresolvable_path");
    await expectFailure(resolver.resolve("/etc/passwd"), ReasonCode.pathOutsideProject).then((f) => assert.equal(f.detail_code, "absolute_path"));
    const missing = await expectFailure(createPathPolicy(path.join(root, "no-such-root")).open(), ReasonCode.pathNotFound);
    assert.equal(missing.detail_code, "project_root_missing");
    assert.match(missing.message ?? "", /workspace root does not exist/);
  });

  it("globs: ** inside a segment spans directories only as .*, and commas or braces outside braces stay literal", () => {
    const m = (glob: string, rel: string) => globToRegExp(glob).test(rel);
    assert.ok(!m("a**/b", "ab") && m("a**/b", "aq/b"));
    assert.ok(!m("x,y", "x") && m("x,y", "x,y"));
    assert.ok(m("{a,b}x,y", "ax,y") && !m("{a,b}x,y", "y"));
  });
});
