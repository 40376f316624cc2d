/**
 * The rest of a refused request body. The refusal (413) is answered at once; the remainder is
 * still read and thrown away, so a client that is still writing it gets the answer rather than a
 * reset, but it is read at a rate shared by every refused body of the process (default 32 MiB/s),
 * a few hundred KiB at a time between other work. A flood of oversized or over-shaped bodies then
 * costs its senders time (TCP flow control holds their writes) instead of costing other callers
 * the event loop. A remainder not read within its linger limit (default 30 s) is cut.
 */
import type { Readable } from "node:stream";

export interface RefusedBodyDrainOptions {
  /** Bytes of refused bodies read per second, across all of them (default 32 MiB). */
  bytesPerSecond?: number;
  /** How often the drain reads (default 10 ms). */
  tickMs?: number;
  /** How long a refused body's remainder may take before its connection is cut (default 30 s). */
  maxLingerMs?: number;
}

export interface RefusedBodyDrain {
  /**
   * Takes over the rest of `body` (its own listeners already removed): read at the shared rate
   * until its end; `cut` ends the connection once the linger limit passes.
   */
  add(body: Readable, cut: () => void): void;
  /** Refused bodies being read now. */
  readonly draining: number;
  /** Bytes of refused bodies read and thrown away since start. */
  readonly discardedBytes: number;
}

export function createRefusedBodyDrain(o: RefusedBodyDrainOptions = {}): RefusedBodyDrain {
  const tickMs = o.tickMs ?? 10;
  const perTick = Math.max(1, Math.floor(((o.bytesPerSecond ?? 32 * 2 ** 20) * tickMs) / 1000));
  const lingerMs = o.maxLingerMs ?? 30_000;
  const bodies = new Map<Readable, { deadline: number; cut: () => void }>();
  let timer: NodeJS.Timeout | undefined;
  let discarded = 0;
  let first = 0;
  let credit = 0;

  const tick = () => {
    timer = undefined;
    const now = Date.now();
    for (const [body, entry] of bodies) {
      if (now < entry.deadline) continue;
      bodies.delete(body);
      entry.cut();
    }
    // Whole buffered chunks are taken while this tick's credit lasts, starting one body further
    // each tick so that every body moves on. A chunk that overdraws the credit is paid back from
    // the next ticks', so the rate holds over time whatever the chunk size; unused credit is not
    // saved up beyond one tick's.
    const list = [...bodies.keys()];
    credit = Math.min(perTick, credit + perTick);
    for (let i = 0; i < list.length && credit > 0; i++) {
      const body = list[(first + i) % list.length] as Readable;
      let chunk: Buffer | null;
      while (credit > 0 && (chunk = body.read() as Buffer | null) !== null) {
        credit -= chunk.length;
        discarded += chunk.length;
      }
    }
    first = list.length ? (first + 1) % list.length : 0;
    schedule();
  };
  const schedule = () => {
    if (timer || bodies.size === 0) return;
    timer = setTimeout(tick, tickMs);
    timer.unref();
  };

  return {
    add(body, cut) {
      body.pause();
      if (body.readableEnded || body.destroyed) return;
      // Read once now, so the stream counts as consumed (node:http would otherwise read a body no
      // one consumed at full speed once the answer is written) and asks its socket for more; the
      // bytes count against the shared rate.
      const taken = (body.read() as Buffer | null)?.length ?? 0;
      discarded += taken;
      credit -= taken;
      const done = () => bodies.delete(body);
      body.once("end", done);
      body.once("close", done);
      // Errors of a discarded body (the client went away) need no answer.
      body.on("error", done);
      bodies.set(body, { deadline: Date.now() + lingerMs, cut });
      schedule();
    },
    get draining() {
      return bodies.size;
    },
    get discardedBytes() {
      return discarded;
    },
  };
}
