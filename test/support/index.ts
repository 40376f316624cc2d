export { backingServices, createTestDatabase, redisKeyPrefix } from "./backing-services.js";
export type { BackingServices, TestDatabase } from "./backing-services.js";
export { connectMcp, callTool, executeFollowUp, firstProjectRef, followUpTargetTool, postMcpRaw, readRevision } from "./mcp.js";
export type { FollowUpCall } from "./mcp.js";
export { openDevProject } from "./dev-project.js";
export type { DevProject, DevProjectOptions } from "./dev-project.js";
export type { ToolOutcome } from "./mcp.js";
export {
  createProjectDir,
  hostPids,
  killAll,
  pidGone,
  processGroupAlive,
  runCaptured,
  sleepTag,
  startDevServer,
  tempDir,
  repoRoot,
  cliPath,
  hookedCliPath,
} from "./processes.js";
export type { CapturedRun, DevServer } from "./processes.js";
export { seedPgliteCluster } from "./pglite-template.js";
export { startTcpProxy } from "./tcp-proxy.js";
export type { TcpProxy } from "./tcp-proxy.js";
export { startOtlpCollector, spanAttribute } from "./otlp-collector.js";
export type { OtlpCollector, OtlpSpan } from "./otlp-collector.js";
export { quietWindow, until } from "./until.js";
export { lapseLease } from "./agent-leases.js";
export { startTestStack } from "./stack.js";
export { killUp, startRootUp, startUp, stopUp, upServicePid } from "./up.js";
export type { RootUp, UpStack } from "./up.js";
export type { TestStackOptions } from "./stack.js";
export { createBrokerTestDatabase } from "./broker-database.js";
export type { BrokerTestDatabase } from "./broker-database.js";
export { startPrivatePostgres } from "./private-postgres.js";
export type { PrivatePostgres } from "./private-postgres.js";
export { startUserAuthServer } from "./oidc.js";
export type { UserAuthServer } from "./oidc.js";
export { createBareRepo, startGitDaemon, startGitHttpServer } from "./git-servers.js";
export type { GitServer } from "./git-servers.js";
export { startPrivateRedis } from "./private-redis.js";
export type { PrivateRedis } from "./private-redis.js";
export { listedServices, reflect } from "./grpc-reflection.js";
export { freePort } from "./ports.js";
