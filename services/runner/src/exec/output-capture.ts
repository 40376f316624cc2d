/**
 * Bounded capture of one output stream: the first `headBytes`, the last `tailBytes` and the
 * exact total. Memory stays O(head + tail) however much a process prints, while the model
 * still sees how a run started and how it ended, and exactly how much was left out.
 */

/** Rendered text of a capture and the bytes dropped from its middle (0 when complete). */
export interface RenderedOutput {
  text: string;
  omittedBytes: number;
}

const isContinuation = (byte: number | undefined): boolean => byte !== undefined && (byte & 0xc0) === 0x80;

function sequenceLength(lead: number): number {
  if ((lead & 0x80) === 0) return 1;
  if ((lead & 0xe0) === 0xc0) return 2;
  if ((lead & 0xf0) === 0xe0) return 3;
  if ((lead & 0xf8) === 0xf0) return 4;
  return 1;
}

/** Largest cut <= `end` that does not split a UTF-8 sequence in `buf`. */
export function utf8SafeEnd(buf: Uint8Array, end: number): number {
  let lead = end - 1;
  while (lead >= 0 && end - lead < 4 && isContinuation(buf[lead])) lead--;
  if (lead < 0) return end;
  const leadByte = buf[lead];
  if (leadByte === undefined || isContinuation(leadByte)) return end;
  return lead + sequenceLength(leadByte) <= end ? end : lead;
}

/** First offset in `buf` that starts a UTF-8 sequence (skips at most 3 continuation bytes). */
export function utf8SafeStart(buf: Uint8Array): number {
  let start = 0;
  while (start < 3 && start < buf.length && isContinuation(buf[start])) start++;
  return start;
}

/** The visible marker where the middle of a stream was dropped. */
export function omissionMarker(omittedBytes: number): string {
  return `\n[... ${omittedBytes} bytes omitted ...]\n`;
}

/** Head + tail capture of one stream; see the module comment for why. */
export class OutputCapture {
  readonly #headBytes: number;
  readonly #tailBytes: number;
  readonly #head: Buffer;
  #headLength = 0;
  #tail: Buffer[] = [];
  #tailLength = 0;
  #total = 0;

  constructor(headBytes: number, tailBytes: number) {
    this.#headBytes = headBytes;
    this.#tailBytes = tailBytes;
    this.#head = Buffer.alloc(headBytes);
  }

  /** Exact number of bytes written so far. */
  get totalBytes(): number {
    return this.#total;
  }

  write(chunk: Buffer): void {
    this.#total += chunk.length;
    let rest = chunk;
    if (this.#headLength < this.#headBytes) {
      const n = Math.min(this.#headBytes - this.#headLength, rest.length);
      rest.copy(this.#head, this.#headLength, 0, n);
      this.#headLength += n;
      rest = rest.subarray(n);
    }
    if (rest.length === 0 || this.#tailBytes === 0) return;
    this.#tail.push(rest);
    this.#tailLength += rest.length;
    // Compact lazily so a chatty process costs amortized O(1) per byte.
    if (this.#tailLength > 2 * this.#tailBytes) this.#compactTail();
  }

  #compactTail(): Buffer {
    const all = Buffer.concat(this.#tail, this.#tailLength);
    const kept = all.length > this.#tailBytes ? Buffer.from(all.subarray(all.length - this.#tailBytes)) : all;
    this.#tail = [kept];
    this.#tailLength = kept.length;
    return kept;
  }

  /** Head and tail joined, with a marker and the omitted count when the middle was dropped. */
  render(): RenderedOutput {
    const head = this.#head.subarray(0, this.#headLength);
    const tail = this.#compactTail();
    if (this.#headLength + tail.length === this.#total) {
      return { text: Buffer.concat([head, tail]).toString("utf8"), omittedBytes: 0 };
    }
    const headEnd = utf8SafeEnd(head, head.length);
    const tailStart = utf8SafeStart(tail);
    const omittedBytes = this.#total - headEnd - (tail.length - tailStart);
    const text = head.toString("utf8", 0, headEnd) + omissionMarker(omittedBytes) + tail.toString("utf8", tailStart);
    return { text, omittedBytes };
  }

  /** The last (up to) `maxBytes` bytes, cut on character boundaries at both ends. */
  tail(maxBytes: number): string {
    const tail = this.#compactTail();
    const complete = this.#headLength + tail.length === this.#total;
    const source = complete ? Buffer.concat([this.#head.subarray(0, this.#headLength), tail]) : tail;
    const from = Math.max(0, source.length - maxBytes);
    const bytes = source.subarray(from);
    // A stream that starts inside `bytes` needs no alignment; otherwise skip a split character.
    const start = complete && from === 0 ? 0 : utf8SafeStart(bytes);
    return bytes.toString("utf8", start, utf8SafeEnd(bytes, bytes.length));
  }
}
