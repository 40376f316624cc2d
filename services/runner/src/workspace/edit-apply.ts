/**
 * The edit transaction's apply: each prepared change written atomically (temp file in the same
 * directory + rename, mode preserved) under the intent journal, after checking nobody changed
 * the file since preflight; any failure rolls back everything already applied, and only a failed
 * rollback reports state_changed/outcome_unknown.
 */

import { lstat, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { PipelineStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { createExclusive, entryExists, makeParents, removeDirs, siblingTempName, writeFileAtomic } from "./atomic-fs.js";
import { currentCallId } from "../call-context.js";
import { journalSpecsFor, type JournalTool, type JournalTransaction } from "./edit-journal.js";
import { errnoCode, withPinnedParent } from "./path-policy.js";
import { fingerprintOf } from "./edit-prepared.js";
import type { EditContext, Fingerprint, Prepared } from "./edit-prepared.js";
import { isChanging } from "./edit-report.js";

export interface UndoStep {
  path: string;
  run: () => Promise<void>;
}

export async function apply(context: EditContext, prepared: readonly Prepared[], tool: JournalTool = "edit_project_files"): Promise<void> {
  const undo: UndoStep[] = [];
  const onCommit: Array<() => Promise<void>> = [];
  // -- journal hook (intent): durable before the first write; without it nothing is written.
  const intent = prepared.some(isChanging)
    ? await context.journal?.begin(tool, journalSpecsFor(prepared), currentCallId()).catch((error: unknown) =>
        fail(ReasonCode.applyFailed, PipelineStage.apply, {
          detail_code: "journal_unavailable",
          evidence: errnoCode(error) === undefined ? {} : { errno: errnoCode(error) },
          message: "The Runner could not record the transaction's intent; nothing was written.",
        }),
      )
    : undefined;
  for (const change of prepared) {
    if (!isChanging(change)) continue;
    try {
      await applyOne(context.resolver.rootReal, change, undo, onCommit);
      await context.hooks?.afterFileApplied?.(change.path, change.index);
    } catch (error) {
      await rollbackAndFail(change, undo, error, intent);
    }
  }
  // -- journal hook (commit point): from here a crash completes the transaction.
  const last = prepared[prepared.length - 1];
  if (intent !== undefined && last !== undefined) await intent.commit().catch((error: unknown) => rollbackAndFail(last, undo, error, intent));
  for (const commit of onCommit) await commit().catch(() => undefined);
  // -- journal hook (done).
  await intent?.done().catch(() => undefined);
}

export async function applyOne(rootReal: string, change: Prepared, undo: UndoStep[], onCommit: Array<() => Promise<void>>): Promise<void> {
  switch (change.kind) {
    case "edit": {
      await withPinnedParent(rootReal, change.target, change.path, (pinned) =>
        writeFileAtomic(pinned, change.plan.output, change.mode, () => assertUnchanged(change.target, change.fingerprint, false, change.path)),
      );
      undo.push({ path: change.path, run: () => writeFileAtomic(change.target, change.original, change.mode) });
      return;
    }
    case "replace": {
      await writeFileAtomic(change.target, change.bytes, change.mode, () => assertUnchanged(change.target, change.fingerprint, false, change.path));
      undo.push({ path: change.path, run: () => writeFileAtomic(change.target, change.original, change.mode) });
      return;
    }
    case "create": {
      const createdDirs = await makeParents(path.dirname(change.target));
      undo.push({ path: change.path, run: () => removeDirs(createdDirs) });
      await withPinnedParent(rootReal, change.target, change.path, (pinned) => createExclusive(pinned, change.bytes));
      undo.push({ path: change.path, run: () => rm(change.target, { force: true }) });
      return;
    }
    case "delete": {
      await assertUnchanged(change.target, change.fingerprint, true, change.path);
      const backup = siblingTempName(change.target, "del");
      await rename(change.target, backup);
      undo.push({ path: change.path, run: () => rename(backup, change.target) });
      onCommit.push(() => rm(backup, { force: true }));
      return;
    }
    case "move": {
      const createdDirs = await makeParents(path.dirname(change.target));
      undo.push({ path: change.destination, run: () => removeDirs(createdDirs) });
      if (await entryExists(change.target)) throw concurrentModification(change.destination);
      await assertUnchanged(change.source, change.fingerprint, true, change.path);
      await rename(change.source, change.target);
      undo.push({ path: change.path, run: () => rename(change.target, change.source) });
      return;
    }
  }
}

export async function rollbackAndFail(change: Prepared, undo: UndoStep[], cause: unknown, intent?: JournalTransaction): Promise<never> {
  let rollbackFailed: string[] = [];
  for (const step of undo.reverse()) {
    try {
      await step.run();
    } catch {
      rollbackFailed.push(step.path);
    }
  }
  // -- journal hook (rolled back): a failed undo gets a second try from the journal's before-images.
  if (intent !== undefined) {
    if (rollbackFailed.length > 0)
      await intent.rollback().then(
        () => {
          rollbackFailed = [];
        },
        () => undefined,
      );
    if (rollbackFailed.length === 0) await intent.done().catch(() => undefined);
  }
  const unknown = rollbackFailed.length > 0;
  const causeDetail = cause instanceof ToolFailureError ? cause.failure.detail_code : undefined;
  const evidence: Record<string, unknown> = { path: change.path, change_index: change.index };
  const errno = errnoCode(cause);
  if (errno !== undefined) evidence.errno = errno;
  if (unknown) evidence.rollback_failed_paths = [...new Set(rollbackFailed)];
  return fail(ReasonCode.applyFailed, PipelineStage.apply, {
    detail_code: unknown ? "rollback_failed" : (causeDetail ?? "write_failed"),
    state_changed: unknown,
    outcome_unknown: unknown,
    evidence,
    message: unknown
      ? "Applying failed and the rollback did not complete; inspect the workspace before retrying."
      : "Applying failed; every change was rolled back.",
  });
}

export function concurrentModification(relPath: string): ToolFailureError {
  return new ToolFailureError(
    toolFailure(ReasonCode.applyFailed, PipelineStage.apply, { detail_code: "concurrent_modification", evidence: { path: relPath } }),
  );
}

/** Fails if the file was replaced or modified since preflight (cheap stat comparison, no re-read). */
export async function assertUnchanged(target: string, expected: Fingerprint, entryItself: boolean, relPath: string): Promise<void> {
  const info = entryItself ? await lstat(target) : await stat(target);
  const now = fingerprintOf(info);
  if (now.ino !== expected.ino || now.size !== expected.size || now.mtimeMs !== expected.mtimeMs) {
    throw concurrentModification(relPath);
  }
}
