/** The Runner provisioner a broker deployment asks for (WEBCODEX_PROVISIONER). */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "@webcodex/platform";
import type { RunnerBrokerConfig } from "../config.js";
import { createKubernetesProvisioner, loadRunnerPodTemplate } from "./kubernetes.js";
import { createLocalProcessProvisioner } from "./local-process.js";
import { runnerNames } from "./provisioner.js";
import type { Provisioner, ProjectWorkspace } from "./provisioner.js";
import { runnerCredential } from "../runner-auth.js";

/** tools/cli/bin/webcodex.js relative to this file (services/runner-broker/dist/provisioning/from-config.js). */
export const defaultRunnerCliPath = (): string => resolve(dirname(fileURLToPath(import.meta.url)), "../../../../tools/cli/bin/webcodex.js");

/**
 * None, Kubernetes (one Runner pod per workspace), or local processes with workspaces under
 * `<runnerWorkspacesDir>/<tenant label>/<project id>`. `brokerUrl` is read when a Runner
 * starts: a local Runner registers with this server, whose URL is known only after listen.
 */
export async function createConfiguredProvisioner(config: RunnerBrokerConfig, brokerUrl: () => string, logger: Logger): Promise<Provisioner | undefined> {
  switch (config.provisioner) {
    case "kubernetes":
      return createKubernetesProvisioner({
        template: await loadRunnerPodTemplate(config.runnerPodTemplate ?? ""),
        ...(config.runnerNamespace ? { namespace: config.runnerNamespace } : {}),
        ...(config.runnerToken ? { credentialFor: (w: ProjectWorkspace) => runnerCredential(config.runnerToken ?? "", w) } : {}),
        logger,
      });
    case "local-process": {
      const base = config.runnerWorkspacesDir ?? "";
      return createLocalProcessProvisioner({
        cliPath: config.runnerCliPath ?? defaultRunnerCliPath(),
        get brokerUrl() {
          return brokerUrl();
        },
        directoryFor: (w) => {
          const dir = join(base, runnerNames(w).tenantLabel, w.projectId);
          mkdirSync(dir, { recursive: true });
          return dir;
        },
        ...(config.runnerToken ? { runnerToken: config.runnerToken } : {}),
        logLevel: config.logLevel,
        logger,
      });
    }
    default:
      return undefined;
  }
}
