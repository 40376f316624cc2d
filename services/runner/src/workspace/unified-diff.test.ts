import assert from "node:assert/strict";
import { describe, it } from "node:test";
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

  it("takes the path of a deleted file from the old side and unquotes unusual names", () => {
    const diff = ['diff --git "a/t\\303\\251st\\tx" "b/t\\303\\251st\\tx"', "deleted file mode 100644", '--- "a/t\\303\\251st\\tx"', "+++ /dev/null", "@@ -1 +0,0 @@", "-gone", ""].join("\n");
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
