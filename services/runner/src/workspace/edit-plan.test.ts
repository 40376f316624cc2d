import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolFailureError } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { MAX_EXPECTED_MATCH_COUNT, MAX_LISTED_MATCHES, describeRanges, planFileEdits, staleAnchors } from "./edit-plan.js";
import type { ReplaceExactEdit } from "./types.js";

const buf = (s: string) => Buffer.from(s, "utf8");
const edit = (old_text: string, new_text: string, more: Partial<ReplaceExactEdit> = {}): ReplaceExactEdit =>
  ({ replace_exact: { old_text, new_text }, ...more }) as ReplaceExactEdit;
/** The preflight failure planning throws. */
function refusal(fn: () => unknown): ToolFailure {
  try {
    fn();
  } catch (error) {
    if (error instanceof ToolFailureError) {
      assert.equal(error.failure.failure_stage, "preflight");
      assert.equal(error.failure.state_changed, false);
      return error.failure;
    }
    throw error;
  }
  return assert.fail("expected a preflight failure");
}
const plan = (text: string, edits: ReplaceExactEdit[], revision?: string) => planFileEdits("a.txt", buf(text), edits, revision);

describe("edit planning", () => {
  it("replaces a unique match byte-exactly, with $& and $1 taken literally", () => {
    const p = plan("one two three\n", [edit("two", "$& $1")]);
    assert.equal(p.output.toString(), "one $& $1 three\n");
    assert.equal(p.changed, true);
    assert.equal(p.replacements, 1);
    assert.deepEqual(
      p.edits.map((e) => ({
        matchCount: e.matchCount,
        effective: e.effective,
        ranges: e.ranges.map((r) => [r.start, r.end, r.replacement.toString(), r.editIndex]),
      })),
      [{ matchCount: 1, effective: true, ranges: [[4, 7, "$& $1", 0]] }],
    );
  });

  it("every edit matches the original: edits never see each other's output, and are applied in file order", () => {
    const p = plan("a b c\n", [edit("c", "a"), edit("a", "c")]);
    assert.equal(p.output.toString(), "c b a\n");
    assert.equal(p.replacements, 2);
    // Listed out of file order, all three land where they matched.
    assert.equal(plan("x1 x2 x3", [edit("x3", "C"), edit("x1", "A"), edit("x2", "B")]).output.toString(), "A B C");
  });

  it("an edit whose new_text equals its old_text changes nothing and counts no replacement", () => {
    const p = plan("keep me\n", [edit("keep", "keep")]);
    assert.equal(p.changed, false);
    assert.equal(p.replacements, 0);
    assert.equal(p.edits[0]?.effective, false);
    assert.ok(p.output.equals(buf("keep me\n")));
    const mixed = plan("keep me\n", [edit("keep", "keep"), edit("me", "you")]);
    assert.equal(mixed.output.toString(), "keep you\n");
    assert.equal(mixed.replacements, 1);
  });

  it("overlapping selections of two edits are refused with both indexes and the line", () => {
    const f = refusal(() => plan("l1\nabcdef\n", [edit("cde", "X"), edit("abc", "Y")]));
    assert.equal(f.reason_code, "overlapping_edits");
    assert.deepEqual(f.evidence, { path: "a.txt", edit_indexes: [0, 1], line: 2 });
    // Touching is not overlapping.
    assert.equal(plan("abcdef", [edit("abc", "1"), edit("def", "2")]).output.toString(), "12");
    // The same text selected by two edits overlaps too.
    assert.equal(refusal(() => plan("abc", [edit("b", "1"), edit("b", "2")])).reason_code, "overlapping_edits");
  });

  it("refuses malformed edits before matching", () => {
    const detail = (edits: ReplaceExactEdit[]) => {
      const f = refusal(() => plan("abc abc\n", edits));
      assert.equal(f.reason_code, "invalid_value");
      return f.detail_code;
    };
    assert.equal(detail([]), "no_edits");
    assert.equal(detail([{ replace_exact: { old_text: "a" } } as unknown as ReplaceExactEdit]), "replace_exact_missing_text");
    assert.equal(detail([{ replace_exact: { new_text: "a" } } as unknown as ReplaceExactEdit]), "replace_exact_missing_text");
    assert.equal(detail([{} as ReplaceExactEdit]), "replace_exact_missing_text");
    assert.equal(detail([edit("", "x")]), "empty_old_text");
    assert.equal(detail([edit("abc", "x", { occurrence: 1, expected_match_count: 2 })]), "occurrence_with_expected_match_count");
    for (const expected of [0, -1, 1.5, MAX_EXPECTED_MATCH_COUNT + 1])
      assert.equal(detail([edit("abc", "x", { expected_match_count: expected })]), "expected_match_count_out_of_range");
    for (const occurrence of [0, -2, 1.5]) assert.equal(detail([edit("abc", "x", { occurrence })]), "occurrence_not_positive");
    for (const line_scope of [
      { start_line: 0, end_line: 1 },
      { start_line: 2, end_line: 1 },
      { start_line: 1.5, end_line: 2 },
      { start_line: 1, end_line: 2.5 },
    ])
      assert.equal(detail([edit("abc", "x", { line_scope })]), "invalid_line_scope");
    const f = refusal(() => plan("abc", [edit("abc", "x", { expected_match_count: 0 })]));
    assert.deepEqual(f.evidence, { path: "a.txt", edit_index: 0, expected: 0 });
  });

  it("the largest expected_match_count is accepted, and a line_scope of one line is", () => {
    const text = "x".repeat(MAX_EXPECTED_MATCH_COUNT);
    assert.equal(plan(text, [edit("x", "y", { expected_match_count: MAX_EXPECTED_MATCH_COUNT })]).replacements, MAX_EXPECTED_MATCH_COUNT);
    assert.equal(plan("a\na\na\n", [edit("a", "b", { line_scope: { start_line: 2, end_line: 2 } })]).output.toString(), "a\nb\na\n");
  });

  it("occurrence picks the nth match; past the last it is refused with the match lines", () => {
    assert.equal(plan("a a a", [edit("a", "b", { occurrence: 3 })]).output.toString(), "a a b");
    assert.equal(plan("a a a", [edit("a", "b", { occurrence: 1 })]).output.toString(), "b a a");
    const f = refusal(() => plan("a\na\n", [edit("a", "b", { occurrence: 3 })]));
    assert.equal(f.reason_code, "occurrence_out_of_range");
    assert.deepEqual(f.evidence, { path: "a.txt", edit_index: 0, occurrence: 3, match_count: 2, match_lines: [1, 2] });
  });

  it("expected_match_count replaces every match or refuses with the observed count", () => {
    const p = plan("ab ab ab", [edit("ab", "c", { expected_match_count: 3 })]);
    assert.equal(p.output.toString(), "c c c");
    assert.equal(p.replacements, 3);
    assert.equal(p.edits[0]?.matchCount, 3);
    const f = refusal(() => plan("ab\nab\n", [edit("ab", "c", { expected_match_count: 3 })]));
    assert.equal(f.reason_code, "expected_match_count_mismatch");
    assert.equal(f.detail_code, "observed_2");
    assert.deepEqual(f.evidence, { path: "a.txt", edit_index: 0, expected: 3, match_count: 2, match_lines: [1, 2] });
  });

  it("matches do not overlap each other and counted matches lie inside line_scope", () => {
    // "aa" in "aaaa" matches twice (at 0 and 2), never at 1.
    assert.equal(plan("aaaa", [edit("aa", "b", { expected_match_count: 2 })]).output.toString(), "bb");
    const scoped = plan("x\nx\nx\nx\n", [edit("x", "y", { line_scope: { start_line: 2, end_line: 3 }, expected_match_count: 2 })]);
    assert.equal(scoped.output.toString(), "x\ny\ny\nx\n");
    // A match that starts inside the scope but ends past it is not counted.
    assert.equal(refusal(() => plan("ab\ncd\n", [edit("b\ncd", "z", { line_scope: { start_line: 1, end_line: 1 } })])).reason_code, "match_not_found");
    // A scope past the end of the file holds nothing.
    assert.equal(refusal(() => plan("x\n", [edit("x", "y", { line_scope: { start_line: 5, end_line: 9 } })])).reason_code, "match_not_found");
  });

  it("more than one match without occurrence or expected_match_count is refused with bounded match lines", () => {
    const f = refusal(() => plan("a\na\n", [edit("a", "b")]));
    assert.equal(f.reason_code, "match_not_unique");
    assert.deepEqual(f.evidence, { path: "a.txt", edit_index: 0, match_count: 2, match_lines: [1, 2] });
    const many = "a\n".repeat(MAX_LISTED_MATCHES + 1);
    const g = refusal(() => plan(many, [edit("a", "b")]));
    const evidence = g.evidence as { match_lines: number[]; match_lines_truncated?: true; match_count: number };
    assert.equal(evidence.match_count, MAX_LISTED_MATCHES + 1);
    assert.equal(evidence.match_lines.length, MAX_LISTED_MATCHES);
    assert.equal(evidence.match_lines_truncated, true);
    const exact = refusal(() => plan("a\n".repeat(MAX_LISTED_MATCHES), [edit("a", "b")])).evidence as Record<string, unknown>;
    assert.equal(exact["match_lines_truncated"], undefined);
  });

  it("no match names the current revision and the nearest lines, or a CRLF file for a LF old_text", () => {
    const f = refusal(() => plan("const a = 1;\nconst b = 2;\n", [edit("const c = 1;", "x")], "rev1"));
    assert.equal(f.reason_code, "match_not_found");
    const evidence = f.evidence as { current_read_revision?: string; nearest: unknown[]; path: string; edit_index: number };
    assert.equal(evidence.current_read_revision, "rev1");
    assert.ok(evidence.nearest.length > 0);
    assert.match(f.message ?? "", /nearest shows/);
    const none = refusal(() => plan("zzz\n", [edit("qqqq wwww", "x")]));
    assert.equal((none.evidence as Record<string, unknown>)["current_read_revision"], undefined);
    assert.deepEqual((none.evidence as { nearest: unknown[] }).nearest, []);
    assert.match(none.message ?? "", /no line is like/);
    const crlf = refusal(() => plan("a\r\nb\r\n", [edit("a\nb", "x")]));
    assert.equal(crlf.detail_code, "line_ending_mismatch");
    assert.deepEqual(crlf.evidence, { path: "a.txt", edit_index: 0, file_line_ending: "crlf" });
    // A CRLF old_text, or a LF one that would not match with CRLF either, is a plain miss.
    assert.equal(refusal(() => plan("a\r\nb\r\n", [edit("a\r\nc", "x")])).detail_code, undefined);
    assert.equal(refusal(() => plan("a\r\nb\r\n", [edit("a\nc", "x")])).detail_code, undefined);
  });

  it("describes replaced ranges by line and code-point column, the end on the last character, bounded", () => {
    const text = "héllo wörld\nsecond line\n";
    const p = plan(text, [edit("wörld\nsec", "X")]);
    assert.deepEqual(describeRanges(buf(text), p.lines, p.edits[0]?.ranges ?? []), {
      match_ranges: [{ start_line: 1, start_column: 7, end_line: 2, end_column: 3 }],
    });
    const many = "a\n".repeat(MAX_LISTED_MATCHES + 1);
    const q = plan(many, [edit("a", "b", { expected_match_count: MAX_LISTED_MATCHES + 1 })]);
    const described = describeRanges(buf(many), q.lines, q.edits[0]?.ranges ?? []);
    assert.equal(described.match_ranges.length, MAX_LISTED_MATCHES);
    assert.equal(described.ranges_truncated, true);
    const exact = "a\n".repeat(MAX_LISTED_MATCHES);
    const r = plan(exact, [edit("a", "b", { expected_match_count: MAX_LISTED_MATCHES })]);
    assert.equal(describeRanges(buf(exact), r.lines, r.edits[0]?.ranges ?? []).ranges_truncated, undefined);
  });

  it("stale anchors show where each old_text occurs now, with merged context excerpts", () => {
    const current = buf(["l1", "l2", "target", "l4", "l5", "l6", "l7", "l8", "target", "l10"].join("\n") + "\n");
    const { anchors, anchors_truncated } = staleAnchors(current, [edit("target", "x"), edit("", "y"), edit("absent", "z")]);
    assert.equal(anchors_truncated, undefined);
    assert.deepEqual(anchors, [
      {
        edit_index: 0,
        match_count: 2,
        excerpts: [
          { start_line: 1, text: "l1\nl2\ntarget\nl4\nl5\n", match_lines: [3] },
          { start_line: 7, text: "l7\nl8\ntarget\nl10\n", match_lines: [9] },
        ],
      },
      { edit_index: 2, match_count: 0, excerpts: [] },
    ]);
    // Matches whose context touches are merged into one excerpt.
    const near = buf("a\nt\nb\nc\nd\nt\ne\n");
    assert.deepEqual(staleAnchors(near, [edit("t", "x")]).anchors[0]?.excerpts, [{ start_line: 1, text: "a\nt\nb\nc\nd\nt\ne\n", match_lines: [2, 6] }]);
  });

  it("stale anchors honour a valid line_scope and ignore an invalid one", () => {
    const current = buf("t\nx\nx\nx\nx\nx\nt\n");
    assert.equal(staleAnchors(current, [edit("t", "y", { line_scope: { start_line: 5, end_line: 7 } })]).anchors[0]?.match_count, 1);
    assert.equal(staleAnchors(current, [edit("t", "y", { line_scope: { start_line: 0, end_line: 3 } })]).anchors[0]?.match_count, 2);
    assert.equal(staleAnchors(current, [edit("t", "y", { line_scope: { start_line: 2, end_line: 6 } })]).anchors[0]?.match_count, 0);
  });

  it("stale anchors are bounded: three excerpts per edit, a byte budget, and a truncation mark", () => {
    const spaced = buf(Array.from({ length: 5 }, () => "t\nx\nx\nx\nx\nx\nx").join("\n") + "\n");
    const r = staleAnchors(spaced, [edit("t", "y")]);
    assert.equal(r.anchors[0]?.match_count, 5);
    assert.equal(r.anchors[0]?.excerpts.length, 3);
    assert.equal(r.anchors_truncated, true);
    const long = buf(`${"a".repeat(9000)}\n`);
    const big = staleAnchors(long, [edit("a", "b")]);
    assert.deepEqual(big.anchors[0]?.excerpts, []);
    assert.equal(big.anchors_truncated, true);
    // Counting stops past the largest expected_match_count.
    assert.equal(staleAnchors(buf("t\n".repeat(MAX_EXPECTED_MATCH_COUNT + 5)), [edit("t", "y")]).anchors[0]?.match_count, MAX_EXPECTED_MATCH_COUNT + 1);
  });

  it("refusals carry their evidence and messages; expected_match_count 1 is valid", () => {
    assert.deepEqual(refusal(() => plan("abc", [])).evidence, { path: "a.txt" });
    assert.deepEqual(refusal(() => plan("abc", [edit("abc", "x", { occurrence: 0 })])).evidence, { path: "a.txt", edit_index: 0, occurrence: 0 });
    const scope = { start_line: 3, end_line: 1 };
    assert.deepEqual(refusal(() => plan("abc", [edit("abc", "x", { line_scope: scope })])).evidence, { path: "a.txt", edit_index: 0, line_scope: scope });
    assert.match(refusal(() => plan("abc", [edit("ab", "1"), edit("bc", "2")])).message ?? "", /overlapping text of the original/);
    assert.match(refusal(() => plan("a a", [edit("a", "b")])).message ?? "", /matches more than once/);
    assert.equal(plan("abc", [edit("b", "x", { expected_match_count: 1 })]).output.toString(), "axc");
  });

  it("stale anchors: a scope from line 1, a match ending at the scope's end, touching excerpts merged, the byte budget shared", () => {
    assert.equal(staleAnchors(buf("t\nx\nt\n"), [edit("t", "y", { line_scope: { start_line: 1, end_line: 1 } })]).anchors[0]?.match_count, 1);
    assert.equal(staleAnchors(buf("t\nx\nt\n"), [edit("t\n", "y", { line_scope: { start_line: 1, end_line: 1 } })]).anchors[0]?.match_count, 1);
    // Matches on lines 1 and 6: context 1..3 and 4..8 touch, so one excerpt holding both.
    const touching = staleAnchors(buf("t\n2\n3\n4\n5\nt\n7\n8\n9\n"), [edit("t", "y")]);
    assert.deepEqual(
      touching.anchors[0]?.excerpts.map((e) => [e.start_line, e.match_lines]),
      [[1, [1, 6]]],
    );
    assert.equal(touching.anchors_truncated, undefined);
    const wide = `t${"a".repeat(4999)}\n`;
    const shared = staleAnchors(buf(`${wide}x\nx\nx\nx\nx\n${wide}`), [edit("t", "y")]);
    assert.equal(shared.anchors[0]?.match_count, 2);
    assert.equal(shared.anchors[0]?.excerpts.length, 1, "the second excerpt does not fit in what the first left");
    assert.equal(shared.anchors_truncated, true);
  });
});
