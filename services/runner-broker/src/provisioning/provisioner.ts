/**
 * Runner provisioning: start one Runner per Project workspace where none runs, and remove
 * it when the Project is removed. Implementations are idempotent per workspace, so
 * concurrent broker replicas (or a retry) never create a second Runner for one workspace.
 */
import { createHash } from "node:crypto";
import { canonicalProjectId } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

export interface ProjectWorkspace {
  clientId: string;
  projectId: string;
  /** Kubernetes: the workspace PVC when it is not `<pod>-workspace` (a claimed warm pool volume). */
  volume?: string;
}

export type EnsureAction = "created" | "exists" | "recreated";

export interface EnsureResult {
  action: EnsureAction;
  /** Provisioner-specific handle: pod name, or local runner id. */
  name: string;
}

/** Where a new workspace starts from; the clone credential is the provisioner's own, per tenant. */
export interface WorkspaceSource {
  git?: { url: string; ref?: string };
}

/** How a created workspace is coming along. */
export type ProvisioningState =
  | { state: "starting" | "ready" | "unknown" }
  /**
   * The Runner cannot start until something changes (no node fits, no volume, missing Secret,
   * image pull, a crash loop); `detailCode` names the condition (default runner_unschedulable).
   */
  | { state: "unschedulable"; condition: { type: string; reason: string; message: string; detailCode?: string } }
  | { state: "failed"; failure: ToolFailure };

export interface Provisioner {
  readonly kind: "local-process" | "kubernetes" | "in-process";
  /** Starts the workspace's Runner unless one exists (recreating a dead one); `source` seeds a new workspace. */
  ensureRunner(workspace: ProjectWorkspace, options?: { source?: WorkspaceSource }): Promise<EnsureResult>;
  /** The provisioning state of a workspace created here (absent: not tracked). */
  provisioningState?(workspace: ProjectWorkspace): Promise<ProvisioningState>;
  /** Records a call for the workspace (an idle stop counts from the last one). */
  noteCall?(workspace: ProjectWorkspace): void;
  /** Stops the Runner and, unless keepWorkspace, deletes its workspace storage. True if anything existed. */
  removeRunner(workspace: ProjectWorkspace, options?: { keepWorkspace?: boolean }): Promise<boolean>;
  /**
   * Starts the Runner of every workspace this provisioner holds (after a restart of the
   * broker and its Runners), without waiting for a first call; resolves with how many.
   */
  resume?(): Promise<number>;
  /** Releases the provisioner's own resources (a local provisioner stops its Runners). */
  close(): Promise<void>;
}

export interface RunnerNames {
  canonicalId: string;
  /** DNS-1123 name (≤ 63 chars) for the pod / local runner id. */
  name: string;
  /** Label-safe (≤ 63, [a-z0-9-]) stable short hashes. */
  tenantLabel: string;
  projectLabel: string;
}

const hex = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Stable, label-safe names for a workspace. Raw client and project ids may hold characters
 * Kubernetes refuses (and should not leak into object names), so names and labels are short
 * hashes: tenant from the client id, project and name from the canonical project id.
 */
export function runnerNames(w: ProjectWorkspace): RunnerNames {
  const canonicalId = canonicalProjectId(w.clientId, w.projectId);
  const h = hex(canonicalId);
  return { canonicalId, name: `wcx-runner-${h.slice(0, 20)}`, tenantLabel: `t-${hex(w.clientId).slice(0, 16)}`, projectLabel: `p-${h.slice(0, 16)}` };
}
