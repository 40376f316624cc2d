// Public surface of @webcodex/audit.
// The service:
export { createAudit, migrateAudit, appendActions, actionSummary, recordFromRow, AUDIT_SCHEMA, MODEL_ERGONOMICS_VERSION } from "./audit.js";
export type { AuditDeps, AppendOptions, ActionSummary, ModelErgonomicsSummary } from "./audit.js";
export { auditMigrations } from "./migrations.js";
export { routes } from "./routes.js";
export { main } from "./main.js";
export { loadRetentionConfig } from "./config.js";
export type { AuditRetentionConfig } from "./config.js";
// Partitions and retention (embedded mode runs maintenance itself):
export {
  ensurePartitions,
  dropExpiredPartitions,
  maintainPartitions,
  startPartitionMaintenance,
  listPartitionDays,
  partitionName,
  dayOf,
  defaultPartitionPolicy,
} from "./partitions.js";
export type { PartitionPolicy, Maintenance } from "./partitions.js";
export { startAuditRetention } from "./retention.js";
// Friction analytics (`webcodex friction-report`):
export { analyzeFriction, FrictionPattern, defaultFrictionThresholds } from "./friction/analyze.js";
export type { FrictionRecord, FrictionCatalog, FrictionThresholds, FrictionFinding, FrictionSummaryRow, FrictionReport } from "./friction/analyze.js";
export { loadFrictionRecords, catalogFrictionFacts } from "./friction/store.js";
export type { FrictionQuery } from "./friction/store.js";
export { renderFrictionTable, renderFrictionJson } from "./friction/render.js";
export { runFrictionReport, frictionReportUsage } from "./friction/report.js";
export type { FrictionReportIo } from "./friction/report.js";
