/**
 * An MCP request's body: read with its shape checked on the bytes as they arrive, and, when it is
 * refused, its unread rest left where it is. A refused body is not read to its end: beyond a
 * small remainder (read and discarded so the connection is kept), the answer closes the
 * connection and the rest of the body never enters the process. Reading it to its end, even
 * unbuffered, made every byte of a flood of oversized requests a short-lived copy (one per
 * socket read), tens of MiB between two collections that the allocator kept afterwards.
 */
import http2 from "node:http2";
import type { Socket } from "node:net";
import type { NodeRequest, NodeResponse } from "@webcodex/platform";
import { sendJson } from "@webcodex/platform";

/**
 * Messages one JSON-RPC batch may carry. A batch is answered as one HTTP response, so without
 * a cap one request could queue unbounded work and memory ahead of every other tenant's.
 */
export const MAX_BATCH_MESSAGES = 32;

/** A refused body's unread remainder up to which it is still read and discarded, so the connection is kept. */
export const DISCARD_LIMIT_BYTES = 256 * 1024;

/**
 * How long a connection closed on an unread body stays half-closed after the answer before it is
 * cut: closing a socket with unread data resets the connection, and a client still sending could
 * lose the answer to that reset if it came at once.
 */
export const LINGER_MS = 500;

/** Why a body was refused, and how many of its bytes were read before it was. */
export interface BodyRefusal {
  problem: "too_large" | JsonShapeProblem;
  read: number;
}

/**
 * The body, or why it was refused. A declared Content-Length over `limit` is refused before any
 * byte is read; otherwise the shape is checked chunk by chunk as the body arrives, and the body
 * is refused at its first excess. Reading stops there: see answerRefusedBody for the rest.
 */
export function readBody(req: NodeRequest, limit: number): Promise<Buffer | BodyRefusal> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const shape = new JsonShapeScanner();
    let size = 0;
    const refuse = (problem: BodyRefusal["problem"]) => {
      req.removeListener("data", onData);
      req.removeListener("end", onEnd);
      // Paused, the request takes no more from its socket once its small buffer is full (and,
      // having had a 'data' listener, it is not drained by the server after the answer either).
      req.pause();
      chunks.length = 0;
      resolve({ problem, read: size });
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return refuse("too_large");
      const problem = shape.feed(chunk);
      if (problem) return refuse(problem);
      chunks.push(chunk);
    };
    const onEnd = () => resolve(Buffer.concat(chunks));
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", reject);
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) refuse("too_large");
  });
}

/**
 * Answers a request whose body was refused by readBody. A remainder of at most
 * DISCARD_LIMIT_BYTES (by its Content-Length) is read and discarded, and the connection kept;
 * any other is never read: over HTTP/1.1 the answer says `Connection: close`, the connection is
 * half-closed once the answer is written and cut LINGER_MS later; over HTTP/2 the stream is
 * closed with NO_ERROR after the answer (the client stops sending it, RFC 9113 §8.1).
 */
export function answerRefusedBody(req: NodeRequest, res: NodeResponse, refusal: BodyRefusal, status: number, body: unknown): void {
  const declared = Number(req.headers["content-length"]);
  const rest = Number.isFinite(declared) ? declared - refusal.read : Infinity;
  if (rest <= DISCARD_LIMIT_BYTES) {
    req.resume();
    return sendJson(res, status, body);
  }
  if (req.httpVersionMajor === 2) {
    // Once the answer is written (the stream's own 'finish': the response's comes only when the
    // stream closes).
    const stream = (req as http2.Http2ServerRequest).stream;
    stream.once("finish", () => stream.close(http2.constants.NGHTTP2_NO_ERROR));
    return sendJson(res, status, body);
  }
  const socket = req.socket as Socket;
  // Node's server ends a `Connection: close` exchange with socket.destroySoon(): the socket is
  // half-closed and destroyed as soon as that is written. Its listener for that is taken off
  // here (this runs after the server's own 'finish' listener) and the cut comes LINGER_MS later.
  res.once("finish", () => {
    socket.removeListener("finish", socket.destroy);
    if (socket.destroyed) return;
    const cut = setTimeout(() => socket.destroy(), LINGER_MS);
    cut.unref();
    socket.once("close", () => clearTimeout(cut));
  });
  sendJson(res, status, body, { connection: "close" });
}

/** Bounds on a request body's shape, checked on its bytes before any object is built. */
export const JSON_LIMITS = {
  /** Messages one JSON-RPC batch may carry. */
  batch: MAX_BATCH_MESSAGES,
  /** Nesting of arrays and objects. */
  depth: 64,
  /** Members and elements across the whole body (a key with its value counts once). */
  values: 100_000,
} as const;

export type JsonLimits = { batch: number; depth: number; values: number };
export type JsonShapeProblem = { kind: keyof JsonLimits; limit: number };

/**
 * Checks a body's shape on its bytes, chunk by chunk, outside strings only: it stops at the first
 * excess, so a 160,000-message batch, a 400,000-key object or a 4M-deep nesting is refused after
 * a few KiB instead of being built by JSON.parse on the event loop. Malformed JSON that breaks
 * no bound is left for JSON.parse to refuse.
 */
export class JsonShapeScanner {
  private started = false;
  private batch = false;
  private depth = 0;
  private values = 0;
  private topCommas = 0;
  private inString = false;
  private escaped = false;
  constructor(private readonly limits: JsonLimits = JSON_LIMITS) {}

  /** The first bound broken so far, or undefined. */
  feed(chunk: Uint8Array): JsonShapeProblem | undefined {
    const { limits } = this;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
        continue;
      }
      if (!this.started) {
        if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
        this.started = true;
        this.batch = c === 0x5b;
      }
      if (c === 0x22) this.inString = true;
      else if (c === 0x5b || c === 0x7b) {
        if (++this.depth > limits.depth) return { kind: "depth", limit: limits.depth };
        if (++this.values > limits.values) return { kind: "values", limit: limits.values };
      } else if (c === 0x5d || c === 0x7d) this.depth--;
      else if (c === 0x2c) {
        if (this.batch && this.depth === 1 && ++this.topCommas >= limits.batch) return { kind: "batch", limit: limits.batch };
        if (++this.values > limits.values) return { kind: "values", limit: limits.values };
      }
    }
    return undefined;
  }
}

/** The first bound a whole `body` breaks, or undefined. */
export function jsonShapeProblem(body: Uint8Array, limits: JsonLimits = JSON_LIMITS): JsonShapeProblem | undefined {
  return new JsonShapeScanner(limits).feed(body);
}
