/**
 * createRunner: one workspace's Runner (workspace engine + handlers + RunnerService), the
 * same in a pod, a local process or the embedded dev server.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import { runnerCapabilityWire } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import { createWorkspace } from "./workspace/index.js";
import { runnerHandlers } from "./handlers.js";
import { createExecutor } from "./exec/index.js";
import { scrubbedBaseEnv } from "./exec/child-env.js";
import { probeValidationCapabilities } from "./validation/probe.js";
import { createSpawnHost } from "./exec/spawn-host.js";
import { createDirectSpawner } from "./exec/spawner.js";
import { createFenceGuard, createRunnerService } from "./runner-service.js";
import type { FenceGuard, RunnerHandlers } from "./runner-service.js";
import type { RunnerSettings } from "./config.js";

export const RUNNER_BUILD = "webcodex-runner/0.1.0";

export interface Runner {
  readonly runnerId: string;
  readonly handlers: RunnerHandlers;
  /** The RunnerService's fence floor: give it to startRegistration, so fences the broker reports on heartbeats raise it. */
  readonly fence: FenceGuard;
  /** The RunnerService implementation (served by `routes`, or called in-process). */
  readonly service: ServiceImpl<typeof RunnerService>;
  rootIdentity(): Promise<string>;
  routes(router: ConnectRouter): void;
  close(): Promise<void>;
}

export interface RunnerOptions {
  root: string;
  logger: Logger;
  runnerId?: string;
  /** Runner credential required on Execute/Describe (WEBCODEX_RUNNER_TOKEN). */
  runnerToken?: string;
  /**
   * Start programs (jobs, rg, git) from a small helper process instead of forking the Runner,
   * whose fork cost grows with its memory (WEBCODEX_RUNNER_SPAWN_HOST; default true).
   */
  spawnHost?: boolean;
  /** Globs refused for writes, replacing the defaults; `.git/` is refused regardless (WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS). */
  sensitiveWriteGlobs?: readonly string[];
  /**
   * Capabilities this Runner withholds although its binary implements them: not advertised,
   * and calls needing them refused (WEBCODEX_RUNNER_DISABLED_CAPABILITIES).
   */
  disabledCapabilities?: readonly RunnerCapabilityId[];
}

/** The RunnerOptions a Runner's settings (WEBCODEX_RUNNER_* variables) select: one mapping for `webcodex runner` and `webcodex dev`. */
export function runnerSettingsOptions(settings: RunnerSettings): Pick<RunnerOptions, "spawnHost" | "sensitiveWriteGlobs" | "disabledCapabilities"> {
  return {
    spawnHost: settings.spawnHost,
    disabledCapabilities: settings.disabledCapabilities,
    ...(settings.sensitiveWriteGlobs === undefined ? {} : { sensitiveWriteGlobs: settings.sensitiveWriteGlobs }),
  };
}

export function createRunner(options: RunnerOptions): Runner {
  const spawner =
    options.spawnHost === false ? createDirectSpawner() : createSpawnHost({ logger: options.logger.child({ component: "spawn-host" }) });
  const workspace = createWorkspace({
    root: options.root, spawner, ...(options.sensitiveWriteGlobs === undefined ? {} : { sensitiveWriteGlobs: [...options.sensitiveWriteGlobs] }),
  });
  const executor = createExecutor({ root: options.root, spawner });
  // Validation rows: only toolchains that answer on the PATH the Runner's children get.
  const validation = probeValidationCapabilities(scrubbedBaseEnv().PATH as string);
  let advertised: readonly RunnerCapabilityId[] = [];
  const implemented = runnerHandlers(workspace, executor, validation, () => advertised);
  const withheld = new Set(options.disabledCapabilities ?? []);
  const handlers: RunnerHandlers = { tools: implemented.tools, capabilities: implemented.capabilities.filter((id) => !withheld.has(id)) };
  advertised = handlers.capabilities;
  if (withheld.size > 0) options.logger.info("capabilities withheld by configuration", { capabilities: [...withheld].map(runnerCapabilityWire) });
  const runnerId = options.runnerId ?? `runner-${hostname()}-${randomBytes(4).toString("hex")}`;
  let identity: Promise<string> | undefined;
  const rootIdentity = () => (identity ??= workspace.rootIdentity());
  const fence = createFenceGuard();
  const service = createRunnerService({
    runnerId, build: RUNNER_BUILD, rootIdentity, handlers, logger: options.logger, fence,
    ...(options.runnerToken ? { runnerToken: options.runnerToken } : {}),
  });
  return {
    runnerId,
    handlers,
    fence,
    service,
    rootIdentity,
    routes: (router) => router.service(RunnerService, service),
    close: async () => {
      await executor.shutdown();
      await spawner.close();
    },
  };
}
