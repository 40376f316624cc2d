import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { createDirectSpawner } from "../exec/spawner.js";
import { expectFailure, git, tempWorkspace, writeTree } from "./workspace.test-support.js";
import { runGitBounded } from "./git-cli.js";
import { MAX_COUNTED_UNTRACKED } from "./git-review.js";
import type { TextHunk } from "./types.js";

async function repoWithChanges() {
  const { root, ws } = await tempWorkspace({ "keep.txt": "one\ntwo\nthree\n", "old name.txt": "rename me\n", "drop.txt": "bye\n", ".gitignore": "*.log\n" });
  git(root, "init", "-q");
  git(root, "add", "-A");
  git(root, "commit", "-q", "-m", "init");
  await writeFile(path.join(root, "keep.txt"), "one\n2\nthree\nfour\n");
  await writeTree(root, { "added.txt": "new\nfile\n", "untracked.txt": "u1\nu2\nu3\n", "noise.log": "ignored\n", "bin.dat": Buffer.from([0, 1, 2]) });
  git(root, "add", "added.txt");
  git(root, "mv", "old name.txt", "new name.txt");
  git(root, "rm", "-q", "drop.txt");
  return { root, ws };
}

describe("git review", () => {
  it("read_workspace_changes lists modified, added, renamed, deleted and untracked files with counts", async () => {
    const { ws } = await repoWithChanges();
    const result = await ws.readWorkspaceChanges({});
    assert.equal(result.branch, "main");
    assert.match(result.head ?? "", /^[0-9a-f]{40}$/);
    assert.deepEqual(result.changes, [
      { path: "added.txt", status: "added", added_lines: 2, removed_lines: 0 },
      { path: "bin.dat", status: "untracked", counts_unknown: true, binary: true },
      { path: "drop.txt", status: "deleted", added_lines: 0, removed_lines: 1 },
      { path: "keep.txt", status: "modified", added_lines: 2, removed_lines: 1 },
      { path: "new name.txt", status: "renamed", previous_path: "old name.txt", added_lines: 0, removed_lines: 0 },
      { path: "untracked.txt", status: "untracked", added_lines: 3, removed_lines: 0 },
    ]);
    assert.deepEqual([result.total_changes, result.truncated], [6, false]);
  });

  it("read_git_diff_hunks returns the hunks of tracked changes", async () => {
    const { ws } = await repoWithChanges();
    const result = await ws.readGitDiffHunks({});
    const keep = result.hunks.find((h): h is TextHunk => h.path === "keep.txt" && !("binary" in h));
    assert.deepEqual(keep, {
      path: "keep.txt",
      old_start: 1,
      old_lines: 3,
      new_start: 1,
      new_lines: 4,
      header: "@@ -1,3 +1,4 @@",
      lines: [" one", "-two", "+2", " three", "+four"],
      truncated: false,
    });
    assert.deepEqual(
      result.hunks.map((h) => h.path),
      ["added.txt", "drop.txt", "keep.txt"],
    );
    assert.deepEqual([result.total_hunks, result.truncated], [3, false]);
  });

  it("read_git_diff_hunks bounds hunks and lines and marks what it cut", async () => {
    const { root, ws } = await tempWorkspace({ "big.txt": Array.from({ length: 400 }, (_, i) => `l${i}\n`).join(""), "x.txt": "x\n" });
    git(root, "init", "-q");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "init");
    await writeFile(path.join(root, "big.txt"), Array.from({ length: 400 }, (_, i) => `changed ${i}\n`).join(""));
    await writeFile(path.join(root, "x.txt"), "y\n");
    const bounded = await ws.readGitDiffHunks({ max_hunks: 1 });
    assert.deepEqual([bounded.hunks.length, bounded.total_hunks, bounded.truncated], [1, 2, true]);
    const hunk = bounded.hunks[0] as TextHunk;
    assert.equal(hunk.path, "big.txt");
    assert.equal(hunk.lines.length, 200);
    assert.equal(hunk.truncated, true);
    assert.equal(hunk.omitted_lines, 600);
    const onlyX = await ws.readGitDiffHunks({ paths: ["x.txt"], context_lines: 0 });
    assert.deepEqual(
      onlyX.hunks.map((h) => h.path),
      ["x.txt"],
    );
  });

  it("a git observation past its byte cap returns the part read and says it was cut", async () => {
    const { root } = await repoWithChanges();
    const git = { cwd: root, spawner: createDirectSpawner() };
    const whole = await runGitBounded(git, ["diff", "HEAD"], 1 << 20);
    assert.equal(whole.cut, false);
    const cut = await runGitBounded(git, ["diff", "HEAD"], 64);
    assert.equal(cut.cut, true);
    assert.ok(cut.stdout.length <= 64 && whole.stdout.startsWith(cut.stdout), "a prefix of the whole output");
  });

  it("read_git_diff_hunks marks binary diffs", async () => {
    const { root, ws } = await tempWorkspace({ "img.bin": Buffer.from([0, 1, 2]) });
    git(root, "init", "-q");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "init");
    await writeFile(path.join(root, "img.bin"), Buffer.from([0, 9, 9, 9]));
    const result = await ws.readGitDiffHunks({});
    assert.deepEqual(result.hunks, [{ path: "img.bin", binary: true }]);
  });

  it("read_git_review_summary totals the changes against a base commit", async () => {
    const { root, ws } = await repoWithChanges();
    const first = git(root, "rev-parse", "HEAD").trim();
    const summary = await ws.readGitReviewSummary({});
    assert.equal(summary.base, "HEAD");
    assert.equal(summary.base_commit, first);
    // bin.dat has no line counts: the sums cover the other five and say they are lower bounds.
    assert.deepEqual(summary.totals, { files: 6, added_lines: 7, removed_lines: 2, lines_lower_bound: true, files_with_unknown_counts: 1 });
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "second");
    const againstFirst = await ws.readGitReviewSummary({ base: first });
    assert.equal(againstFirst.base_commit, first);
    assert.deepEqual(
      againstFirst.files.map((f) => `${f.status}:${f.path}`),
      ["added:added.txt", "added:bin.dat", "deleted:drop.txt", "modified:keep.txt", "renamed:new name.txt", "added:untracked.txt"],
    );
    const failure = await expectFailure(ws.readGitReviewSummary({ base: "no-such-branch" }), ReasonCode.invalidValue);
    assert.equal(failure.detail_code, "unknown_base");
    await expectFailure(ws.readGitReviewSummary({ base: "--output=/tmp/x" }), ReasonCode.invalidValue);
  });

  it("read_git_review_summary flags uncounted files as unknown, not zero or text, and its totals as lower bounds", async () => {
    const files: Record<string, string> = { "tracked.txt": "a\n" };
    const { root, ws } = await tempWorkspace(files);
    git(root, "init", "-q");
    git(root, "add", "-A");
    git(root, "commit", "-q", "-m", "init");
    const exact = await ws.readGitReviewSummary({});
    assert.deepEqual(exact.totals, { files: 0, added_lines: 0, removed_lines: 0 }, "no unknowns: exact totals without flags");
    const untracked: Record<string, string> = {};
    for (let i = 0; i <= MAX_COUNTED_UNTRACKED; i++) untracked[`u/${String(i).padStart(4, "0")}.txt`] = "one\ntwo\n";
    await writeTree(root, untracked);
    const summary = await ws.readGitReviewSummary({});
    const unknown = summary.files.filter((f) => f.counts_unknown === true);
    assert.equal(unknown.length, 1, "one untracked file beyond the counting cap");
    assert.equal(unknown[0]?.added_lines, undefined);
    assert.equal(unknown[0]?.binary, undefined, "not inspected: binary stays unknown, never false");
    assert.deepEqual(summary.totals, {
      files: MAX_COUNTED_UNTRACKED + 1,
      added_lines: 2 * MAX_COUNTED_UNTRACKED,
      removed_lines: 0,
      lines_lower_bound: true,
      files_with_unknown_counts: 1,
    });
  });

  it("works on a repository without commits", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    git(root, "init", "-q");
    git(root, "add", "a.txt");
    const result = await ws.readWorkspaceChanges({});
    assert.equal(result.head, undefined);
    assert.deepEqual(result.changes, [{ path: "a.txt", status: "added", added_lines: 1, removed_lines: 0 }]);
  });

  it("fails with not_a_git_repository outside a work tree", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "a\n" });
    await expectFailure(ws.readWorkspaceChanges({}), ReasonCode.notAGitRepository);
    await expectFailure(ws.readGitDiffHunks({}), ReasonCode.notAGitRepository);
  });
});
