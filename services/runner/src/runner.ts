/**
 * createRunner: one workspace's Runner (workspace engine + handlers + RunnerService), the
 * same in a pod, a local process or the embedded dev server.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import type { Logger } from "@webcodex/platform";
import { createWorkspace } from "./workspace/index.js";
import { runnerHandlers } from "./handlers.js";
import { createExecutor } from "./exec/index.js";
import { createRunnerService } from "./runner-service.js";
import type { RunnerHandlers } from "./runner-service.js";

export const RUNNER_BUILD = "webcodex-runner/0.1.0";

export interface Runner {
  readonly runnerId: string;
  readonly handlers: RunnerHandlers;
  /** The RunnerService implementation (served by `routes`, or called in-process). */
  readonly service: ServiceImpl<typeof RunnerService>;
  rootIdentity(): Promise<string>;
  routes(router: ConnectRouter): void;
  close(): Promise<void>;
}

export function createRunner(options: { root: string; logger: Logger; runnerId?: string }): Runner {
  const workspace = createWorkspace({ root: options.root });
  const executor = createExecutor({ root: options.root });
  const handlers = runnerHandlers(workspace, executor);
  const runnerId = options.runnerId ?? `runner-${hostname()}-${randomBytes(4).toString("hex")}`;
  let identity: Promise<string> | undefined;
  const rootIdentity = () => (identity ??= workspace.rootIdentity());
  const service = createRunnerService({ runnerId, build: RUNNER_BUILD, rootIdentity, handlers, logger: options.logger });
  return {
    runnerId,
    handlers,
    service,
    rootIdentity,
    routes: (router) => router.service(RunnerService, service),
    close: () => executor.shutdown(),
  };
}
