export { createRunnerBroker } from "./broker.js";
export type { RunnerBrokerDeps } from "./broker.js";
export { createMemoryRunnerRegistry, createRedisRunnerRegistry } from "./runner-registry.js";
export type { RunnerRegistry, RunnerRegistration, RunnerState } from "./runner-registry.js";
export { routes } from "./routes.js";
export { main } from "./main.js";
