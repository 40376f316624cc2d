/**
 * The edit transaction's preflight: every change resolved (path policy, distinct targets),
 * its file loaded and guarded by its revision, its edits planned (matches, overlaps), and a
 * create's or move's destination checked, all before anything is written.
 */

import { closeSync, constants, fstatSync, readFileSync } from "node:fs";
import { lstat, stat } from "node:fs/promises";
import path from "node:path";
import { PipelineStage, ReasonCode, ToolFailureError, fail } from "@webcodex/contracts";
import { entryExists } from "./atomic-fs.js";
import { planFileEdits, staleAnchors } from "./edit-plan.js";
import { errnoCode, openInside, type PathResolver, type ResolvedPath } from "./path-policy.js";
import { isBinary, readRevision } from "./text-bytes.js";
import { similarPaths } from "./similar-paths.js";
import type { FileChange, ReplaceExactEdit } from "./types.js";
import type { EditPrepared, Fingerprint } from "./edit-prepared.js";
import { entryFingerprint, fingerprintOf } from "./edit-prepared.js";
import { UNDO_MAX_BYTES } from "./edit-report.js";

export async function preflight(resolver: PathResolver, changes: readonly FileChange[]): Promise<EditPrepared[]> {
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

export interface ResolvedChange {
  index: number;
  source: ResolvedPath;
  destination?: ResolvedPath;
}

export async function resolveChange(resolver: PathResolver, change: FileChange, index: number): Promise<ResolvedChange> {
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
export function assertDistinctTargets(changes: readonly ResolvedChange[]): void {
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

export async function prepareChange(resolver: PathResolver, change: FileChange, index: number, paths: ResolvedChange): Promise<EditPrepared> {
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

export interface GuardedFile {
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
export async function loadGuardedFile(
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
export const EXISTING_REVISION_MAX_BYTES = 16 * 1024 * 1024;

/** A path that names nothing: where it was probably meant (the nearest directory's entries most like it). */
export function missingFile(rootReal: string, rel: string): never {
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
export async function existingRevision(resolved: ResolvedPath): Promise<string | undefined> {
  try {
    const info = await lstat(resolved.entry);
    if (!info.isFile() || info.size > EXISTING_REVISION_MAX_BYTES) return undefined;
    return readRevision(readFileSync(resolved.entry));
  } catch {
    return undefined;
  }
}

export async function assertAbsent(resolved: ResolvedPath): Promise<void> {
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
export async function assertParentCreatable(resolver: PathResolver, resolved: ResolvedPath): Promise<void> {
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

export async function withChangeIndex<T>(index: number, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof ToolFailureError)) throw error;
    const { failure } = error;
    throw new ToolFailureError({ ...failure, evidence: { ...failure.evidence, change_index: index } });
  }
}
