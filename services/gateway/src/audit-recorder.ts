/**
 * Delivers ActionAudit records to the audit service.
 *
 * - An effectful call's record is acknowledged only once it is durable: stored by the audit
 *   service, or appended and fsync'd to the gateway's spool (when a spool directory is
 *   configured). If neither is possible, `record` rejects with AuditNotDurableError and the
 *   pipeline must not report the call as a plain success.
 * - A read-only record (or a refused call's) is delivered at once, in one batch with the
 *   records that arrive while a delivery is in flight (group commit), and `record` resolves
 *   once its batch is stored, spooled, or, when delivery fails without a spool, queued in
 *   memory for retry: a call is answered only after its record left the gateway's memory, so
 *   a gateway killed right after answering loses no row. While deliveries are failing, such
 *   records are queued at once (the call is not held up) and retried in batches.
 * - With a spool, a read-only record is made durable there instead (appended and fdatasync'd,
 *   group-committed with the records of concurrent calls) and the call answered; the records
 *   spooled so are shipped to the audit service from memory within `shipMs`, and the spool
 *   told, which deletes a segment once all its records are delivered (no file is created,
 *   sealed or deleted per shipment). No audit commit waits on a read's answer, and a gateway
 *   killed right after answering still loses no row (the next start replays the spool; the
 *   audit service ignores a record it already has).
 * - The spool is replayed on start, whenever a delivery succeeds again (reconnect), and on a
 *   backoff timer while it is not empty. Replays are idempotent: records are deduplicated by
 *   call_id within a segment and the audit service ignores a (call_id, started_at) it has.
 *
 * The spool itself (layout, locking, fsync) is audit-spool.ts.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { ActionRecord, ActionRecordSchema, AuditService } from "@webcodex/proto";
import { activeSpanContext, withLinkedSpan } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import { Spool } from "./audit-spool.js";

export type ActionRecordInit = MessageInitShape<typeof ActionRecordSchema>;

export interface AuditRecorder {
  /**
   * durable=true: resolves once the record is stored or durably spooled; rejects with
   * AuditNotDurableError when neither is possible. durable=false: resolves once its batch is stored or spooled (at once, queued, while deliveries are failing).
   */
  record(record: ActionRecordInit, durable: boolean): Promise<void>;
  /** Delivers the in-memory queue now (undeliverable records go to the spool). */
  flush(): Promise<void>;
  /** Delivers the spool now; resolves with the number of records the audit service acknowledged. */
  replay(): Promise<number>;
  /** Records not yet acknowledged by the audit service (memory queue + spool). */
  backlog(): number;
  close(): Promise<void>;
}

export interface AuditRecorderOptions {
  /**
   * How long read-only records wait to be batched (ms): while deliveries are failing, or always
   * when `readsWaitForStore` is false.
   */
  flushMs?: number;
  /**
   * How long reads made durable in the spool wait to be shipped to the audit service (ms,
   * default 100): they are durable already, so this only sets how soon their rows can be
   * queried; a longer window ships more of them per delivery (one audit request and one audit
   * transaction for every read of the window).
   */
  shipMs?: number;
  /**
   * true (default): a read-only or refused call is answered once its group-committed batch is
   * stored, so a gateway process killed right after answering loses no row. false: it is
   * answered once queued, and rows of the last `flushMs` are lost with the process; for the
   * embedded default, where the audit store lives and dies in the same process.
   */
  readsWaitForStore?: boolean;
  /**
   * true (default when a spool is configured): with `readsWaitForStore`, a read-only record is
   * durable once fsync'd to the spool, and shipped from there asynchronously. false: it waits
   * for its group-committed batch to be stored by the audit service.
   */
  readsDurableBySpool?: boolean;
  maxBatch?: number;
  /**
   * Directory of the durable spool. Without one, undeliverable records wait in memory only
   * and a gateway restart during an audit outage loses them.
   */
  spoolDir?: string;
  /** Per-attempt deadline of a synchronous delivery before the record is spooled (ms). */
  deliveryTimeoutMs?: number;
  /** Longest wait between replay attempts while the spool is not empty (ms). */
  retryMaxMs?: number;
  /** Spool size at which appends fail (effectful calls are then not acknowledged). */
  maxSpoolBytes?: number;
}

/** Neither the audit service nor the spool could make an effectful call's record durable. */
export class AuditNotDurableError extends Error {
  constructor(cause: unknown) {
    super("the audit record of an effectful call could not be made durable", { cause });
    this.name = "AuditNotDurableError";
  }
}

interface Queued {
  record: ActionRecordInit;
  link: ReturnType<typeof activeSpanContext>;
  /** Resolves the caller waiting for this record's batch to settle. */
  settled?: () => void;
}

export function createAuditRecorder(audit: Client<typeof AuditService>, logger: Logger, options: AuditRecorderOptions = {}): AuditRecorder {
  const flushMs = options.flushMs ?? 25;
  const shipMs = options.shipMs ?? 100;
  const maxBatch = options.maxBatch ?? 500;
  const readsWaitForStore = options.readsWaitForStore ?? true;
  const readsDurableBySpool = options.readsDurableBySpool ?? true;
  let shipTimer: NodeJS.Timeout | undefined;
  const deliveryTimeoutMs = options.deliveryTimeoutMs ?? 2_000;
  const retryMaxMs = options.retryMaxMs ?? 5_000;
  let queue: Queued[] = [];
  let flushTimer: NodeJS.Timeout | undefined;
  let flushImmediate: NodeJS.Immediate | undefined;
  let replayTimer: NodeJS.Timeout | undefined;
  let inflight: Promise<void> | undefined;
  let replaying: Promise<number> | undefined;
  /** Reads spooled and not yet shipped, with the segment each is in. */
  let unshipped: Array<{ record: ActionRecordInit; seq: number }> = [];
  /** Replays and shipments of spooled reads run one at a time (both may delete segments). */
  let spoolWork: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = spoolWork.then(fn, fn);
    spoolWork = run.catch(() => undefined);
    return run;
  };
  let failures = 0;
  /** True from a failed delivery until a replay succeeds: effectful records go straight to the spool. */
  let degraded = false;
  let closed = false;

  const spoolReady: Promise<Spool | undefined> = options.spoolDir
    ? Spool.open(options.spoolDir, options.maxSpoolBytes ?? 1024 ** 3).catch((error: unknown) => {
        logger.error("audit spool unavailable; effectful calls cannot be acknowledged while the audit service is down", { error });
        return undefined;
      })
    : Promise.resolve(undefined);
  let spool: Spool | undefined;
  void spoolReady.then((s) => {
    spool = s;
    if (s && s.segments().length > 0) {
      logger.info("audit spool found records from an earlier run; replaying", { records: s.pending });
      void replay();
    }
  });

  const deliver = (records: ActionRecordInit[]) => audit.recordActions({ records: records as ActionRecord[] }, { timeoutMs: deliveryTimeoutMs });

  const noteFailure = (error: unknown, what: string) => {
    failures += 1;
    degraded = true;
    if (failures === 1 || failures % 50 === 0) logger.warn(`audit delivery failed; ${what}`, { backlog: backlog(), error });
  };
  const noteSuccess = () => {
    const recovering = failures > 0 || degraded;
    failures = 0;
    if (recovering && (spool?.pending ?? 0) > 0) void replay();
  };

  const scheduleFlush = (delay: number) => {
    if (flushTimer || closed) return;
    flushTimer = setTimeout(() => {
      flushTimer = undefined;
      void flush();
    }, delay);
    flushTimer.unref();
  };
  /**
   * Flush once this turn's I/O callbacks ran (records of this turn join the batch), cancelling a
   * pending timer; setImmediate, not setTimeout(0), which Node delays by at least 1 ms.
   */
  const flushSoon = () => {
    if (flushTimer) {
      clearTimeout(flushTimer);
      flushTimer = undefined;
    }
    if (flushImmediate || closed) return;
    flushImmediate = setImmediate(() => {
      flushImmediate = undefined;
      void flush();
    });
    flushImmediate.unref();
  };
  /** Ships spooled reads within shipMs (one delivery for every append of the window). */
  const scheduleShip = () => {
    if (shipTimer || closed) return;
    shipTimer = setTimeout(() => {
      shipTimer = undefined;
      void ship();
    }, shipMs);
    shipTimer.unref();
  };

  /**
   * Delivers the spooled reads from memory and tells the spool. When delivery fails they are
   * left to the spool's replay (they are on disk), as after a crash.
   */
  function ship(): Promise<void> {
    return exclusive(async () => {
      const s = await spoolReady;
      const batch = unshipped.splice(0, maxBatch);
      if (!s || batch.length === 0) return;
      try {
        await deliver(batch.map((u) => u.record));
      } catch (error) {
        unshipped = [];
        noteFailure(error, "spooled reads kept for replay");
        scheduleReplay();
        return;
      }
      const perSegment = new Map<number, number>();
      for (const u of batch) perSegment.set(u.seq, (perSegment.get(u.seq) ?? 0) + 1);
      for (const [seq, n] of perSegment) await s.delivered(seq, n).catch((error: unknown) => logger.warn("audit spool cleanup failed", { error }));
      noteSuccess();
    }).finally(() => {
      if (unshipped.length > 0) scheduleShip();
    });
  }
  const scheduleReplay = () => {
    if (replayTimer || closed) return;
    const delay = Math.min(100 * 2 ** Math.min(failures, 8), retryMaxMs);
    replayTimer = setTimeout(() => {
      replayTimer = undefined;
      void replay();
    }, delay);
    replayTimer.unref();
  };

  async function flush(): Promise<void> {
    while (inflight) await inflight;
    if (queue.length === 0) return;
    const batch = queue.slice(0, maxBatch);
    queue = queue.slice(batch.length);
    const links = batch.map((q) => q.link).filter((l): l is NonNullable<typeof l> => l !== undefined);
    inflight = withLinkedSpan("audit.deliver_batch", links, () => deliver(batch.map((q) => q.record)))
      .then(noteSuccess)
      .catch(async (error: unknown) => {
        const s = await spoolReady;
        if (s) {
          try {
            await s.append(batch.map((q) => q.record));
            noteFailure(error, "batch spooled");
            scheduleReplay();
            return;
          } catch (spoolError) {
            logger.error("audit spool append failed; batch kept in memory", { error: spoolError });
          }
        }
        queue = [...batch, ...queue];
        noteFailure(error, "records kept in memory for retry");
        scheduleFlush(Math.min(100 * 2 ** Math.min(failures, 6), retryMaxMs));
      })
      .finally(() => {
        inflight = undefined;
        for (const q of batch) q.settled?.();
      });
    await inflight;
    if (queue.length > 0 && failures === 0) scheduleFlush(0);
  }

  async function replayOnce(): Promise<number> {
    const s = await spoolReady;
    if (!s) return 0;
    await s.seal();
    let delivered = 0;
    for (const segment of [...s.segments()]) {
      const { records, torn } = await s.read(segment);
      if (torn > 0) logger.warn("audit spool segment had unreadable lines (torn write); skipped", { segment: segment.path, torn });
      for (let i = 0; i < records.length; i += maxBatch) {
        await deliver(records.slice(i, i + maxBatch));
      }
      await s.remove(segment);
      delivered += records.length;
    }
    return delivered;
  }

  function replay(): Promise<number> {
    replaying ??= exclusive(replayOnce)
      .then((n) => {
        failures = 0;
        degraded = false;
        if (n > 0) logger.info("audit spool replayed", { records: n });
        if ((spool?.pending ?? 0) > 0) scheduleReplay();
        return n;
      })
      .catch((error: unknown) => {
        noteFailure(error, "spool kept for replay");
        scheduleReplay();
        return 0;
      })
      .finally(() => {
        replaying = undefined;
      });
    return replaying;
  }

  function backlog(): number {
    return queue.length + (spool?.pending ?? 0);
  }

  return {
    async record(record, durable) {
      if (!durable) {
        if (failures > 0 || closed || !readsWaitForStore) {
          // The audit service is failing (or the caller need not wait): answer now, deliver in batches.
          queue.push({ record, link: activeSpanContext() });
          if (queue.length >= maxBatch) void flush();
          else scheduleFlush(flushMs);
          return;
        }
        // Durable in the local spool (fsync'd with concurrent appends): answered, shipped soon.
        const readSpool = readsDurableBySpool && options.spoolDir ? (spool ?? (await spoolReady)) : undefined;
        if (readSpool) {
          try {
            const seq = await readSpool.append([record]);
            unshipped.push({ record, seq });
            scheduleShip();
            return;
          } catch (error) {
            logger.warn("audit spool append failed; the read waits for the audit service", { error });
          }
        }
        // Group commit: delivered now with whatever else is queued; answered once its batch settled.
        return new Promise<void>((settled) => {
          queue.push({ record, link: activeSpanContext(), settled });
          if (queue.length >= maxBatch) void flush();
          else flushSoon();
        });
      }
      const s = await spoolReady;
      if (!(degraded && s)) {
        try {
          await deliver([record]);
          noteSuccess();
          return;
        } catch (error) {
          noteFailure(error, s ? "record spooled" : "record kept in memory (no spool configured)");
        }
      }
      if (!s) {
        queue.push({ record, link: activeSpanContext() });
        scheduleFlush(flushMs);
        // A configured spool that could not be opened: the record is not durable anywhere.
        if (options.spoolDir) throw new AuditNotDurableError(new Error(`audit spool ${options.spoolDir} is unavailable`));
        // Memory only (no spool configured): a gateway restart during the outage would lose it.
        return;
      }
      try {
        await s.append([record]);
        scheduleReplay();
      } catch (error) {
        queue.push({ record, link: activeSpanContext() });
        scheduleFlush(flushMs);
        throw new AuditNotDurableError(error);
      }
    },
    flush,
    replay,
    backlog,
    async close() {
      closed = true;
      if (flushTimer) clearTimeout(flushTimer);
      if (flushImmediate) clearImmediate(flushImmediate);
      flushImmediate = undefined;
      if (replayTimer) clearTimeout(replayTimer);
      if (shipTimer) clearTimeout(shipTimer);
      flushTimer = replayTimer = shipTimer = undefined;
      await flush();
      const s = await spoolReady;
      if (s && s.pending > 0) await replay();
      while (replaying) await replaying;
      // What is still queued in memory goes to disk, so the next start replays it.
      if (s && queue.length > 0) {
        const rest = queue.map((q) => q.record);
        queue = [];
        await s.append(rest).catch((error: unknown) => logger.error("audit records lost at shutdown", { records: rest.length, error }));
      } else if (queue.length > 0) {
        logger.error("audit records lost at shutdown (no spool configured)", { records: queue.length });
      }
      await s?.close();
    },
  };
}
