/**
 * What edit_project_files reports: the dry-run plan, the applied files with their new revisions
 * and change summary, and the exact inverse of an applied call when it has one (undo).
 */

import path from "node:path";
import { ToolFailureError, toolLimit } from "@webcodex/contracts";
import { describeRanges, planFileEdits } from "./edit-plan.js";
import { isBinary, readRevision } from "./text-bytes.js";
import type { AppliedFileReport, ChangeSummary, DryRunFileReport, EditAppliedResult, EditDryRunResult, FileChange, ReplaceExactEdit } from "./types.js";
import type { EditPrepared, Prepared, PreparedEdit } from "./edit-prepared.js";

export function isChanging(change: Prepared): boolean {
  return change.kind !== "edit" || change.plan.changed;
}

export function summarize(prepared: readonly EditPrepared[]): { changed: boolean; paths: string[]; change_summary: ChangeSummary } {
  const summary: ChangeSummary = { files_changed: 0, edits_applied: 0, replacements: 0, created: 0, deleted: 0, moved: 0 };
  const paths = new Set<string>();
  for (const change of prepared) {
    paths.add(change.path);
    if (change.kind === "move") paths.add(change.destination);
    if (!isChanging(change)) continue;
    summary.files_changed++;
    if (change.kind === "edit") {
      summary.edits_applied += change.plan.edits.filter((edit) => edit.effective).length;
      summary.replacements += change.plan.replacements;
    } else if (change.kind === "create") summary.created++;
    else if (change.kind === "delete") summary.deleted++;
    else summary.moved++;
  }
  return { changed: summary.files_changed > 0, paths: [...paths], change_summary: summary };
}

export function dryRunReport(prepared: readonly EditPrepared[]): EditDryRunResult {
  const files = prepared.map((change): DryRunFileReport => {
    const report: DryRunFileReport = { path: change.path, kind: change.kind, changed: isChanging(change), replacements: 0 };
    if (change.kind === "move") report.destination = change.destination;
    if (change.kind === "edit") {
      const { plan } = change;
      report.replacements = plan.replacements;
      report.edits = plan.edits.map((edit) => ({
        edit_index: edit.editIndex,
        match_count: edit.matchCount,
        ...describeRanges(change.original, plan.lines, edit.ranges),
      }));
    }
    return report;
  });
  return { dry_run: true, ...summarize(prepared), files };
}

export function appliedReport(prepared: readonly EditPrepared[], includeUndo: boolean): EditAppliedResult {
  const files = prepared.map((change): AppliedFileReport => {
    const report: AppliedFileReport = { path: change.path, kind: change.kind, changed: isChanging(change), replacements: 0 };
    switch (change.kind) {
      case "edit":
        report.read_revision = change.plan.changed ? readRevision(change.plan.output) : change.revision;
        report.replacements = change.plan.replacements;
        break;
      case "create":
        report.read_revision = readRevision(change.bytes);
        break;
      case "move":
        report.destination = change.destination;
        report.read_revision = change.revision;
        break;
      case "delete":
        break;
    }
    return report;
  });
  const summary = summarize(prepared);
  // The inverse is built only when asked for: an ordinary edit pays nothing for it.
  const undo = summary.changed && includeUndo ? inverseChanges(prepared) : undefined;
  return {
    dry_run: false,
    execution_state: "completed",
    ...summary,
    applied_count: prepared.filter(isChanging).length,
    files,
    ...(undo !== undefined ? { undo_changes: undo } : {}),
  };
}

/** The inverse of one applied call is offered only while its changes fit in this many bytes (JSON). */
export const UNDO_MAX_BYTES = toolLimit("edit_project_files", "undo_max_bytes");

/**
 * The exact inverse of an applied transaction, as changes for one edit_project_files call
 * guarded by the revisions this call produced: each edit's replacements swapped back (checked
 * by planning the inverse against the new content, which must give the original bytes), a
 * create deleted, a move moved back, a small text delete re-created. Undefined when some
 * change has no exact inverse (an edit that deleted text, a large or binary delete) or the
 * inverse would exceed UNDO_MAX_BYTES; the git review tools still show the change.
 */
export function inverseChanges(prepared: readonly EditPrepared[]): FileChange[] | undefined {
  const inverse: FileChange[] = [];
  for (const change of prepared) {
    if (!isChanging(change)) continue;
    switch (change.kind) {
      case "edit": {
        const edits = inverseEdits(change);
        if (edits === undefined) return undefined;
        inverse.push({ kind: "edit", path: change.path, expected_read_revision: readRevision(change.plan.output), edits });
        break;
      }
      case "create":
        inverse.push({ kind: "delete", path: change.path, expected_read_revision: readRevision(change.bytes) });
        break;
      case "move":
        inverse.push({ kind: "move", path: change.destination, destination: change.path, expected_read_revision: change.revision });
        break;
      case "delete": {
        const text = change.original?.toString("utf8");
        if (change.original === undefined || isBinary(change.original) || text === undefined || !Buffer.from(text, "utf8").equals(change.original))
          return undefined;
        inverse.push({ kind: "create", path: change.path, content: text });
        break;
      }
    }
  }
  return Buffer.byteLength(JSON.stringify(inverse)) <= UNDO_MAX_BYTES ? inverse : undefined;
}

/** Edits that turn the new content of `change` back into its original bytes, or undefined. */
export function inverseEdits(change: PreparedEdit): ReplaceExactEdit[] | undefined {
  const texts = (i: number) => change.edits[i]?.replace_exact;
  const restores = (edits: ReplaceExactEdit[]): boolean => {
    try {
      return planFileEdits(change.path, change.plan.output, edits).output.equals(change.original);
    } catch (error) {
      if (error instanceof ToolFailureError) return false;
      throw error;
    }
  };
  const effective = change.plan.edits.filter((edit) => edit.effective && edit.ranges.length > 0);
  if (effective.some((edit) => !texts(edit.editIndex)?.new_text)) return undefined;
  // Per edit: its new text back to its old text, every replacement at once.
  const byEdit = effective.map((edit): ReplaceExactEdit => {
    const t = texts(edit.editIndex) as { old_text: string; new_text: string };
    return { replace_exact: { old_text: t.new_text, new_text: t.old_text }, ...(edit.ranges.length > 1 ? { expected_match_count: edit.ranges.length } : {}) };
  });
  if (restores(byEdit)) return byEdit;
  // Per replacement: the n-th occurrence of its new text in the new content.
  const ranges = effective.flatMap((edit) => edit.ranges).sort((a, b) => a.start - b.start);
  let shift = 0;
  const byRange: ReplaceExactEdit[] = [];
  for (const range of ranges) {
    const t = texts(range.editIndex) as { old_text: string; new_text: string };
    const at = range.start + shift;
    shift += range.replacement.length - (range.end - range.start);
    const needle = range.replacement;
    let occurrence = 0;
    for (let i = change.plan.output.indexOf(needle); i !== -1 && i <= at; i = change.plan.output.indexOf(needle, i + needle.length)) occurrence++;
    byRange.push({ replace_exact: { old_text: t.new_text, new_text: t.old_text }, occurrence });
  }
  return byRange.length <= MAX_EDITS_PER_CHANGE && restores(byRange) ? byRange : undefined;
}

/** edits per change the edit_project_files schema accepts. */
export const MAX_EDITS_PER_CHANGE = toolLimit("edit_project_files", "max_edits_per_change");
