/**
 * Pure planning of replace_exact edits on one file's bytes. Every edit is matched against the
 * same original snapshot (edits never see each other's output), the selected ranges of all
 * edits are checked for overlap, and the output is assembled from slices in one pass. Matching
 * is byte-exact (`Buffer.indexOf`), so `$&`, `$1`, CRLF and invalid UTF-8 need no special care.
 */
import { PipelineStage, ReasonCode, fail, toolLimit } from "@webcodex/contracts";
import { charStart, LineIndex } from "./text-bytes.js";
import type { MatchRange, ReplaceExactEdit } from "./types.js";

export const MAX_EXPECTED_MATCH_COUNT = toolLimit("edit_project_files", "max_expected_match_count");
/** Line numbers and ranges listed in evidence or dry-run reports are bounded to this many. */
export const MAX_LISTED_MATCHES = 50;

export interface PlannedRange {
  start: number;
  end: number;
  replacement: Buffer;
  editIndex: number;
}

export interface PlannedEdit {
  editIndex: number;
  /** Matches observed (inside line_scope when given). */
  matchCount: number;
  /** Ranges this edit replaces, in file order. */
  ranges: PlannedRange[];
  /** new_text differs from old_text. */
  effective: boolean;
}

export interface FilePlan {
  edits: PlannedEdit[];
  output: Buffer;
  changed: boolean;
  /** Replacements that alter bytes (edits whose new_text equals old_text count zero). */
  replacements: number;
  lines: LineIndex;
}

/** Plans all edits of one file or throws the preflight failure that explains why it cannot. */
export function planFileEdits(path: string, original: Buffer, edits: readonly ReplaceExactEdit[]): FilePlan {
  if (edits.length === 0) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "no_edits", evidence: { path } });
  }
  const lines = new LineIndex(original);
  const planned = edits.map((edit, editIndex) => planEdit(path, original, lines, edit, editIndex));

  const ranges = planned.flatMap((edit) => edit.ranges);
  if (planned.length > 1) ranges.sort((a, b) => a.start - b.start);
  for (let i = 1; i < ranges.length; i++) {
    const previous = ranges[i - 1] as PlannedRange;
    const current = ranges[i] as PlannedRange;
    if (current.start < previous.end) {
      fail(ReasonCode.overlappingEdits, PipelineStage.preflight, {
        evidence: {
          path,
          edit_indexes: [previous.editIndex, current.editIndex].sort((a, b) => a - b),
          line: lines.lineOf(current.start),
        },
        message: "Two edits select overlapping text of the original file.",
      });
    }
  }

  const effectiveRanges = ranges.filter((range) => planned[range.editIndex]?.effective === true);
  if (effectiveRanges.length === 0) {
    return { edits: planned, output: original, changed: false, replacements: 0, lines };
  }
  const pieces: Buffer[] = [];
  let position = 0;
  for (const range of effectiveRanges) {
    pieces.push(original.subarray(position, range.start), range.replacement);
    position = range.end;
  }
  pieces.push(original.subarray(position));
  return { edits: planned, output: Buffer.concat(pieces), changed: true, replacements: effectiveRanges.length, lines };
}

function planEdit(path: string, original: Buffer, lines: LineIndex, edit: ReplaceExactEdit, editIndex: number): PlannedEdit {
  const where = { path, edit_index: editIndex };
  const { old_text: oldText, new_text: newText } = edit.replace_exact ?? ({} as Partial<ReplaceExactEdit["replace_exact"]>);
  if (typeof oldText !== "string" || typeof newText !== "string") {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "replace_exact_missing_text", evidence: where });
  }
  if (oldText === "") {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "empty_old_text", evidence: where });
  }
  const { expected_match_count: expected, occurrence } = edit;
  if (expected !== undefined && occurrence !== undefined) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "occurrence_with_expected_match_count", evidence: where });
  }
  if (expected !== undefined && (!Number.isInteger(expected) || expected < 1 || expected > MAX_EXPECTED_MATCH_COUNT)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "expected_match_count_out_of_range", evidence: { ...where, expected } });
  }
  if (occurrence !== undefined && (!Number.isInteger(occurrence) || occurrence < 1)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "occurrence_not_positive", evidence: { ...where, occurrence } });
  }

  // The byte window that counted matches must lie in.
  let low = 0;
  let high = original.length;
  if (edit.line_scope !== undefined) {
    const { start_line: first, end_line: last } = edit.line_scope;
    if (!Number.isInteger(first) || !Number.isInteger(last) || first < 1 || last < first) {
      fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "invalid_line_scope", evidence: { ...where, line_scope: edit.line_scope } });
    }
    low = lines.startOf(first);
    high = Math.max(low, lines.endOf(last));
  }

  const needle = Buffer.from(oldText, "utf8");
  const keep = Math.max(MAX_EXPECTED_MATCH_COUNT + 1, occurrence ?? 0);
  const offsets: number[] = [];
  let count = 0;
  for (let at = original.indexOf(needle, low); at !== -1 && at + needle.length <= high; at = original.indexOf(needle, at + needle.length)) {
    count++;
    if (offsets.length < keep) offsets.push(at);
  }
  const matchLines = (): { match_lines: number[]; match_lines_truncated?: true } => {
    const listed = offsets.slice(0, MAX_LISTED_MATCHES).map((at) => lines.lineOf(at));
    return count > MAX_LISTED_MATCHES ? { match_lines: listed, match_lines_truncated: true } : { match_lines: listed };
  };

  let selected: number[];
  if (occurrence !== undefined) {
    if (occurrence > count) {
      fail(ReasonCode.occurrenceOutOfRange, PipelineStage.preflight, { evidence: { ...where, occurrence, match_count: count, ...matchLines() } });
    }
    selected = [offsets[occurrence - 1] as number];
  } else if (expected !== undefined) {
    if (count !== expected) {
      fail(ReasonCode.expectedMatchCountMismatch, PipelineStage.preflight, {
        detail_code: `observed_${count}`,
        evidence: { ...where, expected, match_count: count, ...matchLines() },
      });
    }
    selected = offsets;
  } else {
    if (count === 0) {
      fail(ReasonCode.matchNotFound, PipelineStage.preflight, notFoundDetails(original, oldText, where));
    }
    if (count > 1) {
      fail(ReasonCode.matchNotUnique, PipelineStage.preflight, {
        evidence: { ...where, match_count: count, ...matchLines() },
        message: "old_text matches more than once; pick one with occurrence or replace all with expected_match_count.",
      });
    }
    selected = offsets;
  }

  const replacement = Buffer.from(newText, "utf8");
  return {
    editIndex,
    matchCount: count,
    ranges: selected.map((start) => ({ start, end: start + needle.length, replacement, editIndex })),
    effective: oldText !== newText,
  };
}

/** A LF-only old_text that would match a CRLF file is a common, explainable miss. */
function notFoundDetails(original: Buffer, oldText: string, where: { path: string; edit_index: number }) {
  if (oldText.includes("\n") && !oldText.includes("\r\n")) {
    const crlf = Buffer.from(oldText.replace(/\n/g, "\r\n"), "utf8");
    if (original.includes(crlf)) {
      return { detail_code: "line_ending_mismatch", evidence: { ...where, file_line_ending: "crlf" } };
    }
  }
  return { evidence: where };
}

/** Bounded line/column ranges of planned replacements, for dry-run reports. */
export function describeRanges(original: Buffer, lines: LineIndex, ranges: readonly PlannedRange[]): { match_ranges: MatchRange[]; ranges_truncated?: true } {
  const match_ranges = ranges.slice(0, MAX_LISTED_MATCHES).map((range) => {
    const start = lines.positionOf(range.start);
    const end = lines.positionOf(charStart(original, range.end - 1));
    return { start_line: start.line, start_column: start.column, end_line: end.line, end_column: end.column };
  });
  return ranges.length > MAX_LISTED_MATCHES ? { match_ranges, ranges_truncated: true } : { match_ranges };
}

/** Lines shown on either side of an anchor in a stale-revision failure. */
export const STALE_ANCHOR_CONTEXT_LINES = 2;
/** Excerpts shown per edit, and the text bytes all excerpts of one failure may hold. */
const STALE_EXCERPTS_PER_EDIT = 3;
const STALE_EXCERPT_BYTES = 8 * 1024;

export interface StaleAnchor {
  edit_index: number;
  /** Where old_text occurs in the current content (inside line_scope when given). */
  match_count: number;
  /**
   * The current lines around the first matches: start_line, the text of those lines and the
   * lines a match covers. Overlapping or adjacent excerpts are merged, so each line appears once.
   */
  excerpts: Array<{ start_line: number; text: string; match_lines: number[] }>;
}

/**
 * The re-observation a stale edit needs, taken from the file's current bytes (the ones whose
 * revision the failure reports): for each edit, where its old_text occurs now and the lines
 * around it. A caller that finds its anchor unchanged can retry with the current revision;
 * one that does not has the follow-up re-read. Bounded; `anchors_truncated` says when cut.
 */
export function staleAnchors(current: Buffer, edits: readonly ReplaceExactEdit[]): { anchors: StaleAnchor[]; anchors_truncated?: true } {
  const lines = new LineIndex(current);
  const anchors: StaleAnchor[] = [];
  let budget = STALE_EXCERPT_BYTES;
  let cut = false;
  for (const [editIndex, edit] of edits.entries()) {
    const oldText = edit?.replace_exact?.old_text;
    if (typeof oldText !== "string" || oldText === "") continue;
    const needle = Buffer.from(oldText, "utf8");
    let low = 0;
    let high = current.length;
    if (
      edit.line_scope !== undefined &&
      Number.isInteger(edit.line_scope.start_line) &&
      Number.isInteger(edit.line_scope.end_line) &&
      edit.line_scope.start_line >= 1
    ) {
      low = lines.startOf(edit.line_scope.start_line);
      high = Math.max(low, lines.endOf(edit.line_scope.end_line));
    }
    let count = 0;
    // Line spans around the matches, merged while they overlap or touch: [first, last, match lines].
    const spans: Array<{ first: number; last: number; match: Set<number>; matches: number }> = [];
    for (
      let at = current.indexOf(needle, low);
      at !== -1 && at + needle.length <= high && count <= MAX_EXPECTED_MATCH_COUNT;
      at = current.indexOf(needle, at + needle.length)
    ) {
      count++;
      const mFirst = lines.lineOf(at);
      const mLast = lines.lineOf(at + needle.length - 1);
      const first = Math.max(1, mFirst - STALE_ANCHOR_CONTEXT_LINES);
      const last = Math.min(lines.totalLines, mLast + STALE_ANCHOR_CONTEXT_LINES);
      const prev = spans[spans.length - 1];
      if (prev !== undefined && first <= prev.last + 1) {
        prev.last = Math.max(prev.last, last);
        for (let l = mFirst; l <= mLast; l++) prev.match.add(l);
        prev.matches++;
      } else if (spans.length < STALE_EXCERPTS_PER_EDIT) {
        const match = new Set<number>();
        for (let l = mFirst; l <= mLast; l++) match.add(l);
        spans.push({ first, last, match, matches: 1 });
      }
    }
    const excerpts: StaleAnchor["excerpts"] = [];
    let shown = 0;
    for (const span of spans) {
      const text = current.subarray(lines.startOf(span.first), lines.endOf(span.last)).toString("utf8");
      if (Buffer.byteLength(text) > budget) {
        cut = true;
        continue;
      }
      budget -= Buffer.byteLength(text);
      shown += span.matches;
      excerpts.push({ start_line: span.first, text, match_lines: [...span.match] });
    }
    if (count > shown) cut = true;
    anchors.push({ edit_index: editIndex, match_count: count, excerpts });
  }
  return cut ? { anchors, anchors_truncated: true } : { anchors };
}
