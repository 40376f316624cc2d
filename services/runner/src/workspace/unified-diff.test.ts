import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { TextHunk } from "./types.js";
import { parseNameStatus, parseNumStat, parseUnifiedDiff, unquote } from "./unified-diff.js";

const limits = { maxHunks: 10, maxLinesPerHunk: 200, maxLineChars: 1000 };

describe("unified diff parsing", () => {
  it("reads hunk bodies by their declared counts, so header-like content lines stay content", () => {
    const diff = [
      "diff --git a/x.md b/x.md",
      "index 1..2 100644",
      "--- a/x.md",
      "+++ b/x.md",
      "@@ -1,2 +1,2 @@ intro",
      "--- a/fake",
      "++++ b/fake",
      " diff --git a/nope b/nope",
      "\\ No newline at end of file",
      "",
    ].join("\n");
    const { hunks, totalHunks } = parseUnifiedDiff(diff, limits);
    assert.equal(totalHunks, 1);
    assert.deepEqual(hunks[0], {
      path: "x.md",
      old_start: 1,
      old_lines: 2,
      new_start: 1,
      new_lines: 2,
      header: "@@ -1,2 +1,2 @@ intro",
      lines: ["--- a/fake", "++++ b/fake", " diff --git a/nope b/nope", "\\ No newline at end of file"],
      truncated: false,
    });
  });

  it("marks a hunk whose body ends before its declared line counts as truncated", () => {
    const diff = [
      "diff --git a/a.txt b/a.txt",
      "--- a/a.txt",
      "+++ b/a.txt",
      "@@ -1,3 +1,3 @@",
      " one",
      "-two",
      "diff --git a/b.txt b/b.txt",
      "--- a/b.txt",
      "+++ b/b.txt",
      "@@ -1 +1 @@",
      "-x",
      "+y",
      "",
    ].join("\n");
    const { hunks, totalHunks } = parseUnifiedDiff(diff, limits);
    assert.equal(totalHunks, 2);
    const [cutShort, whole] = hunks as TextHunk[];
    assert.deepEqual([cutShort?.path, cutShort?.lines, cutShort?.truncated], ["a.txt", [" one", "-two"], true]);
    assert.deepEqual([whole?.path, whole?.lines, whole?.truncated], ["b.txt", ["-x", "+y"], false], "the next file is still read");
  });

  it("marks the last hunk truncated when the text ends before its counts are used up", () => {
    const diff = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one", ""].join("\n");
    const [hunk] = parseUnifiedDiff(diff, limits).hunks as TextHunk[];
    assert.deepEqual([hunk?.lines, hunk?.truncated], [[" one"], true]);
  });

  it("a '+' line beyond the new-side count ends the hunk as cut rather than being counted", () => {
    const diff = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,1 @@", "+new", "+extra", ""].join("\n");
    const [hunk] = parseUnifiedDiff(diff, limits).hunks as TextHunk[];
    assert.deepEqual([hunk?.lines, hunk?.truncated], [["+new"], true]);
  });

  it("reads an empty line inside a body as an empty context line (diff.suppressBlankEmpty)", () => {
    const diff = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,3 +1,3 @@", "-a", "+b", "", " c", ""].join("\n");
    const [hunk] = parseUnifiedDiff(diff, limits).hunks as TextHunk[];
    assert.deepEqual([hunk?.lines, hunk?.truncated], [["-a", "+b", "", " c"], false]);
  });

  it("a cut of the producer's output truncates the hunk open at the cut and drops the partial line", () => {
    const complete = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1 +1 @@", "-a", "+b"].join("\n") + "\n";
    // Counts used up, but a "\ No newline at end of file" line may have followed: not provably whole.
    const atBoundary = parseUnifiedDiff(complete, limits, { cut: true }).hunks[0] as TextHunk;
    assert.deepEqual([atBoundary.lines, atBoundary.truncated], [["-a", "+b"], true]);
    const midLine = parseUnifiedDiff(["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " a", "-partial li"].join("\n"), limits, {
      cut: true,
    });
    const hunk = midLine.hunks[0] as TextHunk;
    assert.deepEqual([hunk.lines, hunk.truncated], [[" a"], true]);
    // Without the cut, the same complete text is a complete hunk.
    assert.equal((parseUnifiedDiff(complete, limits).hunks[0] as TextHunk).truncated, false);
  });

  it("a cut after the next file's header leaves the finished hunk complete", () => {
    const text = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1 +1 @@", "-a", "+b", "diff --git a/b.txt b/b.txt", "--- a/b.txt", ""].join(
      "\n",
    );
    const { hunks, totalHunks } = parseUnifiedDiff(text, limits, { cut: true });
    assert.equal(totalHunks, 1);
    assert.equal((hunks[0] as TextHunk).truncated, false);
  });

  it("takes the path of a deleted file from the old side and unquotes unusual names", () => {
    const diff = [
      'diff --git "a/t\\303\\251st\\tx" "b/t\\303\\251st\\tx"',
      "deleted file mode 100644",
      '--- "a/t\\303\\251st\\tx"',
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-gone",
      "",
    ].join("\n");
    assert.equal(parseUnifiedDiff(diff, limits).hunks[0]?.path, "tést\tx");
    assert.equal(unquote('"a\\"b\\\\c"'), 'a"b\\c');
    assert.equal(unquote("plain"), "plain");
  });

  it("parses -z name-status and numstat including renames and binary files", () => {
    assert.deepEqual(parseNameStatus("M\0a b.txt\0R087\0old.txt\0new.txt\0D\0gone\0"), [
      { path: "a b.txt", status: "modified" },
      { path: "new.txt", status: "renamed", previous_path: "old.txt" },
      { path: "gone", status: "deleted" },
    ]);
    const stats = parseNumStat("3\t1\ta b.txt\0" + "0\t2\t\0old.txt\0new.txt\0" + "-\t-\timg.png\0");
    assert.deepEqual(stats.get("a b.txt"), { added: 3, removed: 1, binary: false });
    assert.deepEqual(stats.get("new.txt"), { added: 0, removed: 2, binary: false });
    assert.deepEqual(stats.get("img.png"), { binary: true });
  });
});
