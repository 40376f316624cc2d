export { createToolRegistry, admissionContext, catalogVersion } from "./tool-registry.js";
export { routes, toolRegistryRoutes } from "./routes.js";
export { loadToolPolicy } from "./config.js";
export { main } from "./main.js";
