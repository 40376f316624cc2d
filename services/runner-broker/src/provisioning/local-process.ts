/**
 * Local-process provisioner (`webcodex up`, dev and tests): one `webcodex runner` child process
 * per Project workspace, on a directory the caller maps the workspace to. Only create_project
 * (a `source`) makes a missing directory; a call for a Project whose directory does not exist
 * starts nothing. A git source is cloned by the Runner at its first start. Unless
 * `ownsWorkspaces`, the directory belongs to the user: removing the Runner stops the process
 * and never deletes it.
 */
import { runnerCredential } from "../runner-auth.js";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import { seedFailureFromStderr } from "@webcodex/runner/seed-failure";
import { runnerNames } from "./provisioner.js";
import type { EnsureResult, ProjectWorkspace, Provisioner, WorkspaceSource } from "./provisioner.js";

export interface LocalProcessProvisionerOptions {
  /** Path of tools/cli/bin/webcodex.js. */
  cliPath: string;
  /** The broker URL the Runner registers with. */
  brokerUrl: string;
  /** The directory a workspace's Runner serves. */
  directoryFor: (workspace: ProjectWorkspace) => string;
  runnerToken?: string;
  logLevel?: string;
  /** Extra environment for the Runner (PATH and HOME are inherited unless given). */
  env?: Record<string, string>;
  /** Grace period between SIGTERM and SIGKILL on removal. */
  stopGraceMs?: number;
  /** The directories are this provisioner's (under a data dir): removal deletes one unless asked to keep it. */
  ownsWorkspaces?: boolean;
  /**
   * Makes a missing workspace directory for create_project (default: an empty directory of the
   * broker's user). `webcodex up` makes it owned by the project's own uid (from-config.ts).
   */
  createDirectory?: (dir: string) => void;
  /** The workspaces it holds (for `resume`): every one whose directory exists. */
  listWorkspaces?: () => ProjectWorkspace[];
  logger: Logger;
}

export interface LocalRunnerProcess {
  name: string;
  pid: number | undefined;
  running: boolean;
  /** Last lines the Runner wrote to stderr (diagnostics). */
  stderrTail: string[];
}

export interface LocalProcessProvisioner extends Provisioner {
  describe(workspace: ProjectWorkspace): LocalRunnerProcess | undefined;
}

interface Child {
  name: string;
  proc: ChildProcess;
  exited: Promise<void>;
  stderr: string[];
}

const running = (c: Child) => c.proc.exitCode === null && c.proc.signalCode === null;

export function createLocalProcessProvisioner(o: LocalProcessProvisionerOptions): LocalProcessProvisioner {
  const children = new Map<string, Child>();

  const stop = async (c: Child) => {
    if (!running(c)) return;
    c.proc.kill("SIGTERM");
    const timer = setTimeout(() => c.proc.kill("SIGKILL"), o.stopGraceMs ?? 5_000);
    await c.exited;
    clearTimeout(timer);
  };

  return {
    kind: "local-process",
    async ensureRunner(w, options: { source?: WorkspaceSource } = {}): Promise<EnsureResult> {
      const { canonicalId, name } = runnerNames(w);
      const existing = children.get(canonicalId);
      if (existing && running(existing)) return { action: "exists", name };
      const dir = o.directoryFor(w);
      if (!existsSync(dir)) {
        if (options.source === undefined) throw new Error("no workspace for this project");
        if (o.createDirectory) o.createDirectory(dir);
        else mkdirSync(dir, { recursive: true });
      }
      const git = options.source?.git;
      const env: Record<string, string> = {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: process.env["HOME"] ?? "/tmp",
        ...o.env,
        WEBCODEX_RUNNER_ROOT: dir,
        ...(git ? { WEBCODEX_RUNNER_CLONE_URL: git.url, ...(git.ref ? { WEBCODEX_RUNNER_CLONE_REF: git.ref } : {}) } : {}),
        WEBCODEX_RUNNER_BROKER_URL: o.brokerUrl,
        WEBCODEX_RUNNER_CLIENT_ID: w.clientId,
        WEBCODEX_RUNNER_PROJECT_ID: w.projectId,
        WEBCODEX_RUNNER_ID: name,
        WEBCODEX_HOST: "127.0.0.1",
        WEBCODEX_PORT: "0",
        WEBCODEX_LOG_LEVEL: o.logLevel ?? "warn",
        // The Runner's own credential, bound to this workspace; the key stays in the broker.
        // (The Runner takes it out of its visible environment at start.)
        ...(o.runnerToken ? { WEBCODEX_RUNNER_TOKEN: runnerCredential(o.runnerToken, w) } : {}),
      };
      const proc = spawn(process.execPath, [o.cliPath, "runner"], { env, stdio: ["ignore", "ignore", "pipe"] });
      const child: Child = { name, proc, stderr: [], exited: new Promise((r) => proc.once("exit", () => r())) };
      proc.stderr?.setEncoding("utf8");
      proc.stderr?.on("data", (chunk: string) => {
        child.stderr.push(...chunk.split("\n").filter(Boolean));
        if (child.stderr.length > 20) child.stderr.splice(0, child.stderr.length - 20);
      });
      proc.once("exit", (code, signal) => {
        if (children.get(canonicalId) === child) o.logger.info("local runner exited", { runner: name, code, signal, stderr_tail: child.stderr.slice(-5) });
      });
      children.set(canonicalId, child);
      o.logger.info("local runner started", { runner: name, pid: proc.pid });
      return { action: existing ? "recreated" : "created", name };
    },

    async provisioningState(w) {
      const c = children.get(runnerNames(w).canonicalId);
      if (!c) return { state: "unknown" };
      if (running(c)) return { state: "starting" };
      // Exited before it served: a clone refused or failed says why on its stderr; else (a bad setting) its exit is the answer.
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
    },

    async removeRunner(w, options = {}) {
      const { canonicalId } = runnerNames(w);
      const c = children.get(canonicalId);
      children.delete(canonicalId);
      const wasRunning = c !== undefined && running(c);
      if (c) await stop(c);
      if (!o.ownsWorkspaces) return wasRunning;
      const dir = o.directoryFor(w);
      const existed = existsSync(dir);
      if (!options.keepWorkspace) rmSync(dir, { recursive: true, force: true });
      return wasRunning || existed;
    },

    describe(w) {
      const c = children.get(runnerNames(w).canonicalId);
      return c ? { name: c.name, pid: c.proc.pid, running: running(c), stderrTail: [...c.stderr] } : undefined;
    },

    async resume() {
      let started = 0;
      for (const w of o.listWorkspaces?.() ?? []) {
        const r = await this.ensureRunner(w).catch(
          (error: unknown) => (o.logger.warn("workspace not resumed", { project: runnerNames(w).canonicalId, error }), undefined),
        );
        if (r && r.action !== "exists") started++;
      }
      if (started > 0) o.logger.info("resumed the Runners of existing workspaces", { started });
      return started;
    },

    async close() {
      const all = [...children.values()];
      children.clear();
      await Promise.all(all.map(stop));
    },
  };
}
