/** The six-process distributed stack as the integration and e2e tests start it. */
import { findFreeBasePort, startDistributed } from "@webcodex/cli";
import type { DistributedStack } from "@webcodex/cli";
import { redisKeyPrefix } from "./backing-services.js";

export interface TestStackOptions {
  postgresUrl: string;
  redisUrl: string;
  projectDir: string;
  /** Gateway settings (dev token or tokens file, spool dir, ...). */
  gatewayEnv: Record<string, string>;
  /** More env for every service; a fresh Redis key prefix is always set. */
  extraEnv?: Record<string, string>;
  heartbeatIntervalMs?: number;
  /** The CLI script the service processes run (default: tools/cli/bin/webcodex.js; hookedCliPath installs test hooks). */
  cli?: string;
  /** Where create_project's workspaces live (the broker's local-process provisioner); none: no provisioner. */
  workspacesDir?: string;
}

/** Starts the stack on free ports, client id `local`, 500 ms heartbeats, its own Redis key prefix, output discarded. */
export async function startTestStack(o: TestStackOptions): Promise<DistributedStack> {
  return startDistributed({
    basePort: await findFreeBasePort(),
    postgresUrl: o.postgresUrl,
    redisUrl: o.redisUrl,
    projectDir: o.projectDir,
    clientId: "local",
    gatewayEnv: o.gatewayEnv,
    extraEnv: { WEBCODEX_REDIS_KEY_PREFIX: redisKeyPrefix(), ...o.extraEnv },
    heartbeatIntervalMs: o.heartbeatIntervalMs ?? 500,
    stdio: "ignore",
    ...(o.cli ? { cli: o.cli } : {}),
    ...(o.workspacesDir ? { workspacesDir: o.workspacesDir } : {}),
  });
}
