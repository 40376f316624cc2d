/** Partition maintenance as configured (WEBCODEX_AUDIT_*): the audit service's and `webcodex dev`'s. */
import type { Database, Logger } from "@webcodex/platform";
import { AUDIT_SCHEMA } from "./audit.js";
import type { AuditRetentionConfig } from "./config.js";
import { startPartitionMaintenance } from "./partitions.js";
import type { Maintenance } from "./partitions.js";

/** Starts maintenance of the ActionAudit partitions; resolves once the first pass has run. */
export async function startAuditRetention(db: Database, retention: AuditRetentionConfig, logger: Logger): Promise<Maintenance> {
  const policy = { retentionDays: retention.retentionDays, aheadDays: retention.partitionsAheadDays };
  const maintenance = startPartitionMaintenance(db, AUDIT_SCHEMA, policy, logger, retention.maintenanceIntervalMs);
  await maintenance.runOnce();
  return maintenance;
}
