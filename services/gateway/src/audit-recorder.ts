/**
 * Delivers ActionAudit records to the audit service. Effectful calls wait until their record
 * is durable; read-only calls are batched. A failed delivery stays queued and is retried, so
 * a restart of the audit service loses nothing the gateway still holds.
 */
import type { Client } from "@connectrpc/connect";
import type { AuditService } from "@webcodex/proto";
import type { ActionRecord } from "@webcodex/proto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ActionRecordSchema } from "@webcodex/proto";
import type { Logger } from "@webcodex/platform";

export type ActionRecordInit = MessageInitShape<typeof ActionRecordSchema>;

export interface AuditRecorder {
  /** Resolves when the record is durable (durable=true) or queued (durable=false). */
  record(record: ActionRecordInit, durable: boolean): Promise<void>;
  flush(): Promise<void>;
  /** Records queued but not yet acknowledged by the audit service. */
  backlog(): number;
  close(): Promise<void>;
}

export function createAuditRecorder(audit: Client<typeof AuditService>, logger: Logger, options: { flushMs?: number; maxBatch?: number } = {}): AuditRecorder {
  const flushMs = options.flushMs ?? 25;
  const maxBatch = options.maxBatch ?? 500;
  let queue: ActionRecordInit[] = [];
  let timer: NodeJS.Timeout | undefined;
  let inflight: Promise<void> | undefined;
  let failures = 0;

  const schedule = (delay: number) => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, delay);
    timer.unref();
  };

  async function flush(): Promise<void> {
    if (inflight) await inflight;
    if (queue.length === 0) return;
    const batch = queue.slice(0, maxBatch);
    queue = queue.slice(batch.length);
    inflight = audit
      .recordActions({ records: batch as ActionRecord[] })
      .then(() => {
        failures = 0;
      })
      .catch((error: unknown) => {
        failures += 1;
        queue = [...batch, ...queue];
        if (failures === 1 || failures % 50 === 0) logger.warn("audit delivery failed; records kept for retry", { queued: queue.length, error });
        schedule(Math.min(100 * 2 ** Math.min(failures, 6), 5_000));
      })
      .finally(() => {
        inflight = undefined;
      });
    await inflight;
    if (queue.length > 0 && failures === 0) schedule(0);
  }

  return {
    async record(record, durable) {
      if (!durable) {
        queue.push(record);
        if (queue.length >= maxBatch) void flush();
        else schedule(flushMs);
        return;
      }
      try {
        await audit.recordActions({ records: [record as ActionRecord] });
      } catch (error) {
        // Spooled for retry; the Host still gets its answer rather than a false failure of the effect.
        queue.push(record);
        schedule(flushMs);
        logger.warn("audit record for an effectful call spooled for retry", { error });
      }
    },
    flush,
    backlog: () => queue.length,
    async close() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      await flush();
    },
  };
}
