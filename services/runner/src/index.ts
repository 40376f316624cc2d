export { createRunner, RUNNER_BUILD } from "./runner.js";
export type { Runner, RunnerOptions } from "./runner.js";
export { createRunnerService, createFenceGuard } from "./runner-service.js";
export type { RunnerHandlers, ToolHandler, RunnerServiceDeps, FenceGuard } from "./runner-service.js";
export { startRegistration } from "./registration.js";
export type { RegistrationLoop, RegistrationOptions } from "./registration.js";
export { main } from "./main.js";
export { createWorkspace } from "./workspace/index.js";
export type { Workspace } from "./workspace/index.js";
