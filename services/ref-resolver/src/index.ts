export { createRefResolver, migrateRefResolver, REF_RESOLVER_SCHEMA } from "./ref-resolver.js";
export { createProjectStore, canonicalProjectId } from "./projects/project-store.js";
export type { ProjectStore, ProjectRecord, Resolution } from "./projects/project-store.js";
export { routes } from "./routes.js";
export { main } from "./main.js";
