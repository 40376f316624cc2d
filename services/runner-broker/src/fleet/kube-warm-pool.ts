/**
 * The Kubernetes warm pool, run by the fleet reconciler: it keeps `size` warm Runners (pod +
 * PVC + warm Secret, warm-pods.ts) Ready, replaces ended or stale ones, and claims one for a
 * new Project (create_project) instead of a cold pod start. Warm pods have no tenant, so they
 * never count against a tenant's live-Runner quota. Any broker replica may claim (the pod
 * accepts one claim only); only the leader creates and deletes pool members.
 */
import { createClient } from "@connectrpc/connect";
import { RunnerWarmService } from "@webcodex/proto";
import { createServiceTransport } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { CoreV1Api } from "@kubernetes/client-node";
import { credentialFingerprint } from "../provisioning/kubernetes.js";
import type { OwnerReference, RunnerPodTemplate } from "../provisioning/kubernetes.js";
import { runnerNames } from "../provisioning/provisioner.js";
import type { ProjectWorkspace, WorkspaceSource } from "../provisioning/provisioner.js";
import { podFacts } from "./pod-state.js";
import type { PodFacts } from "./pod-state.js";
import { buildWarmObjects, claimPatches, warmPodName } from "./warm-pods.js";

export interface KubeWarmPoolOptions {
  /** Warm Runners to keep Ready; 0: no pool. */
  size: number;
  /** The warm token of a pod (warm-pods.ts warmToken with the broker's Runner key). */
  tokenFor: (podName: string) => string;
  /** Where a warm pod's claim RPC is served; default http://<pod IP>:<template port>. */
  address?: (pod: PodFacts) => string | undefined;
  /** How long a claim RPC may take before the pod is given up (and the cold path taken). Default 5 s. */
  claimTimeoutMs?: number;
}

export interface WarmPoolReport {
  warmReady: number;
  warmCreated: number;
  warmReplaced: number;
}

export interface KubeWarmPoolDeps {
  api: CoreV1Api;
  template: RunnerPodTemplate;
  namespace: string;
  templateHash: string;
  pods: Map<string, PodFacts>;
  call: <T>(p: Promise<T>) => Promise<T>;
  status: (e: unknown) => number | undefined;
  owners: () => Promise<OwnerReference[]>;
  credentialFor?: (w: ProjectWorkspace) => string;
  isLeader: () => boolean;
  logger: Logger;
}

export interface KubeWarmPool {
  /** One pass: ended or stale warm pods go (with their PVC and Secret), missing ones are made. */
  maintain(): Promise<WarmPoolReport>;
  /** Claims a Ready warm pod for a new Project; undefined when none is Ready or the claim failed (take the cold path). */
  claim(w: ProjectWorkspace, options?: { source?: WorkspaceSource; brokerUrl?: string }): Promise<{ name: string } | undefined>;
  /** Ready, unclaimed warm pods in the cache. */
  ready(): number;
  /** Deletes a claimed pod and its credential Secret (its Project is removed); true if anything existed. */
  removeClaimed(name: string): Promise<boolean>;
}

export async function createKubeWarmPool(o: KubeWarmPoolOptions, d: KubeWarmPoolDeps): Promise<KubeWarmPool> {
  const { PatchStrategy, setHeaderOptions } = await import("@kubernetes/client-node");
  const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
  const claiming = new Set<string>();
  const timeoutMs = o.claimTimeoutMs ?? 5_000;
  const address = o.address ?? ((p: PodFacts) => (p.podIP ? `http://${p.podIP.includes(":") ? `[${p.podIP}]` : p.podIP}:${d.template.port}` : undefined));
  const isWarm = (p: PodFacts) => p.warm && !p.terminating;
  const usable = (p: PodFacts) => isWarm(p) && p.phase === "Running" && p.ready && p.hash === d.templateHash && !claiming.has(p.name);

  const ignore404 = async (p: Promise<unknown>) => {
    try {
      await d.call(p);
    } catch (e) {
      if (d.status(e) !== 404) throw e;
    }
  };
  /** A warm Runner's pod, PVC and Secrets go (a claimed-then-failed one's credential Secret too). */
  const discard = async (name: string) => {
    await ignore404(d.api.deleteNamespacedPod({ name, namespace: d.namespace, gracePeriodSeconds: 0 }));
    const f = d.pods.get(name);
    if (f) f.terminating = true;
    await ignore404(d.api.deleteNamespacedPersistentVolumeClaim({ name: `${name}-workspace`, namespace: d.namespace }));
    await ignore404(d.api.deleteNamespacedSecret({ name: `${name}-warm`, namespace: d.namespace }));
    await ignore404(d.api.deleteNamespacedSecret({ name: `${name}-credential`, namespace: d.namespace }));
  };

  const create = async () => {
    const name = warmPodName(d.template);
    const { pod, pvc, secret } = buildWarmObjects(d.template, name, o.tokenFor(name), d.namespace, await d.owners());
    await d.call(d.api.createNamespacedSecret({ namespace: d.namespace, body: secret }));
    await d.call(d.api.createNamespacedPersistentVolumeClaim({ namespace: d.namespace, body: pvc }));
    const created = await d.call(d.api.createNamespacedPod({ namespace: d.namespace, body: pod }));
    d.pods.set(name, podFacts(created, d.template.projectLabelKey, d.template.tenantLabelKey));
  };

  return {
    async maintain() {
      const report: WarmPoolReport = { warmReady: 0, warmCreated: 0, warmReplaced: 0 };
      let live = 0;
      for (const p of [...d.pods.values()]) {
        if (!isWarm(p) || claiming.has(p.name)) continue;
        if (p.phase === "Failed" || p.phase === "Succeeded" || p.hash !== d.templateHash || p.waitingReason === "CrashLoopBackOff") {
          if (!d.isLeader()) return report;
          await discard(p.name);
          report.warmReplaced++;
          d.logger.info("warm runner pod replaced", { pod: p.name, phase: p.phase, template_changed: p.hash !== d.templateHash });
          continue;
        }
        if (live >= o.size) {
          // The pool shrank (a smaller size): the extra warm pods go.
          if (!d.isLeader()) return report;
          await discard(p.name);
          continue;
        }
        live++;
        if (usable(p)) report.warmReady++;
      }
      for (; live < o.size; live++) {
        if (!d.isLeader()) return report;
        await create();
        report.warmCreated++;
      }
      return report;
    },

    async claim(w, options = {}) {
      const git = options.source?.git;
      // A clone with the tenant's credential needs it in the pod's environment from the start: cold path.
      if (git && d.template.gitCredentialSecrets?.[w.clientId]) return undefined;
      const p = [...d.pods.values()].find(usable);
      if (!p) return undefined;
      const url = address(p);
      if (!url) return undefined;
      claiming.add(p.name);
      const started = performance.now();
      try {
        const owners = await d.owners();
        const credential = d.credentialFor?.(w);
        const n = runnerNames(w);
        if (credential !== undefined) {
          await d.call(
            d.api.createNamespacedSecret({
              namespace: d.namespace,
              body: {
                metadata: {
                  name: `${p.name}-credential`,
                  namespace: d.namespace,
                  labels: { ...d.template.labels, [d.template.tenantLabelKey]: n.tenantLabel, [d.template.projectLabelKey]: n.projectLabel },
                  ownerReferences: owners,
                },
                type: "Opaque",
                stringData: { credential },
              },
            }),
          );
        }
        const client = createClient(RunnerWarmService, createServiceTransport(url));
        await client.claim(
          {
            warmToken: o.tokenFor(p.name),
            clientId: w.clientId,
            projectId: w.projectId,
            credential: credential ?? "",
            brokerUrl: options.brokerUrl ?? "",
            cloneUrl: git?.url ?? "",
            cloneRef: git?.ref ?? "",
          },
          { timeoutMs },
        );
        const patch = claimPatches(d.template, w, credential);
        await d.call(d.api.patchNamespacedPersistentVolumeClaim({ name: `${p.name}-workspace`, namespace: d.namespace, body: patch.pvc }, merge));
        await d.call(d.api.patchNamespacedPod({ name: p.name, namespace: d.namespace, body: patch.pod }, merge));
        await ignore404(d.api.deleteNamespacedSecret({ name: `${p.name}-warm`, namespace: d.namespace }));
        Object.assign(p, {
          warm: false,
          project: n.projectLabel,
          tenant: n.tenantLabel,
          fingerprint: credential !== undefined ? credentialFingerprint(credential) : "",
        });
        d.logger.info("warm runner pod claimed", { pod: p.name, project: w.projectId, claim_ms: Math.round(performance.now() - started) });
        return { name: p.name };
      } catch (error) {
        d.logger.warn("warm runner claim failed; starting a cold Runner", { pod: p.name, project: w.projectId, error: String(error) });
        await discard(p.name).catch(() => undefined);
        return undefined;
      } finally {
        claiming.delete(p.name);
      }
    },

    ready: () => [...d.pods.values()].filter(usable).length,

    async removeClaimed(name) {
      let removed = false;
      const del = async (p: () => Promise<unknown>) => {
        try {
          await d.call(p());
          removed = true;
        } catch (e) {
          if (d.status(e) !== 404) throw e;
        }
      };
      await del(() => d.api.deleteNamespacedPod({ name, namespace: d.namespace }));
      await del(() => d.api.deleteNamespacedSecret({ name: `${name}-credential`, namespace: d.namespace }));
      const f = d.pods.get(name);
      if (f) f.terminating = true;
      return removed;
    },
  };
}
