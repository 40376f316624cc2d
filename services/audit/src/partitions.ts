/**
 * Time partitions of audit.action_audit: one per UTC day, named action_audit_pYYYYMMDD.
 * They are created ahead of time by maintenance and on demand by the append path (so a
 * record spooled long ago or stamped by a skewed clock still lands), and retention drops
 * whole partitions that ended before the cutoff. Dropping partitions is the only way rows
 * ever leave the table.
 */
import type { Database, Logger, Queryable } from "@webcodex/platform";

const DAY_MS = 86_400_000;
const NAME = /^action_audit_p(\d{4})(\d{2})(\d{2})$/;

export interface PartitionPolicy {
  /** Days a record is kept; partitions that ended before now − retention are dropped. */
  retentionDays: number;
  /** Days of partitions created ahead of today. */
  aheadDays: number;
}

export const defaultPartitionPolicy: PartitionPolicy = { retentionDays: 90, aheadDays: 7 };

/** The UTC day (ms at 00:00) of a timestamp. */
export const dayOf = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

export function partitionName(day: number): string {
  const d = new Date(day);
  const p = (n: number) => String(n).padStart(2, "0");
  return `action_audit_p${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}`;
}

function dayOfName(name: string): number | undefined {
  const m = NAME.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : undefined;
}

/** Days (UTC midnight, ms) of the partitions that exist now. */
export async function listPartitionDays(db: Queryable, schema: string): Promise<number[]> {
  const r = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace
      WHERE n.nspname = $1 AND p.relname = 'action_audit'`,
    [schema],
  );
  return r.rows
    .map((row) => dayOfName(row.name))
    .filter((d): d is number => d !== undefined)
    .sort((a, b) => a - b);
}

/**
 * Creates the partitions of `days` that do not exist yet (idempotent; serialized across
 * replicas by an advisory lock). Each new partition also refuses TRUNCATE.
 */
export async function ensurePartitions(db: Database, schema: string, days: Iterable<number>): Promise<number[]> {
  const wanted = [...new Set([...days].map(dayOf))].sort((a, b) => a - b);
  if (wanted.length === 0) return [];
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`webcodex.audit.partitions.${schema}`]);
    const existing = new Set(await listPartitionDays(tx, schema));
    const created: number[] = [];
    for (const day of wanted) {
      if (existing.has(day)) continue;
      const name = partitionName(day);
      const from = new Date(day).toISOString(),
        to = new Date(day + DAY_MS).toISOString();
      await tx.query(`CREATE TABLE ${schema}.${name} PARTITION OF ${schema}.action_audit FOR VALUES FROM ('${from}') TO ('${to}')`);
      await tx.query(
        `CREATE TRIGGER action_audit_no_truncate BEFORE TRUNCATE ON ${schema}.${name} FOR EACH STATEMENT EXECUTE FUNCTION ${schema}.action_audit_append_only()`,
      );
      created.push(day);
    }
    return created;
  });
}

/** The first day still kept under `retentionDays` at `now`. */
export const retentionCutoffDay = (now: number, retentionDays: number): number => dayOf(now) - Math.max(1, Math.floor(retentionDays)) * DAY_MS;

/** Drops every partition whose whole day lies before the retention cutoff. */
export async function dropExpiredPartitions(db: Database, schema: string, policy: PartitionPolicy, now = Date.now()): Promise<number[]> {
  const cutoff = retentionCutoffDay(now, policy.retentionDays);
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`webcodex.audit.partitions.${schema}`]);
    const dropped: number[] = [];
    for (const day of await listPartitionDays(tx, schema)) {
      if (day >= cutoff) continue;
      await tx.query(`DROP TABLE ${schema}.${partitionName(day)}`);
      dropped.push(day);
    }
    return dropped;
  });
}

/** Creates today's and the next `aheadDays` partitions, then applies retention. */
export async function maintainPartitions(
  db: Database,
  schema: string,
  policy: PartitionPolicy,
  now = Date.now(),
): Promise<{ created: number[]; dropped: number[] }> {
  const today = dayOf(now);
  const created = await ensurePartitions(
    db,
    schema,
    Array.from({ length: Math.max(0, Math.floor(policy.aheadDays)) + 1 }, (_, i) => today + i * DAY_MS),
  );
  const dropped = await dropExpiredPartitions(db, schema, policy, now);
  return { created, dropped };
}

export interface Maintenance {
  /** Runs one maintenance pass now (also what the timer runs). */
  runOnce(): Promise<void>;
  stop(): void;
}

/**
 * Runs maintainPartitions now and every `intervalMs`. A failed pass is logged and retried on
 * the next tick; the append path creates any partition it needs on its own.
 */
export function startPartitionMaintenance(db: Database, schema: string, policy: PartitionPolicy, logger: Logger, intervalMs = 3_600_000): Maintenance {
  let running: Promise<void> | undefined;
  const runOnce = () => {
    running ??= maintainPartitions(db, schema, policy)
      .then(({ created, dropped }) => {
        if (created.length || dropped.length)
          logger.info("audit partitions maintained", { created: created.map(partitionName), dropped: dropped.map(partitionName) });
      })
      .catch((error: unknown) => logger.warn("audit partition maintenance failed; retrying later", { error }))
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  void runOnce();
  const timer = setInterval(() => void runOnce(), intervalMs);
  timer.unref();
  return { runOnce, stop: () => clearInterval(timer) };
}
