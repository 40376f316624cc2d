export { startEmbedded, startEmbeddedStdio, defaultDataDir, projectIdFor } from "./embedded.js";
export type { Embedded, EmbeddedOptions, EmbeddedStdio, EmbeddedStdioOptions } from "./embedded.js";
export { findFreeBasePort, startDistributed, waitForReady, SERVICES } from "./distributed.js";
export type { DistributedStack, DistributedOptions, ServiceName } from "./distributed.js";
export { run } from "./main.js";
export { exitCodeFor, parsePort, UsageError } from "./args.js";
