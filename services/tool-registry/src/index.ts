export { createToolRegistry, admissionContext, catalogVersion } from "./tool-registry.js";
export { routes } from "./routes.js";
export { main } from "./main.js";
