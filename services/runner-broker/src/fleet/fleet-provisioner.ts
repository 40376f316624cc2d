/**
 * The Kubernetes provisioner under the fleet reconciler: created pods and Secrets are owned by
 * the anchor, a call records activity (the idle clock) and is refused over the tenant's quota,
 * and a Runner's provisioning state is the reconciler's per-condition view.
 */
import { canonicalProjectId } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import type { CallActivity } from "./activity.js";
import type { KubeConfig } from "@kubernetes/client-node";
import { runnerPodName } from "../provisioning/kubernetes.js";
import type { RunnerPodTemplate } from "../provisioning/kubernetes.js";
import type { Provisioner, ProvisioningState } from "../provisioning/provisioner.js";
import { createLeaderElector } from "./leader.js";
import { createFleetReconciler, listWorkspaceClaims } from "./reconciler.js";
import type { FleetQuota, FleetReconciler } from "./reconciler.js";
import type { KubeWarmPoolOptions } from "./kube-warm-pool.js";
import { tenantQuotaFailure } from "./tenant-quotas.js";
import type { TenantQuotas } from "./tenant-quotas.js";

export interface FleetSettings {
  kubeConfig: KubeConfig;
  template: RunnerPodTemplate;
  namespace: string;
  anchorName: string;
  leaseName: string;
  /** This replica's identity in the Lease (its pod name). */
  identity: string;
  idleTimeoutMs: number;
  maxUnavailable: number;
  resyncMs: number;
  quota: FleetQuota;
  /** Projects per tenant and creations per hour, checked at create_project against the workspace claims. */
  tenantQuotas?: TenantQuotas;
  busy?: (canonicalId: string) => Promise<boolean>;
  /** Call activity shared by the broker replicas (the idle clock counts every replica's calls). */
  activity?: CallActivity;
  credentialFor?: Parameters<typeof createFleetReconciler>[0]["credentialFor"];
  /** The warm pool (kube-warm-pool.ts): new Projects claim a Ready warm pod instead of a cold start. */
  warmPool?: KubeWarmPoolOptions;
  logger: Logger;
}

/** Wraps a Kubernetes provisioner made with `owners: fleet.owners`; starts leader election and the loop. */
export async function startFleet(s: FleetSettings): Promise<{ fleet: FleetReconciler; wrap: (base: Provisioner) => Provisioner; stop: () => Promise<void> }> {
  const elector = await createLeaderElector({ kubeConfig: s.kubeConfig, namespace: s.namespace, name: s.leaseName, identity: s.identity, logger: s.logger });
  const fleet = await createFleetReconciler({
    kubeConfig: s.kubeConfig,
    template: s.template,
    namespace: s.namespace,
    anchorName: s.anchorName,
    projects: () => listWorkspaceClaims(s.kubeConfig, s.template, s.namespace),
    ...(s.busy ? { busy: s.busy } : {}),
    ...(s.activity ? { activity: () => (s.activity as CallActivity).all() } : {}),
    ...(s.credentialFor ? { credentialFor: s.credentialFor } : {}),
    ...(s.warmPool ? { warmPool: s.warmPool } : {}),
    idleTimeoutMs: s.idleTimeoutMs,
    maxUnavailable: s.maxUnavailable,
    resyncMs: s.resyncMs,
    quota: s.quota,
    isLeader: elector.isLeader,
    logger: s.logger,
  });
  elector.start();
  await fleet.start();
  const refusals = new Map<string, ProvisioningState>();
  const wrap = (base: Provisioner): Provisioner => ({
    kind: base.kind,
    async ensureRunner(w, options) {
      s.activity?.note(canonicalProjectId(w.clientId, w.projectId));
      const refusal = fleet.admit(w);
      const key = `${w.clientId}\u0000${w.projectId}`;
      if (refusal) {
        refusals.set(key, { state: "failed", failure: refusal });
        return { action: "exists", name: runnerPodName(s.template, w) };
      }
      if (options?.source !== undefined && s.tenantQuotas) {
        // A new Project: the tenant's workspace claims are its projects.
        const claims = await listWorkspaceClaims(s.kubeConfig, s.template, s.namespace);
        const exists = claims.some((c) => c.clientId === w.clientId && c.projectId === w.projectId);
        const over = exists ? undefined : s.tenantQuotas.checkCreate(w, claims.filter((c) => c.clientId === w.clientId).length);
        if (over) {
          refusals.set(key, { state: "failed", failure: tenantQuotaFailure(over.over, w, over.retryAfterMs) });
          s.logger.info("project creation refused by quota", { project: w.projectId, ...over.over });
          return { action: "exists", name: runnerPodName(s.template, w) };
        }
        if (!exists) s.tenantQuotas.recordCreate(w);
      }
      refusals.delete(key);
      // A claimed warm pod serves the Project under its own name; a restart mounts its volume.
      const claimedPod = fleet.claimedPod(w);
      if (claimedPod) return { action: "exists", name: claimedPod };
      if (options?.source !== undefined) {
        const claimed = await fleet.claimWarm(w, { source: options.source });
        if (claimed) return { action: "created", name: claimed.name };
      }
      try {
        return await base.ensureRunner(fleet.workspaceOf(w), options);
      } catch (e) {
        // The API refused the pod (a ResourceQuota, Pod Security): say so, with its message.
        const code = (e as { code?: unknown }).code;
        if (code !== 403) throw e;
        const body = (e as { body?: unknown }).body;
        const message = String((typeof body === "string" ? (JSON.parse(body) as { message?: string }).message : (body as { message?: string })?.message) ?? e);
        refusals.set(key, {
          state: "unschedulable",
          condition: { type: "PodCreate", reason: "Forbidden", message: message.slice(0, 500), detailCode: "runner_create_forbidden" },
        });
        s.logger.warn("runner pod refused by the cluster", { project: w.projectId, message });
        return { action: "exists", name: runnerPodName(s.template, w) };
      }
    },
    async provisioningState(w) {
      const refused = refusals.get(`${w.clientId}\u0000${w.projectId}`);
      if (refused) return refused;
      const st = fleet.status(w);
      if (st.state === "ready") return { state: "ready" };
      if (st.state === "failed")
        return {
          state: "unschedulable",
          condition: {
            type: "RunnerPod",
            reason: st.detail_code ?? "Failed",
            message: st.message ?? "",
            ...(st.detail_code ? { detailCode: st.detail_code } : {}),
          },
        };
      if (st.state === "starting")
        return base.provisioningState
          ? base.provisioningState(w).then((b) => (b.state === "failed" ? b : { state: "starting" as const }))
          : { state: "starting" };
      return base.provisioningState ? base.provisioningState(w) : { state: "unknown" };
    },
    noteCall: (w) => {
      s.activity?.note(canonicalProjectId(w.clientId, w.projectId));
      fleet.noteCall(w);
    },
    async removeRunner(w, options) {
      const claimed = await fleet.removeClaimed(w);
      return (await base.removeRunner(fleet.workspaceOf(w), options)) || claimed;
    },
    async close() {
      await fleet.stop();
      await elector.stop();
      await base.close();
    },
  });
  return {
    fleet,
    wrap,
    stop: async () => {
      await fleet.stop();
      await elector.stop();
    },
  };
}
