export { backingServices, createTestDatabase, redisKeyPrefix } from "./backing-services.js";
export type { BackingServices, TestDatabase } from "./backing-services.js";
export { connectMcp, callTool } from "./mcp.js";
export type { ToolOutcome } from "./mcp.js";
