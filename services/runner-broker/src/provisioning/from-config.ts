/** The Runner provisioner a broker deployment asks for (WEBCODEX_PROVISIONER). */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { hostname } from "node:os";
import { fileURLToPath } from "node:url";
import type { Logger } from "@webcodex/platform";
import { createOwnedWorkspaceDir } from "@webcodex/runner/workspace-owner";
import type { RunnerBrokerConfig } from "../config.js";
import { createKubernetesProvisioner, loadRunnerPodTemplate } from "./kubernetes.js";
import { createLocalProcessProvisioner } from "./local-process.js";
import { runnerNames } from "./provisioner.js";
import type { Provisioner, ProjectWorkspace } from "./provisioner.js";
import { runnerCredential } from "../runner-auth.js";
import { startFleet } from "../fleet/fleet-provisioner.js";
import { warmToken } from "../fleet/warm-pods.js";
import { withLocalFleet } from "../fleet/local-fleet.js";
import { createTenantQuotas } from "../fleet/tenant-quotas.js";
import type { CallActivity } from "../fleet/activity.js";

/** tools/cli/bin/webcodex.js relative to this file (services/runner-broker/dist/provisioning/from-config.js). */
export const defaultRunnerCliPath = (): string => resolve(dirname(fileURLToPath(import.meta.url)), "../../../../tools/cli/bin/webcodex.js");

/** The file in each tenant directory of a local-process workspaces dir that names its client id. */
const CLIENT_ID_FILE = ".client-id";

/** Every workspace under a local-process workspaces dir: `<tenant label>/<project id>` with the tenant's client id file. */
export function listLocalWorkspaces(base: string): ProjectWorkspace[] {
  const out: ProjectWorkspace[] = [];
  for (const tenant of existsSync(base) ? readdirSync(base, { withFileTypes: true }) : []) {
    const file = join(base, tenant.name, CLIENT_ID_FILE);
    if (!tenant.isDirectory() || !existsSync(file)) continue;
    const clientId = readFileSync(file, "utf8");
    for (const project of readdirSync(join(base, tenant.name), { withFileTypes: true })) {
      if (project.isDirectory() && !project.name.startsWith(".") && runnerNames({ clientId, projectId: project.name }).tenantLabel === tenant.name)
        out.push({ clientId, projectId: project.name });
    }
  }
  return out;
}

/** The tenant directories of a local-process workspaces dir. */
const tenantDirs = (base: string): string[] =>
  existsSync(base)
    ? readdirSync(base, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => join(base, e.name))
    : [];

/** A workspace's directory under a local-process workspaces dir, with its tenant's client id file beside it. */
export function localWorkspaceDir(base: string, w: ProjectWorkspace): string {
  const tenantDir = join(base, runnerNames(w).tenantLabel);
  // The tenant's client id beside its workspaces: the label is a one-way hash.
  if (!existsSync(join(tenantDir, CLIENT_ID_FILE))) {
    mkdirSync(tenantDir, { recursive: true, mode: 0o700 });
    writeFileSync(join(tenantDir, CLIENT_ID_FILE), w.clientId, { mode: 0o600 });
  }
  return join(tenantDir, w.projectId);
}

/**
 * None, Kubernetes (one Runner pod per workspace), or local processes with workspaces under
 * `<runnerWorkspacesDir>/<tenant label>/<project id>`. `brokerUrl` is read when a Runner
 * starts: a local Runner registers with this server, whose URL is known only after listen.
 */
export async function createConfiguredProvisioner(
  config: RunnerBrokerConfig,
  brokerUrl: () => string,
  logger: Logger,
  busy?: (canonicalId: string) => Promise<boolean>,
  forget?: (w: ProjectWorkspace, runnerId: string) => Promise<void>,
  activity?: CallActivity,
): Promise<Provisioner | undefined> {
  switch (config.provisioner) {
    case "kubernetes": {
      const template = await loadRunnerPodTemplate(config.runnerPodTemplate ?? "");
      const credentialFor = config.runnerToken ? (w: ProjectWorkspace) => runnerCredential(config.runnerToken ?? "", w) : undefined;
      if (!config.fleetReconcile)
        return createKubernetesProvisioner({
          template,
          ...(config.runnerNamespace ? { namespace: config.runnerNamespace } : {}),
          ...(credentialFor ? { credentialFor } : {}),
          logger,
        });
      const { KubeConfig } = await import("@kubernetes/client-node");
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromDefault();
      const fleet = await startFleet({
        kubeConfig,
        template,
        namespace: config.runnerNamespace ?? template.namespace,
        anchorName: config.fleetAnchor,
        leaseName: config.fleetLease,
        identity: config.podName ?? hostname(),
        idleTimeoutMs: config.fleetIdleTimeoutMs,
        maxUnavailable: config.fleetMaxUnavailable,
        resyncMs: config.fleetResyncMs,
        quota: config.fleetQuotaRunnersPerTenant > 0 ? { runnersPerTenant: config.fleetQuotaRunnersPerTenant } : {},
        tenantQuotas: createTenantQuotas({ projects: config.fleetQuotaProjectsPerTenant, creationsPerHour: config.fleetQuotaCreationsPerHour }),
        ...(busy ? { busy } : {}),
        ...(activity ? { activity } : {}),
        ...(credentialFor ? { credentialFor } : {}),
        // Only the broker can claim a warm pod: its token derives from the Runner key.
        ...(config.runnerToken ? { warmPool: { size: config.fleetWarmPool, tokenFor: (pod: string) => warmToken(config.runnerToken ?? "", pod) } } : {}),
        logger: logger.child({ component: "fleet" }),
      });
      if (config.fleetWarmPool > 0 && !config.runnerToken)
        logger.warn("no warm pool: warm pods are claimed with a token derived from the Runner key, and none is set");
      const base = await createKubernetesProvisioner({
        template,
        kubeConfig,
        ...(config.runnerNamespace ? { namespace: config.runnerNamespace } : {}),
        ...(credentialFor ? { credentialFor } : {}),
        owners: () => fleet.fleet.owners(),
        logger,
      });
      return fleet.wrap(base);
    }
    case "local-process": {
      const base = config.runnerWorkspacesDir ?? "";
      const local = createLocalProcessProvisioner({
        cliPath: config.runnerCliPath ?? defaultRunnerCliPath(),
        get brokerUrl() {
          return brokerUrl();
        },
        directoryFor: (w) => localWorkspaceDir(base, w),
        // A created workspace belongs to a uid of its project's own from the start (as root),
        // distinct from every other workspace's under this directory, whichever tenant's.
        createDirectory: (dir) => void createOwnedWorkspaceDir(dir, tenantDirs(base)),
        ...(config.cloneAllowHosts ? { env: { WEBCODEX_CLONE_ALLOW_HOSTS: config.cloneAllowHosts } } : {}),
        ownsWorkspaces: true,
        listWorkspaces: () => listLocalWorkspaces(base),
        ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
        logLevel: config.logLevel,
        logger,
      });
      return withLocalFleet(config, local, {
        directoryFor: (w) => join(base, runnerNames(w).tenantLabel, w.projectId),
        prepareDirectory: (w) => localWorkspaceDir(base, w),
        createDirectory: (dir) => void createOwnedWorkspaceDir(dir, tenantDirs(base)),
        ...(config.cloneAllowHosts ? { env: { WEBCODEX_CLONE_ALLOW_HOSTS: config.cloneAllowHosts } } : {}),
        listWorkspaces: () => listLocalWorkspaces(base),
        brokerUrl,
        cliPath: config.runnerCliPath ?? defaultRunnerCliPath(),
        ...(busy ? { busy } : {}),
        ...(forget ? { forget } : {}),
        logger: logger.child({ component: "fleet" }),
      });
    }
    default:
      return undefined;
  }
}
