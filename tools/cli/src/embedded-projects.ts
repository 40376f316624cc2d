/**
 * Created Projects in embedded mode: each gets its own in-process Runner on a workspace under
 * `<data dir>/workspaces/`, seeded empty or by a clone the Runner makes (with the tenant's
 * credential from the operator's git credentials file). A workspace that exists on disk comes
 * back after a restart the first time its Project is called.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import type { RunnerBrokerService } from "@webcodex/proto";
import { createInProcessClient } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import { runnerNames } from "@webcodex/runner-broker";
import type { EnsureResult, ProjectWorkspace, Provisioner, ProvisioningState, WorkspaceSource } from "@webcodex/runner-broker";
import { cloneWorkspace, createOwnedWorkspaceDir, createRunner, projectOwner, RUNNER_BUILD, startRegistration } from "@webcodex/runner";
import type { GitCredential, RegistrationLoop, Runner, RunnerOptions } from "@webcodex/runner";

/**
 * Parses a git credentials file: `{"tenants": {"<tenant>": {"username", "password", "url_prefix"?}}}`.
 * The file is the operator's; its values are never logged.
 */
export function parseGitCredentialsFile(text: string): Record<string, GitCredential> {
  const parsed = JSON.parse(text) as { tenants?: Record<string, Record<string, unknown>> };
  if (parsed.tenants === null || typeof parsed.tenants !== "object") throw new Error("git credentials file needs a tenants object");
  const out: Record<string, GitCredential> = {};
  for (const [tenant, c] of Object.entries(parsed.tenants)) {
    const username = c["username"],
      password = c["password"],
      prefix = c["url_prefix"];
    if (typeof username !== "string" || typeof password !== "string") throw new Error(`tenants.${tenant} needs username and password strings`);
    if (prefix !== undefined && typeof prefix !== "string") throw new Error(`tenants.${tenant}.url_prefix must be a string`);
    out[tenant] = { username, password, ...(prefix ? { urlPrefix: prefix } : {}) };
  }
  return out;
}

export const loadGitCredentials = (file: string | undefined): Record<string, GitCredential> =>
  file ? parseGitCredentialsFile(readFileSync(file, "utf8")) : {};

export interface InProcessProvisionerOptions {
  dataDir: string;
  broker: () => Client<typeof RunnerBrokerService>;
  /** The broker's map from endpoint URL to in-process Runner client. */
  runners: Map<string, Client<typeof RunnerService>>;
  runnerOptions: Pick<RunnerOptions, "spawnHost" | "sensitiveWriteGlobs" | "disabledCapabilities">;
  gitCredentials: Readonly<Record<string, GitCredential>>;
  logger: Logger;
}

interface Live {
  runner: Runner;
  registration: RegistrationLoop;
  endpoint: string;
}

interface Tracked {
  state: ProvisioningState;
  live?: Live | undefined;
  work?: Promise<void>;
}

export function createInProcessProvisioner(o: InProcessProvisionerOptions): Provisioner {
  const tracked = new Map<string, Tracked>();
  const dirOf = (w: ProjectWorkspace) => join(o.dataDir, "workspaces", runnerNames(w).name);

  async function startRunner(w: ProjectWorkspace, dir: string): Promise<Live> {
    const { name } = runnerNames(w);
    const runner = createRunner({ root: dir, logger: o.logger.child({ component: "runner", runner: name }), ...o.runnerOptions });
    const endpoint = `local:${name}`;
    o.runners.set(endpoint, createInProcessClient(RunnerService, runner.service, { traceAs: "runner" }));
    const registration = startRegistration({
      broker: o.broker(),
      runnerId: runner.runnerId,
      clientId: w.clientId,
      projectId: w.projectId,
      rootIdentity: await runner.rootIdentity(),
      build: RUNNER_BUILD,
      capabilities: runner.capabilities,
      endpointUrl: endpoint,
      containment: runner.containment,
      fence: runner.fence,
      recovered: runner.recovery,
      logger: o.logger.child({ component: "runner", runner: name }),
    });
    await registration.registered;
    return { runner, registration, endpoint };
  }

  async function stop(t: Tracked | undefined): Promise<void> {
    await t?.work?.catch(() => undefined);
    if (!t?.live) return;
    t.live.registration.stop();
    o.runners.delete(t.live.endpoint);
    await t.live.runner.close();
    t.live = undefined;
  }

  return {
    kind: "in-process",
    async ensureRunner(w, options: { source?: WorkspaceSource } = {}): Promise<EnsureResult> {
      const { canonicalId, name } = runnerNames(w);
      const current = tracked.get(canonicalId);
      if (current && current.state.state !== "failed") return { action: "exists", name };
      const dir = dirOf(w);
      const exists = existsSync(dir);
      // Only create_project seeds a workspace; a call to an unknown Project never makes one.
      if (!exists && options.source === undefined) throw new Error("no workspace for this project");
      const entry: Tracked = { state: { state: "starting" } };
      tracked.set(canonicalId, entry);
      entry.work = (async () => {
        if (!exists) {
          const git = options.source?.git;
          if (git) {
            const credential = o.gitCredentials[w.clientId];
            // The clone, and so the workspace, belongs to the project's own uid from the start.
            const owner = projectOwner(dir);
            const failure = await cloneWorkspace({
              url: git.url,
              ...(git.ref ? { ref: git.ref } : {}),
              dir,
              ...(credential ? { credential } : {}),
              ...(owner ? { owner } : {}),
            });
            if (failure) {
              entry.state = { state: "failed", failure };
              o.logger.info("workspace clone failed", { runner: name, detail_code: failure.detail_code });
              return;
            }
          } else {
            createOwnedWorkspaceDir(dir);
          }
        }
        entry.live = await startRunner(w, dir);
        entry.state = { state: "ready" };
      })().catch((error: unknown) => {
        o.logger.warn("in-process runner failed to start", { runner: name, error });
        entry.state = {
          state: "failed",
          failure: toolFailure(ReasonCode.runnerUnavailable, PipelineStage.execution, {
            detail_code: "runner_start_failed",
            message: "The project's Runner could not start.",
          }),
        };
      });
      return { action: current ? "recreated" : "created", name };
    },
    async provisioningState(w) {
      return tracked.get(runnerNames(w).canonicalId)?.state ?? { state: "unknown" };
    },
    async removeRunner(w, options = {}) {
      const { canonicalId } = runnerNames(w);
      const t = tracked.get(canonicalId);
      await stop(t);
      tracked.delete(canonicalId);
      const dir = dirOf(w);
      const existed = t !== undefined || existsSync(dir);
      if (!options.keepWorkspace) rmSync(dir, { recursive: true, force: true });
      return existed;
    },
    async close() {
      await Promise.all([...tracked.values()].map((t) => stop(t)));
      tracked.clear();
    },
  };
}
