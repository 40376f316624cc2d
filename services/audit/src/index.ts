export { createAudit, migrateAudit, appendActions, AUDIT_SCHEMA } from "./audit.js";
export { routes } from "./routes.js";
export { main } from "./main.js";
