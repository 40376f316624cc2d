/**
 * import_host_files: files a Host holds written through the edit transaction, each a create
 * (or, with overwrite and the current revision, a guarded whole-file replace) of raw bytes.
 */

import { lstat } from "node:fs/promises";
import path from "node:path";
import { PipelineStage, ReasonCode, fail, toolLimit } from "@webcodex/contracts";
import { errnoCode, type PathResolver, type ResolvedPath } from "./path-policy.js";
import { readRevision } from "./text-bytes.js";
import type { HostFile, ImportHostFilesRequest, ImportHostFilesResult, ImportedFileReport } from "./types.js";
import type { EditContext, PreparedCreate, PreparedReplace } from "./edit-prepared.js";
import { assertDistinctTargets, assertParentCreatable, existingRevision, loadGuardedFile, missingFile, withChangeIndex } from "./edit-preflight.js";
import type { ResolvedChange } from "./edit-preflight.js";
import { apply } from "./edit-apply.js";

/** Largest file one import may write, decoded. */
export const IMPORT_MAX_FILE_BYTES = toolLimit("import_host_files", "max_file_bytes");
/** Largest total one import call may write, decoded (a request body is at most 8 MiB). */
export const IMPORT_MAX_CALL_BYTES = toolLimit("import_host_files", "max_call_bytes");
export const IMPORT_MAX_FILES = toolLimit("import_host_files", "max_files");

export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decoded size of content without decoding it, so an oversize file is refused before any copy. */
export function declaredBytes(file: HostFile): number {
  if (typeof file.content_base64 === "string") {
    const s = file.content_base64;
    const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
    return Math.max(0, Math.floor((s.length * 3) / 4) - padding);
  }
  return typeof file.content === "string" ? Buffer.byteLength(file.content, "utf8") : 0;
}

export function decodeHostFile(file: HostFile, rel: string): Buffer {
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

export async function prepareImport(resolver: PathResolver, file: HostFile, index: number, source: ResolvedPath): Promise<PreparedCreate | PreparedReplace> {
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
