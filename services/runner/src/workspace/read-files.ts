/**
 * read_files: many files or ranges in one call, each item independent. Each file is streamed
 * once: all of it is hashed and counted (read_revision covers its exact bytes and can guard a
 * later edit, whatever range was shown) while only the requested window is kept, so memory
 * follows the byte budgets, not the file size. Every cut says exactly where to continue: at
 * the next line, or at a column when one line is longer than the budget.
 *
 * One concept over 400 lines: read_files (ranges, budgets and revisions share one streaming pass).
 */
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, read as readCallback, readSync } from "node:fs";
import { promisify } from "node:util";
import { clampRule, PipelineStage, ReasonCode, ToolFailureError, fail, toolFailure } from "@webcodex/contracts";
import { errnoCode, openInside, type PathResolver } from "./path-policy.js";
import { BINARY_PROBE_BYTES, charStart, countCodePoints, isBinary, lineEndingOf, revisionFromSha256Hex } from "./text-bytes.js";
import type { LineEnding, ReadFilesRequest, ReadFileSpec, ReadItem, ReadFilesResult, ReadTextItem } from "./types.js";

export const DEFAULT_MAX_BYTES_PER_FILE = clampRule("read_files", "max_bytes_per_file").default;
/** Content bytes one call returns over all its items, spent in request order. */
export const MAX_BATCH_CONTENT_BYTES = 4 * 1024 * 1024;
/** Larger files are refused: producing their read_revision means reading all of them. */
export const MAX_READ_FILE_BYTES = 256 * 1024 * 1024;

export interface ReadLimits {
  maxBatchBytes: number;
  maxFileBytes: number;
  /** Bytes read from disk at a time. */
  chunkBytes: number;
}

export const DEFAULT_READ_LIMITS: ReadLimits = { maxBatchBytes: MAX_BATCH_CONTENT_BYTES, maxFileBytes: MAX_READ_FILE_BYTES, chunkBytes: 1024 * 1024 };

/** Files scanned at once: bounds the chunk buffers held together. */
const READ_CONCURRENCY = 8;
/** Bytes kept past a budget: enough to find a character boundary or finish one character. */
const CHAR_SLACK = 4;
const LF = 0x0a;
const CR = 0x0d;

/** An item as read, with the raw bytes of its content for the batch budget to cut again. */
interface ReadOutcome {
  item: ReadItem;
  content?: Buffer;
}

export async function readFiles(resolver: PathResolver, request: ReadFilesRequest, limits: ReadLimits = DEFAULT_READ_LIMITS): Promise<ReadFilesResult> {
  const maxBytes = request.max_bytes_per_file ?? DEFAULT_MAX_BYTES_PER_FILE;
  if (!Number.isInteger(maxBytes) || maxBytes < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "max_bytes_per_file_not_positive",
      evidence: { max_bytes_per_file: maxBytes },
    });
  }
  const budget = Math.min(maxBytes, limits.maxBatchBytes);
  const outcomes: ReadOutcome[] = new Array<ReadOutcome>(request.files.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < request.files.length) {
      const index = next++;
      outcomes[index] = await readOne(resolver, request.files[index] as ReadFileSpec, budget, limits);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, request.files.length) }, worker));

  // The batch budget is spent in request order: a later item is cut (exactly, with its
  // continuation) once earlier items have used it up.
  let remaining = limits.maxBatchBytes;
  for (const { item, content } of outcomes) {
    if (content === undefined || !("content" in item)) continue;
    let used = content.length;
    if (used > remaining) {
      const cut = cutWindow(content, item.truncated !== true, remaining, item.start_line, item.start_column ?? 1, item.end_line);
      applyCut(item, cut, "batch_budget");
      used = cut.content.length;
    }
    remaining = Math.max(0, remaining - used);
  }
  return { items: outcomes.map((o) => o.item) };
}

async function readOne(resolver: PathResolver, spec: ReadFileSpec, budget: number, limits: ReadLimits): Promise<ReadOutcome> {
  try {
    return await readChecked(resolver, spec, budget, limits);
  } catch (error) {
    if (error instanceof ToolFailureError) return { item: { success: false, path: spec.path, error: error.failure } };
    throw error;
  }
}

async function readChecked(resolver: PathResolver, spec: ReadFileSpec, budget: number, limits: ReadLimits): Promise<ReadOutcome> {
  const startLine = spec.start_line ?? 1;
  const startColumn = spec.start_column ?? 1;
  if (!Number.isInteger(startLine) || startLine < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "start_line_not_positive", evidence: { path: spec.path } });
  }
  if (!Number.isInteger(startColumn) || startColumn < 1) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "start_column_not_positive", evidence: { path: spec.path } });
  }
  if (spec.end_line !== undefined && (!Number.isInteger(spec.end_line) || spec.end_line < startLine)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, { detail_code: "end_line_before_start_line", evidence: { path: spec.path } });
  }

  const resolved = await resolver.resolve(spec.path, { allowRoot: true, realOnly: true });
  const path = resolved.rel;
  const scanned = await withRegularFile(resolver.rootReal, resolved.real, path, limits.maxFileBytes, (handle, size) =>
    scanFile(handle, size, { startLine, startColumn, endLine: spec.end_line, capture: budget + CHAR_SLACK }, limits, path),
  );
  const read_revision = scanned.revision;
  if (scanned.binary) {
    return { item: { success: true, error: null, path, binary: true, size_bytes: scanned.size, read_revision } };
  }
  const total = scanned.totalLines;
  if (scanned.columnPastLineEnd || (startColumn > 1 && startLine > total)) {
    fail(ReasonCode.invalidValue, PipelineStage.preflight, {
      detail_code: "start_column_past_line_end",
      evidence: { path, start_line: startLine, start_column: startColumn, total_lines: total },
    });
  }

  const start = Math.min(startLine, total + 1);
  const end = Math.min(spec.end_line ?? total, total);
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
    line_ending: scanned.lineEnding,
  };
  if (startColumn > 1) item.start_column = startColumn;
  if (end < start) return { item, content: Buffer.alloc(0) };
  const cut = cutWindow(scanned.window, !scanned.overflow, budget, start, startColumn, end);
  applyCut(item, cut, "max_bytes_per_file");
  return { item, content: cut.content };
}

interface Cut {
  content: Buffer;
  end_line: number;
  /** Where the rest of the range starts; absent when the window was returned whole. */
  next?: { line: number; column: number };
  line_truncated: boolean;
  rest_of_line_skipped?: true;
}

/**
 * The part of `window` (bytes of the range from `startLine`/`startColumn` on; `complete` when
 * it holds the whole rest of the range) that fits `budget`: whole lines when at least one
 * fits, otherwise the first line cut at a character boundary. At least one character is
 * returned whenever the budget is not zero, so continuing always makes progress.
 */
export function cutWindow(window: Buffer, complete: boolean, budget: number, startLine: number, startColumn: number, endLine: number): Cut {
  if (complete && window.length <= budget) return { content: window, end_line: endLine, line_truncated: false };
  if (budget <= 0) return { content: window.subarray(0, 0), end_line: startLine - 1, next: { line: startLine, column: startColumn }, line_truncated: false };
  const lastLf = window.lastIndexOf(LF, budget - 1);
  if (lastLf !== -1) {
    const content = window.subarray(0, lastLf + 1);
    const last = startLine + countLf(content) - 1;
    return { content, end_line: last, next: { line: last + 1, column: 1 }, line_truncated: false };
  }
  let cut = charStart(window, budget);
  // Nothing addressable fits (the budget ends inside the first character, or covers only stray
  // UTF-8 continuation bytes): take through the first whole character, so continuing progresses.
  if (countCodePoints(window, 0, cut) === 0) cut = endOfFirstChar(window);
  const characters = countCodePoints(window, 0, cut);
  if (characters === 0) {
    // The window holds no character start at all (so no newline either): only stray
    // continuation bytes, which no column can address. Return what the budget allows and
    // continue on the next line, saying the rest of this one was skipped.
    const content = window.subarray(0, Math.min(budget, window.length));
    if (complete)
      return {
        content,
        end_line: startLine,
        line_truncated: content.length < window.length,
        ...(content.length < window.length ? { rest_of_line_skipped: true as const } : {}),
      };
    return { content, end_line: startLine, next: { line: startLine + 1, column: 1 }, line_truncated: true, rest_of_line_skipped: true };
  }
  // The first character alone reached the end of the range: nothing is left to continue into.
  if (complete && cut >= window.length) return { content: window, end_line: endLine, line_truncated: false };
  return { content: window.subarray(0, cut), end_line: startLine, next: { line: startLine, column: startColumn + characters }, line_truncated: true };
}

function applyCut(item: ReadTextItem, cut: Cut, by: "max_bytes_per_file" | "batch_budget"): void {
  item.content = cut.content.toString("utf8");
  item.end_line = cut.end_line;
  delete item.next_start_line;
  delete item.next_start_column;
  delete item.line_truncated;
  delete item.rest_of_line_skipped;
  if (cut.next === undefined) return;
  item.truncated = true;
  item.truncated_by = by;
  item.next_start_line = cut.next.line;
  if (cut.next.column > 1) item.next_start_column = cut.next.column;
  if (cut.line_truncated) item.line_truncated = true;
  if (cut.rest_of_line_skipped === true) item.rest_of_line_skipped = true;
}

/** Offset just after the first character that starts in `bytes` (leading stray continuation bytes included). */
function endOfFirstChar(bytes: Buffer): number {
  let i = 0;
  while (i < bytes.length && ((bytes[i] as number) & 0xc0) === 0x80) i++;
  for (i++; i < bytes.length && ((bytes[i] as number) & 0xc0) === 0x80; i++);
  return Math.min(i, bytes.length);
}

function countLf(bytes: Buffer): number {
  let count = 0;
  for (let i = bytes.indexOf(LF); i !== -1; i = bytes.indexOf(LF, i + 1)) count++;
  return count;
}

interface ScanRange {
  startLine: number;
  /** 1-based, in code points of the start line (its line ending included). */
  startColumn: number;
  endLine: number | undefined;
  /** Bytes of the range kept at most. */
  capture: number;
}

interface Scanned {
  size: number;
  revision: string;
  binary: boolean;
  totalLines: number;
  lineEnding: LineEnding;
  /** The first `capture` bytes of the range. */
  window: Buffer;
  /** The range goes on past the window. */
  overflow: boolean;
  /** startColumn lies beyond the start line's last character. */
  columnPastLineEnd: boolean;
}

/**
 * One pass over the file in chunks: hash, binary probe, line and line-ending counts of the
 * whole file, and the window of the range. Line and column arithmetic matches LineIndex: a
 * trailing newline ends the last line, columns count UTF-8 code points.
 */
async function scanFile(handle: ChunkReader, size: number, range: ScanRange, limits: ReadLimits, path: string): Promise<Scanned> {
  const hash = createHash("sha256");
  const chunk = Buffer.allocUnsafe(size > 0 ? Math.min(limits.chunkBytes, size) : limits.chunkBytes);
  const probe: Buffer[] = [];
  let probed = 0;
  let lf = 0;
  let crlf = 0;
  let previous = -1;
  let read = 0;

  // The range walk: "seek" the start line, "skip" to the start column, "capture" the window.
  let phase: "seek" | "skip" | "capture" | "done" = "seek";
  let linesBefore = 0;
  let startsSeen = 0;
  let line = range.startLine;
  const window: Buffer[] = [];
  let kept = 0;
  let overflow = false;
  let columnPastLineEnd = false;

  for (;;) {
    // A regular file is read up to the size it had when opened (a size of 0 may be one whose
    // length the kernel does not report: read it to the end).
    const want = size > 0 ? Math.min(chunk.length, size - read) : chunk.length;
    if (want <= 0) break;
    const { bytesRead } = await handle.read(chunk, 0, want, read);
    if (bytesRead === 0) break;
    read += bytesRead;
    if (read > limits.maxFileBytes) tooLarge(path, read, limits.maxFileBytes);
    const c = chunk.subarray(0, bytesRead);
    hash.update(c);
    if (probed < BINARY_PROBE_BYTES) {
      const part = c.subarray(0, BINARY_PROBE_BYTES - probed);
      probe.push(Buffer.from(part));
      probed += part.length;
    }
    for (let j = c.indexOf(LF); j !== -1; j = c.indexOf(LF, j + 1)) {
      lf++;
      if ((j > 0 ? c[j - 1] : previous) === CR) crlf++;
    }
    previous = c[c.length - 1] as number;

    let i = 0;
    if (phase === "seek") {
      while (linesBefore < range.startLine - 1) {
        const j = c.indexOf(LF, i);
        if (j === -1) break;
        linesBefore++;
        i = j + 1;
      }
      if (linesBefore === range.startLine - 1) phase = range.startColumn > 1 ? "skip" : "capture";
    }
    if (phase === "skip") {
      for (; i < c.length; i++) {
        const b = c[i] as number;
        if ((b & 0xc0) === 0x80) continue;
        startsSeen++;
        if (startsSeen === range.startColumn) {
          phase = "capture";
          break;
        }
        if (b === LF) {
          columnPastLineEnd = true;
          phase = "done";
          break;
        }
      }
    }
    // The lines captured from this chunk are contiguous: one copy per chunk, not per line.
    const from = i;
    while (phase === "capture" && i < c.length) {
      const j = c.indexOf(LF, i);
      const segmentEnd = j === -1 ? c.length : j + 1;
      const take = Math.min(segmentEnd - i, range.capture - kept);
      kept += take;
      if (take < segmentEnd - i) {
        i += take;
        overflow = true;
        phase = "done";
        break;
      }
      i = segmentEnd;
      if (j !== -1) {
        if (range.endLine !== undefined && line >= range.endLine) phase = "done";
        line++;
      }
    }
    if (i > from) window.push(Buffer.from(c.subarray(from, i)));
  }
  if (phase === "skip") columnPastLineEnd = true;

  const head = Buffer.concat(probe);
  const lfOnly = lf - crlf;
  return {
    size: read,
    revision: revisionFromSha256Hex(hash.digest("hex")),
    binary: isBinary(head),
    totalLines: read === 0 ? 0 : lf + (previous === LF ? 0 : 1),
    lineEnding: lineEndingOf(lfOnly, crlf),
    window: Buffer.concat(window),
    overflow,
    columnPastLineEnd,
  };
}

function tooLarge(path: string, size: number, max: number): never {
  return fail(ReasonCode.fileTooLarge, PipelineStage.preflight, {
    evidence: { path, size_bytes: size, max_bytes: max },
    message: "The file is larger than read_files reads; read parts of it with run_process (head, tail, sed -n) or find lines with search_project_texts.",
  });
}

const readAsync = promisify(readCallback);

/** What scanFile reads chunks through: one descriptor, read synchronously (small files) or not. */
interface ChunkReader {
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> | { bytesRead: number };
}

/**
 * Files up to this size are read with synchronous calls on one descriptor. A local read of a
 * few KiB takes microseconds, while each asynchronous fs call is a thread-pool round trip
 * (open, fstat, read, close: four per file); larger files keep the asynchronous chunked path
 * so that one big read never holds the event loop.
 */
const SYNC_READ_MAX_BYTES = 256 * 1024;

/**
 * Opens a regular file (refusing other kinds and files above `maxBytes`) and runs `use` on it,
 * reading through the one descriptor it checked. O_NONBLOCK keeps the open of a FIFO from
 * waiting for a writer (it has no effect on regular files), so such a path is refused at once.
 */
async function withRegularFile<T>(
  rootReal: string,
  real: string,
  path: string,
  maxBytes: number,
  use: (reader: ChunkReader, size: number) => Promise<T>,
): Promise<T> {
  let fd: number | undefined;
  try {
    fd = openInside(rootReal, real, path, constants.O_RDONLY | constants.O_NONBLOCK);
    const stat = fstatSync(fd);
    if (!stat.isFile()) {
      return fail(ReasonCode.notAFile, PipelineStage.resolution, { evidence: { path } });
    }
    if (stat.size > maxBytes) tooLarge(path, stat.size, maxBytes);
    const descriptor = fd;
    const reader: ChunkReader =
      stat.size > 0 && stat.size <= SYNC_READ_MAX_BYTES
        ? { read: (buffer, offset, length, position) => ({ bytesRead: readSync(descriptor, buffer, offset, length, position) }) }
        : { read: (buffer, offset, length, position) => readAsync(descriptor, buffer, offset, length, position) };
    return await use(reader, stat.size);
  } catch (error) {
    if (error instanceof ToolFailureError) throw error;
    const code = errnoCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new ToolFailureError(toolFailure(ReasonCode.pathNotFound, PipelineStage.resolution, { evidence: { path } }));
    }
    if (code === "EISDIR") {
      throw new ToolFailureError(toolFailure(ReasonCode.notAFile, PipelineStage.resolution, { evidence: { path } }));
    }
    throw error;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
