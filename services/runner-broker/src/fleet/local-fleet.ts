/**
 * The local-process fleet (`webcodex up`): the fleet's policies over the local-process
 * provisioner, one Runner process per Project.
 * - Idle stop: a Runner with no call for `idleTimeoutMs` (and no call in flight, no open Job)
 *   is stopped; its workspace stays. Before the process goes, the broker forgets it (its
 *   registry record, and its Project lease only while this Runner holds it: a stale view never
 *   releases another Runner's lease), so the next call starts a new one at once and waits.
 * - Warm starts: a new Project's Runner is a loaded process from the warm pool, claimed,
 *   instead of a cold start (`warm` in the provisioning log and `lastStart`).
 * - Quotas per tenant: live Runners, projects, creations per hour; a refusal is the
 *   provisioning state (`quota_exceeded`), nothing is created or started.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { canonicalProjectId, PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import { seedFailureFromStderr } from "@webcodex/runner/seed-failure";
import { runnerCredential } from "../runner-auth.js";
import type { LocalProcessProvisioner } from "../provisioning/local-process.js";
import { runnerNames } from "../provisioning/provisioner.js";
import type { EnsureResult, ProjectWorkspace, Provisioner, ProvisioningState, WorkspaceSource } from "../provisioning/provisioner.js";
import type { RunnerBrokerConfig } from "../config.js";
import { createWarmPool } from "./local-warm-pool.js";
import type { WarmPool } from "./local-warm-pool.js";
import { createTenantQuotas, tenantQuotaFailure } from "./tenant-quotas.js";
import type { TenantQuotas } from "./tenant-quotas.js";

export interface LocalFleetOptions {
  base: LocalProcessProvisioner;
  /** The same mapping the base provisioner serves workspaces from (the path only). */
  directoryFor: (w: ProjectWorkspace) => string;
  /** The path, made ready for a new workspace as the base provisioner makes it (default: directoryFor). */
  prepareDirectory?: (w: ProjectWorkspace) => string;
  /** Creates a new workspace directory as the base provisioner does (its project's own uid as root); default: mkdir. */
  createDirectory?: (dir: string) => void;
  /** Every workspace this provisioner holds (directories under the data dir). */
  listWorkspaces: () => ProjectWorkspace[];
  /** What a claimed warm Runner is told (the environment `base` would start it with). */
  runnerEnv: (w: ProjectWorkspace, dir: string, source: WorkspaceSource | undefined) => Record<string, string>;
  warmPool?: WarmPool;
  /** No call for this long stops a Runner; 0: never. */
  idleTimeoutMs: number;
  /** How often idle Runners are looked for. Default min(idle timeout / 4, 30 s), at least 250 ms. */
  sweepMs?: number;
  quotas: TenantQuotas;
  /** A call in flight or an open Job: never stopped. */
  busy?: (canonicalId: string) => Promise<boolean>;
  /** After a Runner is stopped for idleness: forget it (registry record; its lease if it still holds it). */
  forget?: (w: ProjectWorkspace, runnerId: string) => Promise<void>;
  now?: () => number;
  logger: Logger;
}

export interface LocalFleet extends Provisioner {
  /** How the last Runner of this Project was started (a warm claim or a cold process start). */
  lastStart(w: ProjectWorkspace): { warm: boolean; atMs: number } | undefined;
  /** One idle sweep now; the Projects stopped. */
  sweep(): Promise<string[]>;
  /** Live Runners of the tenant (both kinds). */
  liveRunners(clientId: string): number;
}

interface Claimed {
  name: string;
  proc: ChildProcess;
  exited: Promise<void>;
  stderr: string[];
}

const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;

/** The environment the local-process provisioner gives a Runner (a claimed warm Runner gets the same). */
export function localRunnerEnv(
  o: { brokerUrl: string; runnerToken?: string | undefined; logLevel?: string | undefined },
  w: ProjectWorkspace,
  dir: string,
  source: WorkspaceSource | undefined,
): Record<string, string> {
  const git = source?.git;
  return {
    WEBCODEX_RUNNER_ROOT: dir,
    ...(git ? { WEBCODEX_RUNNER_CLONE_URL: git.url, ...(git.ref ? { WEBCODEX_RUNNER_CLONE_REF: git.ref } : {}) } : {}),
    WEBCODEX_RUNNER_BROKER_URL: o.brokerUrl,
    WEBCODEX_RUNNER_CLIENT_ID: w.clientId,
    WEBCODEX_RUNNER_PROJECT_ID: w.projectId,
    WEBCODEX_RUNNER_ID: runnerNames(w).name,
    WEBCODEX_HOST: "127.0.0.1",
    WEBCODEX_PORT: "0",
    WEBCODEX_LOG_LEVEL: o.logLevel ?? "warn",
    ...(o.runnerToken ? { WEBCODEX_RUNNER_TOKEN: runnerCredential(o.runnerToken, w) } : {}),
  };
}

export function createLocalFleet(o: LocalFleetOptions): LocalFleet {
  const now = o.now ?? Date.now;
  const base = o.base;
  const claimed = new Map<string, Claimed>();
  /** canonical id → the workspace and its last call (ms), for every Project whose Runner this fleet started or resumed. */
  const tracked = new Map<string, { w: ProjectWorkspace; lastCall: number }>();
  const refusals = new Map<string, ToolFailure>();
  const starts = new Map<string, { warm: boolean; atMs: number }>();
  /** Projects being stopped: a start waits for the stop to finish. */
  const stopping = new Map<string, Promise<void>>();

  const isLive = (w: ProjectWorkspace) => {
    const c = claimed.get(runnerNames(w).canonicalId);
    if (c) return alive(c.proc);
    return base.describe(w)?.running === true;
  };
  const liveRunners = (clientId: string) => {
    let n = 0;
    for (const { w } of tracked.values()) if (w.clientId === clientId && isLive(w)) n++;
    return n;
  };

  const stopClaimed = async (c: Claimed) => {
    if (!alive(c.proc)) return;
    c.proc.kill("SIGTERM");
    const timer = setTimeout(() => c.proc.kill("SIGKILL"), 5_000);
    await c.exited;
    clearTimeout(timer);
  };

  const claimWarm = (w: ProjectWorkspace, source: WorkspaceSource | undefined): EnsureResult | undefined => {
    const warm = o.warmPool?.take();
    if (!warm) return undefined;
    const { canonicalId, name } = runnerNames(w);
    const dir = (o.prepareDirectory ?? o.directoryFor)(w);
    if (!existsSync(dir)) (o.createDirectory ?? ((d: string) => void mkdirSync(d, { recursive: true })))(dir);
    const c: Claimed = { name, proc: warm.proc, stderr: [], exited: new Promise((r) => (alive(warm.proc) ? warm.proc.once("exit", () => r()) : r())) };
    warm.proc.stderr?.on("data", (chunk: string | Buffer) => {
      c.stderr.push(...String(chunk).split("\n").filter(Boolean));
      if (c.stderr.length > 20) c.stderr.splice(0, c.stderr.length - 20);
    });
    warm.proc.once("exit", (code, signal) => {
      if (claimed.get(canonicalId) === c) o.logger.info("local runner exited", { runner: name, code, signal, stderr_tail: c.stderr.slice(-5) });
    });
    warm.claim(o.runnerEnv(w, dir, source));
    claimed.set(canonicalId, c);
    o.logger.info("local runner started from the warm pool", { runner: name, pid: warm.proc.pid });
    return { action: "created", name };
  };

  const stopOne = async (w: ProjectWorkspace): Promise<void> => {
    const { canonicalId, name } = runnerNames(w);
    // Forget first (calls in between start a new Runner once this one is gone), and again after
    // the exit (a heartbeat in between may have renewed the record).
    await o.forget?.(w, name).catch((error: unknown) => o.logger.warn("stopped runner not forgotten", { project: canonicalId, error }));
    const c = claimed.get(canonicalId);
    claimed.delete(canonicalId);
    if (c) await stopClaimed(c);
    else await base.removeRunner(w, { keepWorkspace: true });
    await o.forget?.(w, name).catch(() => undefined);
  };

  const sweep = async (): Promise<string[]> => {
    const out: string[] = [];
    if (o.idleTimeoutMs <= 0) return out;
    for (const [id, t] of [...tracked]) {
      if (stopping.has(id) || !isLive(t.w) || now() - t.lastCall < o.idleTimeoutMs) continue;
      const seen = t.lastCall;
      if (o.busy && (await o.busy(id).catch(() => true))) continue;
      // A call that arrived while busy() was asked keeps the Runner.
      if (tracked.get(id)?.lastCall !== seen) continue;
      const done = stopOne(t.w).finally(() => stopping.delete(id));
      stopping.set(id, done);
      await done;
      o.logger.info("idle runner stopped", { project: id, idle_ms: now() - seen });
      out.push(id);
    }
    return out;
  };

  const sweepMs = Math.max(250, o.sweepMs ?? Math.min(o.idleTimeoutMs / 4, 30_000));
  const timer =
    o.idleTimeoutMs > 0 ? setInterval(() => void sweep().catch((error: unknown) => o.logger.warn("idle sweep failed", { error })), sweepMs) : undefined;
  timer?.unref();

  const note = (w: ProjectWorkspace) => {
    const id = runnerNames(w).canonicalId;
    tracked.set(id, { w, lastCall: now() });
  };

  return {
    kind: "local-process",
    async ensureRunner(w, options: { source?: WorkspaceSource } = {}) {
      const { canonicalId, name } = runnerNames(w);
      await stopping.get(canonicalId);
      if (isLive(w)) {
        note(w);
        return { action: "exists", name };
      }
      const creating = options.source !== undefined && !existsSync(o.directoryFor(w));
      if (creating) {
        const projects = o.listWorkspaces().filter((x) => x.clientId === w.clientId).length;
        const refused = o.quotas.checkCreate(w, projects);
        if (refused) {
          refusals.set(canonicalId, tenantQuotaFailure(refused.over, w, refused.retryAfterMs));
          o.logger.info("project creation refused by quota", { project: canonicalId, ...refused.over });
          return { action: "exists", name };
        }
      }
      const overLive = o.quotas.checkStart(liveRunners(w.clientId));
      if (overLive) {
        refusals.set(canonicalId, tenantQuotaFailure(overLive, w));
        o.logger.info("runner start refused by quota", { project: canonicalId, ...overLive });
        return { action: "exists", name };
      }
      refusals.delete(canonicalId);
      const dead = claimed.get(canonicalId);
      if (dead && !alive(dead.proc)) claimed.delete(canonicalId);
      const startedAt = now();
      // A new Project's Runner comes from the warm pool when one is loaded; a stopped one starts cold.
      const warm = creating ? claimWarm(w, options.source) : undefined;
      const r = warm ?? (await base.ensureRunner(w, options));
      if (creating) o.quotas.recordCreate(w);
      starts.set(canonicalId, { warm: warm !== undefined, atMs: startedAt });
      note(w);
      return r;
    },
    async provisioningState(w): Promise<ProvisioningState> {
      const { canonicalId } = runnerNames(w);
      const refusal = refusals.get(canonicalId);
      if (refusal) return { state: "failed", failure: refusal };
      const c = claimed.get(canonicalId);
      if (c) {
        if (alive(c.proc)) return { state: "starting" };
        // A claimed Runner that exited before it served fails as a cold one does.
        return {
          state: "failed",
          failure:
            seedFailureFromStderr(c.stderr) ??
            toolFailure(ReasonCode.runnerUnavailable, PipelineStage.execution, {
              detail_code: "runner_start_failed",
              evidence: { exit_code: c.proc.exitCode ?? -1, ...(c.proc.signalCode ? { signal: c.proc.signalCode } : {}) },
              message: "The project's Runner exited while starting; nothing was run. The operator's log has its output.",
            }),
        };
      }
      return base.provisioningState ? base.provisioningState(w) : { state: "unknown" };
    },
    noteCall(w) {
      const id = canonicalProjectId(w.clientId, w.projectId);
      const t = tracked.get(id);
      if (t) t.lastCall = now();
    },
    async removeRunner(w, options = {}) {
      const { canonicalId } = runnerNames(w);
      await stopping.get(canonicalId);
      refusals.delete(canonicalId);
      tracked.delete(canonicalId);
      starts.delete(canonicalId);
      const c = claimed.get(canonicalId);
      claimed.delete(canonicalId);
      const wasRunning = c !== undefined && alive(c.proc);
      if (c) await stopClaimed(c);
      return (await base.removeRunner(w, options)) || wasRunning;
    },
    async resume() {
      const started = base.resume ? await base.resume() : 0;
      for (const w of o.listWorkspaces()) note(w);
      return started;
    },
    async close() {
      if (timer) clearInterval(timer);
      const all = [...claimed.values()];
      claimed.clear();
      await Promise.all([...all.map(stopClaimed), o.warmPool?.close(), base.close()]);
    },
    lastStart: (w) => starts.get(runnerNames(w).canonicalId),
    sweep,
    liveRunners,
  };
}

/** The local-process provisioner under the fleet's policies, as the broker's settings ask. */
export function withLocalFleet(
  config: Pick<
    RunnerBrokerConfig,
    | "fleetIdleTimeoutMs"
    | "fleetWarmPool"
    | "fleetQuotaRunnersPerTenant"
    | "fleetQuotaProjectsPerTenant"
    | "fleetQuotaCreationsPerHour"
    | "runnerToken"
    | "logLevel"
  >,
  base: LocalProcessProvisioner,
  s: {
    directoryFor: (w: ProjectWorkspace) => string;
    prepareDirectory: (w: ProjectWorkspace) => string;
    createDirectory?: (dir: string) => void;
    /** Extra environment every Runner gets (the base provisioner's `env`). */
    env?: Record<string, string>;
    listWorkspaces: () => ProjectWorkspace[];
    brokerUrl: () => string;
    /** tools/cli/bin/webcodex.js: warm Runners start from it. */
    cliPath: string;
    busy?: (canonicalId: string) => Promise<boolean>;
    forget?: (w: ProjectWorkspace, runnerId: string) => Promise<void>;
    logger: Logger;
  },
): LocalFleet {
  const warmPool =
    config.fleetWarmPool > 0
      ? createWarmPool({
          cliPath: s.cliPath,
          size: config.fleetWarmPool,
          env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: process.env["HOME"] ?? "/tmp", WEBCODEX_LOG_LEVEL: config.logLevel },
          logger: s.logger,
        })
      : undefined;
  return createLocalFleet({
    base,
    directoryFor: s.directoryFor,
    prepareDirectory: s.prepareDirectory,
    ...(s.createDirectory ? { createDirectory: s.createDirectory } : {}),
    listWorkspaces: s.listWorkspaces,
    runnerEnv: (w, dir, source) => ({
      ...s.env,
      ...localRunnerEnv({ brokerUrl: s.brokerUrl(), runnerToken: config.runnerToken, logLevel: config.logLevel }, w, dir, source),
    }),
    ...(warmPool ? { warmPool } : {}),
    idleTimeoutMs: config.fleetIdleTimeoutMs,
    quotas: createTenantQuotas({
      liveRunners: config.fleetQuotaRunnersPerTenant,
      projects: config.fleetQuotaProjectsPerTenant,
      creationsPerHour: config.fleetQuotaCreationsPerHour,
    }),
    ...(s.busy ? { busy: s.busy } : {}),
    ...(s.forget ? { forget: s.forget } : {}),
    logger: s.logger,
  });
}
