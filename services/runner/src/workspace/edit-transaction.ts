/**
 * edit_project_files as a transaction: every change passes preflight (paths, policy,
 * revisions, matches, overlaps) before anything is written; then each file is replaced
 * atomically (temp file in the same directory + rename, mode preserved), and if any step
 * fails, everything already applied is rolled back. Only a failed rollback reports
 * state_changed/outcome_unknown.
 *
 * import_host_files runs through the same transaction: each Host file becomes a create (or,
 * with overwrite and the current revision, a guarded whole-file replace) of raw bytes.
 *
 * One concept over 400 lines: the edit transaction (preflight, apply and rollback share one state).
 */
import { closeSync, constants, fstatSync, readFileSync } from "node:fs";
import { lstat, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { PipelineStage, ReasonCode, ToolFailureError, fail, toolFailure, toolLimit } from "@webcodex/contracts";
import { createExclusive, entryExists, makeParents, removeDirs, siblingTempName, writeFileAtomic } from "./atomic-fs.js";
import { describeRanges, planFileEdits, staleAnchors, type FilePlan } from "./edit-plan.js";
import { currentCallId } from "../call-context.js";
import { journalSpecsFor, type EditJournal, type JournalTool, type JournalTransaction } from "./edit-journal.js";
import { errnoCode, openInside, withPinnedParent, type PathResolver, type ResolvedPath } from "./path-policy.js";
import { isBinary, readRevision } from "./text-bytes.js";
import { similarPaths } from "./similar-paths.js";
import type {
  AppliedFileReport,
  ChangeSummary,
  DryRunFileReport,
  EditAppliedResult,
  EditDryRunResult,
  EditProjectFilesRequest,
  EditProjectFilesResult,
  FileChange,
  HostFile,
  ImportHostFilesRequest,
  ImportHostFilesResult,
  ImportedFileReport,
  ReplaceExactEdit,
  WorkspaceHooks,
} from "./types.js";

/** Identity of a file at preflight time; a different one at apply time means a concurrent writer. */
interface Fingerprint {
  ino: number;
  size: number;
  mtimeMs: number;
}

interface PreparedBase {
  index: number;
  path: string;
}

interface PreparedEdit extends PreparedBase {
  kind: "edit";
  target: string;
  original: Buffer;
  mode: number;
  fingerprint: Fingerprint;
  revision: string;
  plan: FilePlan;
  edits: readonly ReplaceExactEdit[];
}

interface PreparedCreate extends PreparedBase {
  kind: "create";
  target: string;
  bytes: Buffer;
}

interface PreparedDelete extends PreparedBase {
  kind: "delete";
  target: string;
  fingerprint: Fingerprint;
  /** The deleted file's bytes, kept only when small enough to offer their re-creation as undo. */
  original?: Buffer;
}

interface PreparedMove extends PreparedBase {
  kind: "move";
  destination: string;
  source: string;
  target: string;
  fingerprint: Fingerprint;
  revision: string;
}

/** A whole existing file replaced by new bytes (import_host_files with overwrite). */
interface PreparedReplace extends PreparedBase {
  kind: "replace";
  target: string;
  original: Buffer;
  mode: number;
  fingerprint: Fingerprint;
  bytes: Buffer;
}

type Prepared = PreparedEdit | PreparedCreate | PreparedDelete | PreparedMove | PreparedReplace;

export interface EditContext {
  resolver: PathResolver;
  hooks: WorkspaceHooks | undefined;
  /** Intent journal making the transaction crash-consistent (absent: none). */
  journal?: EditJournal | undefined;
}

export async function editProjectFiles(context: EditContext, request: EditProjectFilesRequest): Promise<EditProjectFilesResult> {
  const prepared = await preflight(context.resolver, request.changes);
  if (request.dry_run === true) return dryRunReport(prepared);
  await apply(context, prepared);
  return appliedReport(prepared, request.include_undo === true);
}

// ---------------------------------------------------------------- preflight

/** What edit_project_files prepares (every kind but the import-only replace). */
type EditPrepared = Exclude<Prepared, PreparedReplace>;

async function preflight(resolver: PathResolver, changes: readonly FileChange[]): Promise<EditPrepared[]> {
  if (!Array.isArray(changes) || changes.length === 0) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "no_changes" });
  }
  // Resolve and police every path first: the cheapest refusals come before any file is read.
  const resolved: ResolvedChange[] = [];
  for (const [index, change] of changes.entries()) {
    resolved.push(await resolveChange(resolver, change, index));
  }
  assertDistinctTargets(resolved);
  const prepared: EditPrepared[] = [];
  for (const [index, change] of changes.entries()) {
    const paths = resolved[index] as ResolvedChange;
    prepared.push(await withChangeIndex(index, () => prepareChange(resolver, change, index, paths)));
  }
  return prepared;
}

interface ResolvedChange {
  index: number;
  source: ResolvedPath;
  destination?: ResolvedPath;
}

async function resolveChange(resolver: PathResolver, change: FileChange, index: number): Promise<ResolvedChange> {
  return withChangeIndex(index, async () => {
    const kind = (change as { kind?: unknown }).kind;
    if (kind !== "edit" && kind !== "create" && kind !== "delete" && kind !== "move") {
      fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "unknown_change_kind" });
    }
    const source = await resolver.resolve(change.path);
    resolver.assertWritable(source);
    if (change.kind !== "move") return { index, source };
    const destination = await resolver.resolve(change.destination);
    resolver.assertWritable(destination);
    return { index, source, destination };
  });
}

/** Two changes touching one file would make the outcome depend on their order: refuse. */
function assertDistinctTargets(changes: readonly ResolvedChange[]): void {
  const seen = new Map<string, number>();
  for (const change of changes) {
    const touched = [change.source, ...(change.destination ? [change.destination] : [])];
    for (const resolved of touched) {
      for (const key of new Set([resolved.entry, resolved.real])) {
        const previous = seen.get(key);
        if (previous !== undefined) {
          fail(ReasonCode.invalidValue, PipelineStage.preflight, {
            detail_code: "duplicate_path",
            evidence: { path: resolved.rel, change_indexes: [previous, change.index] },
            message: "Each file may be touched by one change per call.",
          });
        }
        seen.set(key, change.index);
      }
    }
  }
}

async function prepareChange(resolver: PathResolver, change: FileChange, index: number, paths: ResolvedChange): Promise<EditPrepared> {
  const { source } = paths;
  switch (change.kind) {
    case "create": {
      if (typeof change.content !== "string") {
        fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "content_not_string", evidence: { path: source.rel } });
      }
      await assertAbsent(source);
      await assertParentCreatable(resolver, source);
      return { kind: "create", index, path: source.rel, target: source.entry, bytes: Buffer.from(change.content, "utf8") };
    }
    case "edit": {
      const file = await loadGuardedFile(resolver.rootReal, source, change.expected_read_revision, Array.isArray(change.edits) ? change.edits : undefined);
      if (isBinary(file.bytes)) {
        fail(ReasonCode.binaryFile, PipelineStage.preflight, { evidence: { path: source.rel } });
      }
      const plan = planFileEdits(source.rel, file.bytes, change.edits ?? [], file.revision);
      return {
        kind: "edit",
        index,
        path: source.rel,
        target: source.real,
        original: file.bytes,
        mode: file.mode,
        fingerprint: file.fingerprint,
        revision: file.revision,
        plan,
        edits: change.edits,
      };
    }
    case "delete": {
      const file = await loadGuardedFile(resolver.rootReal, source, change.expected_read_revision);
      return {
        kind: "delete",
        index,
        path: source.rel,
        target: source.entry,
        fingerprint: (await entryFingerprint(source)) ?? file.fingerprint,
        ...(file.bytes.length <= UNDO_MAX_BYTES ? { original: file.bytes } : {}),
      };
    }
    case "move": {
      const destination = paths.destination as ResolvedPath;
      const file = await loadGuardedFile(resolver.rootReal, source, change.expected_read_revision);
      await assertAbsent(destination);
      await assertParentCreatable(resolver, destination);
      return {
        kind: "move",
        index,
        path: source.rel,
        destination: destination.rel,
        source: source.entry,
        target: destination.entry,
        fingerprint: (await entryFingerprint(source)) ?? file.fingerprint,
        revision: file.revision,
      };
    }
  }
}

interface GuardedFile {
  bytes: Buffer;
  mode: number;
  fingerprint: Fingerprint;
  revision: string;
}

/**
 * Reads an existing regular file and checks the caller's read revision against its bytes. A
 * stale revision fails with the current revision and, for an edit (`anchorEdits`), the current
 * lines around each old_text: the re-read the caller needs before retrying.
 */
async function loadGuardedFile(
  rootReal: string,
  resolved: ResolvedPath,
  expected: string | undefined,
  anchorEdits?: readonly ReplaceExactEdit[],
): Promise<GuardedFile> {
  if (typeof expected !== "string" || expected === "") {
    fail(ReasonCode.missingField, PipelineStage.preflight, { detail_code: "expected_read_revision", evidence: { path: resolved.rel } });
  }
  let bytes: Buffer;
  let info;
  try {
    // Read through one descriptor proven inside the root (no check-then-use on a swapped symlink).
    const fd = openInside(rootReal, resolved.real, resolved.rel, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      info = fstatSync(fd);
      if (!info.isFile()) {
        fail(ReasonCode.notAFile, PipelineStage.preflight, {
          evidence: { path: resolved.rel },
          message: info.isDirectory() ? "The path is a directory; list_project_files with this path shows its files." : "The path is not a regular file.",
        });
      }
      bytes = readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if (error instanceof ToolFailureError) throw error;
    const code = errnoCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") missingFile(rootReal, resolved.rel);

    throw error;
  }
  const revision = readRevision(bytes);
  if (revision !== expected) {
    fail(ReasonCode.staleReadRevision, PipelineStage.preflight, {
      evidence: {
        path: resolved.rel,
        current_read_revision: revision,
        ...(anchorEdits !== undefined && !isBinary(bytes) ? staleAnchors(bytes, anchorEdits) : {}),
      },
      message:
        anchorEdits !== undefined
          ? "The file changed since it was read; nothing was written. anchors shows the current lines around each old_text: if they still hold what you meant to change, retry with current_read_revision; otherwise re-read."
          : "The file changed since it was read; nothing was written. Re-read it before retrying.",
    });
  }
  return { bytes, mode: info.mode, fingerprint: fingerprintOf(info), revision };
}

/** Bytes up to which an existing file in the way of a create or move gets its revision listed. */
const EXISTING_REVISION_MAX_BYTES = 16 * 1024 * 1024;

/** A path that names nothing: where it was probably meant (the nearest directory's entries most like it). */
function missingFile(rootReal: string, rel: string): never {
  const near = similarPaths(rootReal, rel);
  return fail(ReasonCode.pathNotFound, PipelineStage.preflight, {
    evidence: { path: rel, ...near },
    message:
      near.similar_paths.length > 0
        ? "No file at this path; similar_paths lists the entries of the nearest existing directory most like it."
        : "No file at this path, nor an entry like it in the nearest existing directory (existing_parent).",
  });
}

/**
 * The read_revision of the regular file at an existing entry (not following a symlink), so a
 * caller who meant to change that file can do so without a read; undefined for anything else.
 */
async function existingRevision(resolved: ResolvedPath): Promise<string | undefined> {
  try {
    const info = await lstat(resolved.entry);
    if (!info.isFile() || info.size > EXISTING_REVISION_MAX_BYTES) return undefined;
    return readRevision(readFileSync(resolved.entry));
  } catch {
    return undefined;
  }
}

async function assertAbsent(resolved: ResolvedPath): Promise<void> {
  if (await entryExists(resolved.entry)) {
    const revision = await existingRevision(resolved);
    fail(ReasonCode.pathExists, PipelineStage.preflight, {
      evidence: { path: resolved.rel, ...(revision !== undefined ? { current_read_revision: revision } : {}) },
      message:
        revision !== undefined
          ? "A file exists at this path; to change it, edit or delete it with expected_read_revision: current_read_revision, or pick another path."
          : "Something other than a regular file exists at this path; pick another path.",
    });
  }
}

/** The nearest existing ancestor of a new file must be a directory, or mkdir would fail mid-apply. */
async function assertParentCreatable(resolver: PathResolver, resolved: ResolvedPath): Promise<void> {
  for (let dir = path.dirname(resolved.entry); ; dir = path.dirname(dir)) {
    try {
      const info = await stat(dir);
      if (info.isDirectory()) return;
      fail(ReasonCode.pathExists, PipelineStage.preflight, {
        detail_code: "parent_not_directory",
        evidence: { path: resolved.rel, blocking_path: path.relative(resolver.rootReal, dir) },
      });
    } catch (error) {
      if (error instanceof ToolFailureError) throw error;
      if (dir === resolver.rootReal || path.dirname(dir) === dir) throw error;
    }
  }
}

async function withChangeIndex<T>(index: number, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof ToolFailureError)) throw error;
    const { failure } = error;
    throw new ToolFailureError({ ...failure, evidence: { ...failure.evidence, change_index: index } });
  }
}

// ---------------------------------------------------------------- apply

interface UndoStep {
  path: string;
  run: () => Promise<void>;
}

async function apply(context: EditContext, prepared: readonly Prepared[], tool: JournalTool = "edit_project_files"): Promise<void> {
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

async function applyOne(rootReal: string, change: Prepared, undo: UndoStep[], onCommit: Array<() => Promise<void>>): Promise<void> {
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

async function rollbackAndFail(change: Prepared, undo: UndoStep[], cause: unknown, intent?: JournalTransaction): Promise<never> {
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

function concurrentModification(relPath: string): ToolFailureError {
  return new ToolFailureError(
    toolFailure(ReasonCode.applyFailed, PipelineStage.apply, { detail_code: "concurrent_modification", evidence: { path: relPath } }),
  );
}

/** Fails if the file was replaced or modified since preflight (cheap stat comparison, no re-read). */
async function assertUnchanged(target: string, expected: Fingerprint, entryItself: boolean, relPath: string): Promise<void> {
  const info = entryItself ? await lstat(target) : await stat(target);
  const now = fingerprintOf(info);
  if (now.ino !== expected.ino || now.size !== expected.size || now.mtimeMs !== expected.mtimeMs) {
    throw concurrentModification(relPath);
  }
}

async function entryFingerprint(resolved: ResolvedPath): Promise<Fingerprint | undefined> {
  try {
    return fingerprintOf(await lstat(resolved.entry));
  } catch {
    return undefined;
  }
}

function fingerprintOf(info: { ino: number; size: number; mtimeMs: number }): Fingerprint {
  return { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
}

// ---------------------------------------------------------------- reports

function isChanging(change: Prepared): boolean {
  return change.kind !== "edit" || change.plan.changed;
}

function summarize(prepared: readonly EditPrepared[]): { changed: boolean; paths: string[]; change_summary: ChangeSummary } {
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

function dryRunReport(prepared: readonly EditPrepared[]): EditDryRunResult {
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

function appliedReport(prepared: readonly EditPrepared[], includeUndo: boolean): EditAppliedResult {
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
function inverseChanges(prepared: readonly EditPrepared[]): FileChange[] | undefined {
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
function inverseEdits(change: PreparedEdit): ReplaceExactEdit[] | undefined {
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
const MAX_EDITS_PER_CHANGE = toolLimit("edit_project_files", "max_edits_per_change");

// ---------------------------------------------------------------- import_host_files

/** Largest file one import may write, decoded. */
export const IMPORT_MAX_FILE_BYTES = toolLimit("import_host_files", "max_file_bytes");
/** Largest total one import call may write, decoded (a request body is at most 8 MiB). */
export const IMPORT_MAX_CALL_BYTES = toolLimit("import_host_files", "max_call_bytes");
const IMPORT_MAX_FILES = toolLimit("import_host_files", "max_files");

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decoded size of content without decoding it, so an oversize file is refused before any copy. */
function declaredBytes(file: HostFile): number {
  if (typeof file.content_base64 === "string") {
    const s = file.content_base64;
    const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
    return Math.max(0, Math.floor((s.length * 3) / 4) - padding);
  }
  return typeof file.content === "string" ? Buffer.byteLength(file.content, "utf8") : 0;
}

function decodeHostFile(file: HostFile, rel: string): Buffer {
  const hasText = typeof file.content === "string";
  const hasBase64 = typeof file.content_base64 === "string";
  if (hasText === hasBase64) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "content_xor_content_base64", evidence: { path: rel } });
  }
  if (hasText) return Buffer.from(file.content as string, "utf8");
  const encoded = file.content_base64 as string;
  // Buffer.from(…, "base64") skips what it cannot read; a Host's bytes are taken only exactly.
  if (!BASE64.test(encoded)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "invalid_base64",
      evidence: { path: rel },
      message: "content_base64 must be standard base64 (A-Z a-z 0-9 + /, padded with =, no whitespace).",
    });
  }
  return Buffer.from(encoded, "base64");
}

/**
 * Writes files a Host holds in one transaction: every file passes preflight (path policy,
 * sensitive paths, ceilings, base64, existence and revision) before any byte is written, then
 * each is created (no clobber) or atomically replaced, and a failure rolls back the rest.
 */
export async function importHostFiles(context: EditContext, request: ImportHostFilesRequest): Promise<ImportHostFilesResult> {
  const files = request.files;
  if (!Array.isArray(files) || files.length === 0) fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "no_files" });
  if (files.length > IMPORT_MAX_FILES) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "too_many_files",
      evidence: { file_count: files.length, max_files: IMPORT_MAX_FILES },
    });
  }
  // Ceilings first, from the declared sizes: nothing large is decoded only to be refused.
  let total = 0;
  for (const [index, file] of files.entries()) {
    const bytes = declaredBytes(file);
    total += bytes;
    if (bytes > IMPORT_MAX_FILE_BYTES) {
      fail(ReasonCode.fileTooLarge, PipelineStage.preflight, {
        detail_code: "import_file_ceiling",
        evidence: { path: String(file.path), change_index: index, bytes, ceiling_bytes: IMPORT_MAX_FILE_BYTES },
        message: `One imported file may hold at most ${IMPORT_MAX_FILE_BYTES} bytes.`,
      });
    }
  }
  if (total > IMPORT_MAX_CALL_BYTES) {
    fail(ReasonCode.fileTooLarge, PipelineStage.preflight, {
      detail_code: "import_call_ceiling",
      evidence: { bytes: total, ceiling_bytes: IMPORT_MAX_CALL_BYTES },
      message: `One import call may write at most ${IMPORT_MAX_CALL_BYTES} bytes in total; split it.`,
    });
  }
  const resolved: ResolvedChange[] = [];
  for (const [index, file] of files.entries()) {
    resolved.push(
      await withChangeIndex(index, async () => {
        const source = await context.resolver.resolve(file.path);
        context.resolver.assertWritable(source);
        return { index, source };
      }),
    );
  }
  assertDistinctTargets(resolved);
  const prepared: Array<PreparedCreate | PreparedReplace> = [];
  for (const [index, file] of files.entries()) {
    const { source } = resolved[index] as ResolvedChange;
    prepared.push(await withChangeIndex(index, () => prepareImport(context.resolver, file, index, source)));
  }
  await apply(context, prepared, "import_host_files");
  return {
    files: prepared.map((change): ImportedFileReport => ({
      path: change.path,
      bytes: change.bytes.length,
      read_revision: readRevision(change.bytes),
      ...(change.kind === "replace" ? { replaced: true as const } : {}),
    })),
  };
}

async function prepareImport(resolver: PathResolver, file: HostFile, index: number, source: ResolvedPath): Promise<PreparedCreate | PreparedReplace> {
  const bytes = decodeHostFile(file, source.rel);
  let existing: Awaited<ReturnType<typeof lstat>> | undefined;
  try {
    existing = await lstat(source.entry);
  } catch (error) {
    if (errnoCode(error) !== "ENOENT" && errnoCode(error) !== "ENOTDIR") throw error;
  }
  if (existing?.isDirectory()) {
    fail(ReasonCode.notAFile, PipelineStage.preflight, { detail_code: "directory_target", evidence: { path: source.rel } });
  }
  if (existing === undefined) {
    if (file.expected_read_revision !== undefined) missingFile(resolver.rootReal, source.rel);
    await assertParentCreatable(resolver, source);
    return { kind: "create", index, path: source.rel, target: source.entry, bytes };
  }
  if (file.overwrite !== true) {
    const revision = await existingRevision(source);
    fail(ReasonCode.pathExists, PipelineStage.preflight, {
      evidence: { path: source.rel, ...(revision !== undefined ? { current_read_revision: revision } : {}) },
      message: "The file exists; pass overwrite: true with expected_read_revision: current_read_revision to replace it.",
    });
  }
  const guarded = await loadGuardedFile(resolver.rootReal, source, file.expected_read_revision);
  return {
    kind: "replace",
    index,
    path: source.rel,
    target: source.real,
    original: guarded.bytes,
    mode: guarded.mode,
    fingerprint: guarded.fingerprint,
    bytes,
  };
}
