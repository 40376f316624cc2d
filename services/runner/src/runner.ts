/**
 * createRunner: one workspace's Runner (workspace engine + handlers + RunnerService), the
 * same in a pod, a local process or the embedded dev server.
 */
import { hostname } from "node:os";
import { rm } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import { runnerCapabilityWire } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { afterAnswer, servedWithFastPath } from "@webcodex/platform";
import type { Logger, UnaryFastPath } from "@webcodex/platform";
import { createEditJournal, createWorkspace, defaultJournalDir } from "./workspace/index.js";
import type { RecoveredTransaction } from "./workspace/index.js";
import { runnerHandlers } from "./handlers.js";
import { createExecutor, detectContainment } from "./exec/index.js";
import type { Containment, ContainmentConfig } from "./exec/index.js";
import { minimalProcessEnv, scrubbedBaseEnv } from "./exec/child-env.js";
import { privateHome, resolveJobUser, sandboxedJobUser, spawnAs } from "./exec/job-user.js";
import { detectSandbox, sandboxSpawner } from "./exec/sandbox.js";
import type { SandboxSetting, SandboxSupport } from "./exec/sandbox.js";
import { rgPath as bundledRgPath } from "@vscode/ripgrep";
import path from "node:path";
import { probeValidationCapabilities } from "./validation/probe.js";
import { validationProcessPaths } from "./validation/tools.js";
import { createSpawnHost } from "./exec/spawn-host.js";
import { createDirectSpawner } from "./exec/spawner.js";
import { advertisedCapabilities, createFenceGuard, createRunnerService } from "./runner-service.js";
import type { FenceGuard, RunnerHandlers } from "./runner-service.js";
import type { RunnerSettings } from "./config.js";
import { createAttemptFenceStore } from "./attempt-fences.js";

export const RUNNER_BUILD = "webcodex-runner/0.1.0";

export interface Runner {
  readonly runnerId: string;
  /** How this Runner contains its Jobs (reported to the broker at registration). */
  readonly containment: ContainmentFacts;
  /** The user Jobs run as, when not the Runner's own. */
  readonly jobUser?: { uid: number; gid: number };
  readonly handlers: RunnerHandlers;
  /**
   * What this Runner advertises (register with it), in catalog order: complete once its
   * toolchain probes answered, which run while it starts.
   */
  readonly capabilities: Promise<readonly RunnerCapabilityId[]>;
  /** The RunnerService's fence floor: give it to startRegistration, so fences the broker reports on heartbeats raise it. */
  readonly fence: FenceGuard;
  /** The RunnerService implementation (served with `serving`, or called in-process). */
  readonly service: ServiceImpl<typeof RunnerService>;
  rootIdentity(): Promise<string>;
  /** Start-up recovery of the write journal: the transactions an earlier process left unfinished, now rolled back or completed. */
  readonly recovery: Promise<RecoveredTransaction[]>;
  /**
   * How a server serves this Runner (spread into startServiceServer): its routes, with answer
   * hooks on, so a finished write transaction's journal record waits for its answer to leave.
   */
  readonly serving: { routes(router: ConnectRouter): void; answerHooks: true; unaryFastPath: UnaryFastPath };
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
  /**
   * State directory for the write-transaction journal and the per-Task Attempt fence marks,
   * outside the workspace (WEBCODEX_RUNNER_STATE_DIR; default: a sibling of the root named
   * `.<root>.webcodex-runner-state`).
   */
  stateDir?: string;
  /** How Jobs are contained: a cgroup per Job where available (WEBCODEX_RUNNER_CONTAINMENT, _JOB_PIDS_MAX, _JOB_MEMORY_MAX_MB). */
  containment?: Partial<ContainmentConfig>;
  /** Who Jobs, git and rg run as: "auto" (default), "runner" or "<uid>[:<gid>]" (WEBCODEX_RUNNER_JOB_USER; see exec/job-user.ts). */
  jobUser?: string;
  /** Run every program in a bubblewrap sandbox: auto (default), required or off (WEBCODEX_RUNNER_SANDBOX; see exec/sandbox.ts). */
  sandbox?: SandboxSetting;
  /** The bubblewrap binary (WEBCODEX_RUNNER_BWRAP; default /usr/bin/bwrap). */
  bwrap?: string;
  /** Finish interrupted transactions on start (default true; false only to show what a crash leaves without it). */
  recoverJournal?: boolean;
}

/** The RunnerOptions a Runner's settings (WEBCODEX_RUNNER_* variables) select: one mapping for `webcodex runner` and `webcodex dev`. */
export function runnerSettingsOptions(
  settings: RunnerSettings,
): Pick<RunnerOptions, "spawnHost" | "sensitiveWriteGlobs" | "disabledCapabilities" | "containment" | "jobUser" | "sandbox" | "bwrap"> {
  return {
    spawnHost: settings.spawnHost,
    jobUser: settings.jobUser,
    sandbox: settings.sandbox,
    ...(settings.bwrap === undefined ? {} : { bwrap: settings.bwrap }),
    containment: settings.containment,
    disabledCapabilities: settings.disabledCapabilities,
    ...(settings.sensitiveWriteGlobs === undefined ? {} : { sensitiveWriteGlobs: settings.sensitiveWriteGlobs }),
  };
}

/** What get_runtime_status shows of a Runner's Job containment. */
export interface ContainmentFacts {
  /** cgroup_v2, cgroup_v1 or process_tree. */
  mode: string;
  /** Jobs run under a uid of their own, not the Runner's. */
  jobsSeparateUid: boolean;
  /** Every program runs in the bubblewrap sandbox; else `sandboxProblem` says why not. */
  sandboxed: boolean;
  sandboxProblem?: string;
  pidsMax?: number;
  memoryMaxBytes?: number;
  fallbackReason?: string;
}

function containmentFacts(c: Containment, jobsSeparateUid: boolean, sandbox: SandboxSupport): ContainmentFacts {
  return {
    mode: c.mode,
    jobsSeparateUid,
    sandboxed: sandbox.available,
    ...(sandbox.problem === undefined ? {} : { sandboxProblem: sandbox.problem }),
    ...(c.pidsMax === undefined ? {} : { pidsMax: c.pidsMax }),
    ...(c.memoryMaxBytes === undefined ? {} : { memoryMaxBytes: c.memoryMaxBytes }),
    ...(c.fallbackReason === undefined ? {} : { fallbackReason: c.fallbackReason }),
  };
}

export function createRunner(options: RunnerOptions): Runner {
  const sandbox = runnerSandbox(options.sandbox ?? "auto", options.bwrap);
  if (!sandbox.available) options.logger.warn("programs run without a sandbox", { problem: sandbox.problem });
  const jobUser = sandbox.available
    ? sandboxedJobUser(options.jobUser ?? "auto", options.root)
    : resolveJobUser(options.jobUser ?? "auto", options.root, () =>
        options.logger.warn("jobs run as the Runner's own user: an unprivileged user cannot reach the workspace (a directory above it is closed to others)", {
          root: options.root,
        }),
      );
  const jobHome = jobUser?.home ?? (sandbox.available ? privateHome(undefined) : undefined);
  // Validation rows: only toolchains that answer on the PATH the Runner's children get. The
  // probes run while the Runner starts; a registration or call that needs them waits for them.
  const validation = probeValidationCapabilities(scrubbedBaseEnv().PATH as string, jobUser);
  if (jobUser !== undefined) {
    options.logger.info("jobs run as their own user", {
      uid: jobUser.uid,
      gid: jobUser.gid,
      ...(jobUser.handedOver > 0 ? { workspace_entries_handed_over: jobUser.handedOver } : {}),
    });
  }
  const hostSpawner = options.spawnHost === false ? createDirectSpawner() : createSpawnHost({ logger: options.logger.child({ component: "spawn-host" }) });
  const spawner = sandbox.available
    ? sandboxSpawner(
        hostSpawner,
        sandbox,
        {
          workspace: options.root,
          ...(jobUser === undefined ? {} : { user: { uid: jobUser.uid, gid: jobUser.gid } }),
          ...(jobHome === undefined ? {} : { home: jobHome }),
          readOnly: [path.dirname(bundledRgPath), ...validationProcessPaths()],
        },
        minimalProcessEnv,
      )
    : jobUser === undefined
      ? hostSpawner
      : spawnAs(hostSpawner, jobUser, minimalProcessEnv);
  const stateDir = options.stateDir ?? defaultJournalDir(options.root);
  // Served with `serving`, a finished transaction's record waits for its answer to leave (edit-journal.ts).
  const journal = createEditJournal({ dir: stateDir, afterAnswer, workspaceRoot: options.root });
  const recovery = options.recoverJournal === false ? Promise.resolve([]) : journal.recover();
  // A configured state directory that cannot be used refuses workspace calls; the default
  // (a sibling of the root, which may be read-only in a container) degrades to no journal.
  const journalReady = recovery.then(
    (done) => {
      for (const t of done) options.logger.warn("interrupted write transaction recovered", { ...t });
      return true;
    },
    (error: unknown) => {
      if (options.stateDir !== undefined) {
        options.logger.error("write journal recovery failed; workspace calls are refused", { error: String(error), state_dir: journal.dir });
        throw error;
      }
      options.logger.warn("no usable write journal directory; set WEBCODEX_RUNNER_STATE_DIR for crash-consistent edits", {
        error: String(error),
        state_dir: journal.dir,
      });
      return false;
    },
  );
  journalReady.catch(() => undefined);
  const workspace = createWorkspace({
    root: options.root,
    spawner,
    journal: { journal, recovery: journalReady },
    ...(options.sensitiveWriteGlobs === undefined ? {} : { sensitiveWriteGlobs: [...options.sensitiveWriteGlobs] }),
  });
  const containment = detectContainment(options.containment);
  options.logger.info("job containment", { ...containmentFacts(containment, jobUser !== undefined, sandbox) });
  const executor = createExecutor({ root: options.root, spawner, containment });
  let advertised: Promise<readonly RunnerCapabilityId[]> = Promise.resolve([]);
  const implemented = runnerHandlers(workspace, executor, validation, () => advertised, options.root);
  const withheld = new Set(options.disabledCapabilities ?? []);
  const offered = (ids: readonly RunnerCapabilityId[]) => ids.filter((id) => !withheld.has(id));
  const handlers: RunnerHandlers = {
    tools: implemented.tools,
    capabilities: offered(implemented.capabilities),
    ...(implemented.probed === undefined ? {} : { probed: implemented.probed.then(offered) }),
  };
  advertised = advertisedCapabilities(handlers);
  if (withheld.size > 0) options.logger.info("capabilities withheld by configuration", { capabilities: [...withheld].map(runnerCapabilityWire) });
  const runnerId = options.runnerId ?? `runner-${hostname()}-${randomBytes(4).toString("hex")}`;
  let identity: Promise<string> | undefined;
  const rootIdentity = () => (identity ??= workspace.rootIdentity());
  const fence = createFenceGuard();
  const service = createRunnerService({
    runnerId,
    build: RUNNER_BUILD,
    rootIdentity,
    handlers,
    logger: options.logger,
    fence,
    // Beside the write journal, outside the workspace: per-Task Attempt fence marks survive a restart.
    attemptFences: createAttemptFenceStore(stateDir),
    ...(options.runnerToken ? { runnerToken: options.runnerToken } : {}),
  });
  return {
    runnerId,
    containment: containmentFacts(containment, jobUser !== undefined, sandbox),
    ...(jobUser === undefined ? {} : { jobUser: { uid: jobUser.uid, gid: jobUser.gid } }),
    handlers,
    capabilities: advertised,
    fence,
    service,
    rootIdentity,
    recovery: recovery.catch(() => []),
    serving: { ...servedWithFastPath(RunnerService, service), answerHooks: true },
    close: async () => {
      await journal.settled();
      await executor.shutdown();
      await spawner.close();
      if (jobHome !== undefined) await rm(jobHome, { recursive: true, force: true }).catch(() => undefined);
    },
  };
}

/** The sandbox this Runner's programs run in, or why there is none; `required` refuses to start without. */
function runnerSandbox(setting: SandboxSetting, bwrap: string | undefined): SandboxSupport {
  if (setting === "off") return { available: false, problem: "turned off (WEBCODEX_RUNNER_SANDBOX=off)" };
  const support = detectSandbox(bwrap);
  if (!support.available && setting === "required") throw new Error(`WEBCODEX_RUNNER_SANDBOX=required, but ${support.problem ?? "no sandbox can be made"}`);
  return support;
}
