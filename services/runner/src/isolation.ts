/**
 * Fail closed: a server that serves several tenants (or several principals who may run
 * programs) on one machine refuses to start when the Job sandbox cannot be made, instead of
 * running one tenant's programs where they can reach another's.
 */
import { detectSandbox } from "./exec/sandbox.js";
import type { RunnerSettings } from "./config.js";

export interface Principals {
  /** Distinct tenants (client ids) configured. */
  tenants: number;
  /** Principals whose admission lets them write (run programs, edit files). */
  writers: number;
  /** Principals come from an identity provider (OAuth): how many is not known in advance. */
  open: boolean;
}

/** The refusal message when `principals` need isolation this machine cannot give; undefined when it may start. */
export function isolationRefusal(principals: Principals, settings: Pick<RunnerSettings, "sandbox" | "bwrap">): string | undefined {
  const shared = principals.tenants > 1 || principals.writers > 1 || principals.open;
  if (!shared) return undefined;
  const support =
    settings.sandbox === "off" ? { available: false, problem: "the Job sandbox is turned off (WEBCODEX_RUNNER_SANDBOX=off)" } : detectSandbox(settings.bwrap);
  if (support.available) return undefined;
  const who = principals.open
    ? "principals from an identity provider"
    : principals.tenants > 1
      ? `${principals.tenants} tenants`
      : `${principals.writers} principals who may run programs`;
  return [
    `refusing to start: configured for ${who}, but their programs cannot be isolated from each other on this machine: ${support.problem}.`,
    "Ways out: install bubblewrap (apt-get install bubblewrap) and either run as root or enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1);",
    "deploy on Kubernetes (one Runner pod per project);",
    "or serve a single principal (WEBCODEX_DEV_TOKEN, or a tokens file with one tenant and one writer).",
  ].join(" ");
}
