/**
 * read_files: many files or ranges in one call, each item independent. An item never fails
 * the batch; a whole file is always read so that read_revision covers its exact bytes and can
 * guard a later edit, whatever range was shown.
 */
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { FailureStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { errnoCode, type PathResolver } from "./path-policy.js";
import { charStart, detectLineEnding, isBinary, LineIndex, readRevision } from "./text-bytes.js";
import type { ReadFilesRequest, ReadFileSpec, ReadItem, ReadFilesResult, ReadTextItem } from "./types.js";

export const DEFAULT_MAX_BYTES_PER_FILE = 65536;

export async function readFiles(resolver: PathResolver, request: ReadFilesRequest): Promise<ReadFilesResult> {
  const maxBytes = request.max_bytes_per_file ?? DEFAULT_MAX_BYTES_PER_FILE;
  if (!Number.isInteger(maxBytes) || maxBytes < 1) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, {
      detail_code: "max_bytes_per_file_not_positive",
      evidence: { max_bytes_per_file: maxBytes },
    });
  }
  const items = await Promise.all(request.files.map((spec) => readOne(resolver, spec, maxBytes)));
  return { items };
}

async function readOne(resolver: PathResolver, spec: ReadFileSpec, maxBytes: number): Promise<ReadItem> {
  try {
    return await readChecked(resolver, spec, maxBytes);
  } catch (error) {
    if (error instanceof ToolFailureError) return { success: false, path: spec.path, error: error.failure };
    throw error;
  }
}

async function readChecked(resolver: PathResolver, spec: ReadFileSpec, maxBytes: number): Promise<ReadItem> {
  const startLine = spec.start_line ?? 1;
  if (!Number.isInteger(startLine) || startLine < 1) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "start_line_not_positive", evidence: { path: spec.path } });
  }
  if (spec.end_line !== undefined && (!Number.isInteger(spec.end_line) || spec.end_line < startLine)) {
    fail(ReasonCode.invalidValue, FailureStage.preflight, { detail_code: "end_line_before_start_line", evidence: { path: spec.path } });
  }

  const resolved = await resolver.resolve(spec.path, { allowRoot: true, realOnly: true });
  const path = resolved.rel;
  const bytes = await readRegularFile(resolved.real, path);
  const read_revision = readRevision(bytes);
  if (isBinary(bytes)) {
    return { success: true, error: null, path, binary: true, size_bytes: bytes.length, read_revision };
  }

  const lines = new LineIndex(bytes);
  const total = lines.totalLines;
  const start = Math.min(startLine, total + 1);
  const end = Math.min(spec.end_line ?? total, total);
  const from = lines.startOf(start);
  const item: ReadTextItem = {
    success: true,
    error: null,
    path,
    content: "",
    read_revision,
    start_line: start,
    end_line: end,
    total_lines: total,
    truncated: false,
    line_ending: detectLineEnding(bytes),
  };
  if (end < start) return item;

  if (lines.endOf(end) - from <= maxBytes) {
    item.content = bytes.toString("utf8", from, lines.endOf(end));
    return item;
  }

  // Keep whole lines within the byte budget: binary search the last line that still fits.
  let lo = start - 1;
  let hi = end - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (lines.endOf(mid) - from <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  item.truncated = true;
  if (lo >= start) {
    item.content = bytes.toString("utf8", from, lines.endOf(lo));
    item.end_line = lo;
    item.next_start_line = lo + 1;
    return item;
  }
  // A single line longer than the budget: cut it at a character boundary and say so.
  item.content = bytes.toString("utf8", from, charStart(bytes, from + maxBytes));
  item.end_line = start;
  item.line_truncated = true;
  if (start < end) item.next_start_line = start + 1;
  return item;
}

/** Whole bytes of a regular file; a missing path or a non-file is a typed failure. */
export async function readRegularFile(real: string, path: string): Promise<Buffer> {
  let handle: FileHandle | undefined;
  try {
    // One open, fstat, read and close: the stat is of the file actually read, and its size
    // sizes the one read (FileHandle.readFile would fstat again and read once more for EOF).
    handle = await open(real, "r");
    const stat = await handle.stat();
    if (!stat.isFile()) {
      return fail(ReasonCode.notAFile, FailureStage.resolution, { evidence: { path } });
    }
    // A size of 0 may be a file whose length the kernel does not report; read it to the end.
    if (stat.size === 0) return await handle.readFile();
    const bytes = Buffer.allocUnsafe(stat.size);
    let filled = 0;
    while (filled < bytes.length) {
      const { bytesRead } = await handle.read(bytes, filled, bytes.length - filled, filled);
      if (bytesRead === 0) break; // truncated since the fstat: what is there is what was read
      filled += bytesRead;
    }
    return filled === bytes.length ? bytes : bytes.subarray(0, filled);
  } catch (error) {
    if (error instanceof ToolFailureError) throw error;
    const code = errnoCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new ToolFailureError(toolFailure(ReasonCode.pathNotFound, FailureStage.resolution, { evidence: { path } }));
    }
    if (code === "EISDIR") {
      throw new ToolFailureError(toolFailure(ReasonCode.notAFile, FailureStage.resolution, { evidence: { path } }));
    }
    throw error;
  } finally {
    await handle?.close();
  }
}
