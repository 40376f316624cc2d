export { backingServices, createTestDatabase, redisKeyPrefix } from "./backing-services.js";
export type { BackingServices, TestDatabase } from "./backing-services.js";
export { connectMcp, callTool } from "./mcp.js";
export type { ToolOutcome } from "./mcp.js";
export { createProjectDir, startDevServer, tempDir, repoRoot, cliPath } from "./processes.js";
export type { DevServer } from "./processes.js";
export { startTcpProxy } from "./tcp-proxy.js";
export type { TcpProxy } from "./tcp-proxy.js";
export { processGroupAlive } from "./process-group.js";
