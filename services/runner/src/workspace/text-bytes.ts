/**
 * Byte-level helpers shared by reads and edits. Everything works on the raw bytes of a file so
 * that revisions, line numbers and rewritten content are exact, whatever the encoding or line
 * endings.
 */
import { createHash } from "node:crypto";
import type { LineEnding } from "./types.js";

const LF = 0x0a;
const CR = 0x0d;

/** Opaque token of a file's exact bytes: "r_" + first 16 hex digits of its sha256. */
export function readRevision(bytes: Uint8Array): string {
  return revisionFromSha256Hex(createHash("sha256").update(bytes).digest("hex"));
}

/** The read_revision of a file whose sha256 (hex) was computed elsewhere, e.g. while streaming it. */
export function revisionFromSha256Hex(hex: string): string {
  return "r_" + hex.slice(0, 16);
}

/** How many leading bytes isBinary looks at. */
export const BINARY_PROBE_BYTES = 8192;

/** A NUL byte in the first 8 KiB marks a file as binary (the heuristic git and rg use). */
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

/**
 * Start offsets of the lines of a buffer, in one pass. A trailing newline ends the last line
 * rather than opening an empty one, so "a\n" has one line and "" has none.
 */
export function lineStarts(bytes: Buffer): number[] {
  const starts: number[] = bytes.length > 0 ? [0] : [];
  const last = bytes.length - 1;
  for (let i = bytes.indexOf(LF); i !== -1 && i < last; i = bytes.indexOf(LF, i + 1)) {
    starts.push(i + 1);
  }
  return starts;
}

export function detectLineEnding(bytes: Buffer): LineEnding {
  let lf = 0;
  let crlf = 0;
  for (let i = bytes.indexOf(LF); i !== -1; i = bytes.indexOf(LF, i + 1)) {
    if (i > 0 && bytes[i - 1] === CR) crlf++;
    else lf++;
    if (lf > 0 && crlf > 0) return "mixed";
  }
  return lineEndingOf(lf, crlf);
}

/** The line-ending style of text with `lfOnly` bare LF and `crlf` CRLF line ends. */
export function lineEndingOf(lfOnly: number, crlf: number): LineEnding {
  if (lfOnly > 0 && crlf > 0) return "mixed";
  if (crlf > 0) return "crlf";
  return lfOnly > 0 ? "lf" : "none";
}

/** Lines of one buffer, indexed lazily: callers that never need a line number pay nothing. */
export class LineIndex {
  private starts: number[] | undefined;
  constructor(private readonly bytes: Buffer) {}

  get lineStarts(): number[] {
    this.starts ??= lineStarts(this.bytes);
    return this.starts;
  }

  get totalLines(): number {
    return this.lineStarts.length;
  }

  /** Byte offset where 1-based `line` starts; past the end it is the buffer length. */
  startOf(line: number): number {
    return line <= this.totalLines ? (this.lineStarts[line - 1] as number) : this.bytes.length;
  }

  /** Byte offset just after 1-based `line`, its line ending included. */
  endOf(line: number): number {
    return line < this.totalLines ? (this.lineStarts[line] as number) : this.bytes.length;
  }

  /** 1-based line containing the byte at `offset`. */
  lineOf(offset: number): number {
    const starts = this.lineStarts;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] as number) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  }

  /** 1-based line and column (in code points) of the character starting at `offset`. */
  positionOf(offset: number): { line: number; column: number } {
    const line = this.lineOf(offset);
    return { line, column: countCodePoints(this.bytes, this.startOf(line), offset) + 1 };
  }
}

/** Number of UTF-8 code points in bytes[from, to): every byte that is not a continuation byte. */
export function countCodePoints(bytes: Buffer, from: number, to: number): number {
  let count = 0;
  for (let i = from; i < to; i++) {
    if (((bytes[i] as number) & 0xc0) !== 0x80) count++;
  }
  return count;
}

/** Offset of the first byte of the UTF-8 character containing `offset`. */
export function charStart(bytes: Buffer, offset: number): number {
  let i = offset;
  while (i > 0 && ((bytes[i] as number) & 0xc0) === 0x80) i--;
  return i;
}
