/**
 * The fleet reconciler: Runner pods as reconciled workloads owned by the release's anchor.
 *
 * Desired state comes from the broker (the live Projects, whether each is busy, and when each
 * last had a call); actual state is the release's labelled Runner pods, kept by list + watch
 * (a dropped watch re-lists) with a full resync every `resyncMs`. One pass:
 * - removes pods whose Project is gone (orphans) and their credential Secrets;
 * - replaces pods that ended (phase Failed or Succeeded);
 * - stops idle Runners (no call for `idleTimeoutMs` and not busy): the pod goes, the Project,
 *   its workspace volume and Secret stay, and the next call starts it again (`touch`);
 * - creates the pod of every Project that had a call within the idle window and has none,
 *   owned by the anchor ConfigMap (so deleting the anchor, e.g. `helm uninstall`, collects it),
 *   refusing over the tenant's live-Runner quota;
 * - replaces pods whose template hash or credential fingerprint is stale, only while not busy
 *   and at most `maxUnavailable` Runners unavailable at a time (a rolling rotation).
 * Only the leader (a coordination.k8s.io Lease) writes; a replica that stops leading stops
 * before its next write.
 */
import { canonicalProjectId } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { CoreV1Api, KubeConfig, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "@webcodex/platform";
import {
  buildRunnerObjects,
  CLIENT_ID_ANNOTATION,
  CREDENTIAL_FINGERPRINT_ANNOTATION,
  credentialFingerprint,
  PROJECT_ID_ANNOTATION,
  runnerPodName,
  templateHash,
} from "../provisioning/kubernetes.js";
import type { OwnerReference, RunnerPodTemplate } from "../provisioning/kubernetes.js";
import { runnerNames } from "../provisioning/provisioner.js";
import type { ProjectWorkspace, WorkspaceSource } from "../provisioning/provisioner.js";
import { createKubeWarmPool } from "./kube-warm-pool.js";
import type { KubeWarmPoolOptions } from "./kube-warm-pool.js";

export { listWorkspaceClaims } from "./workspace-claims.js";
import { podFacts, podFleetState, quotaExceededFailure } from "./pod-state.js";
import type { PodFacts, RunnerFleetState } from "./pod-state.js";

export { CREDENTIAL_FINGERPRINT_ANNOTATION };
export const DEFAULT_IDLE_TIMEOUT_MS = 30 * 60_000;

export interface FleetQuota {
  /** Live Runners (pods) per tenant; absent: unlimited. */
  runnersPerTenant?: number;
}

export interface FleetReconcilerOptions {
  kubeConfig: KubeConfig;
  template: RunnerPodTemplate;
  /** Defaults to the template's namespace. */
  namespace?: string;
  /** The anchor ConfigMap owning every Runner pod and credential Secret (the chart creates it). */
  anchorName: string;
  /** Desired state: every live Project. */
  projects: () => Promise<ProjectWorkspace[]>;
  /** A Project with a call in flight, a live Job or a held attempt lease is never stopped or replaced. */
  busy?: (canonicalId: string) => boolean | Promise<boolean>;
  /** Each Runner's credential (put in its Secret; its fingerprint is on the pod). */
  credentialFor?: (w: ProjectWorkspace) => string;
  /** No call for this long stops the Runner; 0 never stops. Default 30 min. */
  idleTimeoutMs?: number;
  /** How many Runners a rotation may have unavailable at once. Default 1. */
  maxUnavailable?: number;
  quota?: FleetQuota;
  /** Full resync period. Default 5 min. */
  resyncMs?: number;
  /** Debounce of watch-triggered passes. Default 200 ms. */
  debounceMs?: number;
  pendingNodeGraceMs?: number;
  /**
   * The last call per canonical Project id on every broker replica (shared call activity): a
   * call another replica served restarts the idle clock here and wants the Runner started.
   */
  activity?: () => Promise<Map<string, number>>;
  /** The warm pool (kube-warm-pool.ts); absent or size 0: none. */
  warmPool?: KubeWarmPoolOptions;
  /** Writes happen only while this says so (leader election). Default: always. */
  isLeader?: () => boolean;
  now?: () => number;
  logger: Logger;
}

export interface ReconcileReport {
  projects: number;
  pods: number;
  created: number;
  deletedOrphans: number;
  replacedFailed: number;
  stoppedIdle: number;
  rotated: number;
  refusedQuota: number;
  forbidden: number;
  warmCreated: number;
  warmReplaced: number;
  skippedNotLeader: boolean;
  durationMs: number;
}

export interface TouchResult {
  action: "exists" | "created" | "starting" | "refused";
  failure?: ToolFailure;
}

export interface FleetReconciler {
  /** Lists, watches and resyncs until stop(). */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** One pass now over the cached pods (re-listed first when not started). */
  reconcile(): Promise<ReconcileReport>;
  /** The periodic full resync: re-list the pods, then one pass. */
  resync(): Promise<ReconcileReport>;
  /** Records a call for the Project; a stopped Runner is started (the transparent start). */
  touch(w: ProjectWorkspace): Promise<TouchResult>;
  status(w: ProjectWorkspace): RunnerFleetState;
  /** Records a call for the Project without starting anything (the idle clock restarts). */
  noteCall(w: ProjectWorkspace): void;
  /** Records a call and checks the tenant's quota before a Runner is started elsewhere; the refusal, if any. */
  admit(w: ProjectWorkspace): ToolFailure | undefined;
  /** Owner references (the anchor) for objects made outside the reconciler. */
  owners(): Promise<OwnerReference[]>;
  /** Claims a Ready warm pod for a new Project (create_project); undefined: none Ready, or the claim failed (start it cold). */
  claimWarm(w: ProjectWorkspace, options?: { source?: WorkspaceSource; brokerUrl?: string }): Promise<{ name: string } | undefined>;
  /** Ready, unclaimed warm pods. */
  warmReady(): number;
  /** The Project with its workspace volume when that is a claimed warm one's (the PVC a restart mounts). */
  workspaceOf(w: ProjectWorkspace): ProjectWorkspace;
  /** The name of the Project's pod when it is a claimed warm pod (not the Project's own pod name). */
  claimedPod(w: ProjectWorkspace): string | undefined;
  /** Deletes the Project's claimed warm pod and its credential Secret, if it has one; true if anything existed. */
  removeClaimed(w: ProjectWorkspace): Promise<boolean>;
  /** Pods in the watched cache. */
  cachedPods(): number;
  /** Counters since start: watch events, API calls, re-lists. */
  stats(): { watchEvents: number; apiCalls: number; relists: number };
}

const fingerprintOf = credentialFingerprint;

export async function createFleetReconciler(o: FleetReconcilerOptions): Promise<FleetReconciler> {
  const { ApiException, CoreV1Api, Watch } = await import("@kubernetes/client-node");
  const api: CoreV1Api = o.kubeConfig.makeApiClient(CoreV1Api);
  const watcher = new Watch(o.kubeConfig);
  const namespace = o.namespace ?? o.template.namespace;
  const now = o.now ?? Date.now;
  const idleTimeoutMs = o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const maxUnavailable = Math.max(1, o.maxUnavailable ?? 1);
  const resyncMs = o.resyncMs ?? 300_000;
  const debounceMs = o.debounceMs ?? 200;
  const isLeader = o.isLeader ?? (() => true);
  const hash = templateHash(o.template);
  const selector = Object.entries(o.template.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const status = (e: unknown) => (e instanceof ApiException ? e.code : undefined);
  const body = (e: unknown) => (e instanceof ApiException ? String((e.body as { message?: unknown } | undefined)?.message ?? e.body ?? "") : String(e));
  const { projectLabelKey, tenantLabelKey } = o.template;

  const pods = new Map<string, PodFacts>();
  /** canonical id → last call (ms); a Project is wanted (its Runner runs) while this is within the idle window. */
  const lastCall = new Map<string, number>();
  const refused = new Map<string, { limit: number; use: number }>();
  const forbidden = new Map<string, string>();
  const idleStopped = new Set<string>();
  let anchorUid: string | undefined;
  let stopped = true;
  let watchAbort: AbortController | undefined;
  let resyncTimer: NodeJS.Timeout | undefined;
  let debounceTimer: NodeJS.Timeout | undefined;
  let pass: Promise<ReconcileReport> | undefined;
  let again = false;
  let listRv = "";
  const counters = { watchEvents: 0, apiCalls: 0, relists: 0 };
  const call = <T>(p: Promise<T>) => {
    counters.apiCalls++;
    return p;
  };

  const anchor = async () => {
    if (anchorUid) return anchorUid;
    try {
      const cm = await call(api.readNamespacedConfigMap({ name: o.anchorName, namespace }));
      anchorUid = cm.metadata?.uid;
    } catch (e) {
      if (status(e) !== 404) throw e;
      const cm = await call(
        api.createNamespacedConfigMap({
          namespace,
          body: {
            metadata: { name: o.anchorName, namespace, labels: o.template.labels },
            data: { purpose: "owns the release's Runner pods and credential Secrets" },
          },
        }),
      );
      anchorUid = cm.metadata?.uid;
    }
    if (!anchorUid) throw new Error(`anchor ConfigMap ${o.anchorName} has no uid`);
    return anchorUid;
  };

  const owners = async (): Promise<OwnerReference[]> => [
    { apiVersion: "v1", kind: "ConfigMap", name: o.anchorName, uid: await anchor(), controller: true, blockOwnerDeletion: false },
  ];

  const pool = o.warmPool
    ? await createKubeWarmPool(o.warmPool, {
        api,
        template: o.template,
        namespace,
        templateHash: hash,
        pods,
        call,
        status,
        owners,
        ...(o.credentialFor ? { credentialFor: o.credentialFor } : {}),
        isLeader,
        logger: o.logger,
      })
    : undefined;
  /** canonical id → its workspace PVC when not the default name (a claimed warm volume). */
  const volumes = new Map<string, string>();
  /** The Project's pod: by its own name, else a claimed warm pod carrying its project label. */
  const podOf = (w: ProjectWorkspace) => {
    const own = pods.get(runnerPodName(o.template, w));
    if (own) return own;
    const label = runnerNames(w).projectLabel;
    for (const p of pods.values()) if (!p.warm && p.project === label) return p;
    return undefined;
  };

  const relist = async () => {
    counters.relists++;
    const list = await call(api.listNamespacedPod({ namespace, labelSelector: selector }));
    pods.clear();
    for (const p of list.items) {
      const f = podFacts(p, projectLabelKey, tenantLabelKey);
      pods.set(f.name, f);
    }
    listRv = list.metadata?.resourceVersion ?? "";
  };

  const schedule = () => {
    if (stopped || debounceTimer) return;
    debounceTimer = setTimeout(() => {
      debounceTimer = undefined;
      void runPass().catch((error: unknown) => o.logger.warn("fleet reconcile failed", { error }));
    }, debounceMs);
  };

  const watch = async (): Promise<void> => {
    if (stopped) return;
    const restart = (why: unknown) => {
      if (stopped) return;
      o.logger.info("fleet watch ended; re-listing", { reason: why ? String(why) : "closed" });
      setTimeout(() => {
        if (stopped) return;
        relist()
          .then(() => watch())
          .then(schedule)
          .catch((error: unknown) => {
            o.logger.warn("fleet re-list failed", { error });
            restart(error);
          });
      }, 200);
    };
    try {
      counters.apiCalls++;
      watchAbort = await watcher.watch(
        `/api/v1/namespaces/${namespace}/pods`,
        { labelSelector: selector, resourceVersion: listRv, allowWatchBookmarks: true },
        (type: string, obj: unknown) => {
          counters.watchEvents++;
          if (type === "ERROR") return; // 410 Gone: the stream ends and re-lists
          const pod = obj as V1Pod;
          const rv = pod.metadata?.resourceVersion;
          if (rv) listRv = rv;
          if (type === "BOOKMARK") return;
          const f = podFacts(pod, projectLabelKey, tenantLabelKey);
          if (type === "DELETED") pods.delete(f.name);
          else pods.set(f.name, f);
          schedule();
        },
        (err: unknown) => restart(err),
      );
    } catch (e) {
      restart(e);
    }
  };

  const del = async (name: string) => {
    try {
      await call(api.deleteNamespacedPod({ name, namespace }));
    } catch (e) {
      if (status(e) !== 404) throw e;
    }
    const f = pods.get(name);
    if (f) f.terminating = true;
  };

  const createFor = async (w: ProjectWorkspace): Promise<"created" | "exists" | "forbidden"> => {
    const owner = await owners();
    const credential = o.credentialFor?.(w);
    const { pod, secret } = buildRunnerObjects(o.template, w, namespace, undefined, credential);
    pod.metadata = { ...pod.metadata, ownerReferences: owner };
    const id = canonicalProjectId(w.clientId, w.projectId);
    try {
      if (secret) {
        secret.metadata = { ...secret.metadata, ownerReferences: owner };
        try {
          await call(api.createNamespacedSecret({ namespace, body: secret }));
        } catch (e) {
          if (status(e) !== 409) throw e;
          // It exists: replace it so a rotated key reaches the new pod.
          await call(api.replaceNamespacedSecret({ name: secret.metadata.name ?? "", namespace, body: secret }));
        }
      }
      const created = await call(api.createNamespacedPod({ namespace, body: pod }));
      const f = podFacts(created, projectLabelKey, tenantLabelKey);
      pods.set(f.name, f);
      forbidden.delete(id);
      return "created";
    } catch (e) {
      if (status(e) === 409) return "exists";
      if (status(e) === 403) {
        forbidden.set(id, body(e).slice(0, 500));
        o.logger.warn("runner pod refused by the cluster", { project: id, message: body(e) });
        return "forbidden";
      }
      throw e;
    }
  };

  const liveByTenant = () => {
    const m = new Map<string, number>();
    for (const p of pods.values())
      if (!p.warm && !p.terminating && p.phase !== "Failed" && p.phase !== "Succeeded") m.set(p.tenant, (m.get(p.tenant) ?? 0) + 1);
    return m;
  };

  const quotaCheck = (w: ProjectWorkspace, live: Map<string, number>) => {
    const limit = o.quota?.runnersPerTenant;
    if (limit === undefined) return undefined;
    const use = live.get(runnerNames(w).tenantLabel) ?? 0;
    return use >= limit ? { limit, use } : undefined;
  };

  const wanted = (id: string, t: number) => {
    const last = lastCall.get(id);
    return last !== undefined && (idleTimeoutMs === 0 || t - last < idleTimeoutMs);
  };

  const once = async (): Promise<ReconcileReport> => {
    const started = performance.now();
    const report: ReconcileReport = {
      projects: 0,
      pods: pods.size,
      created: 0,
      deletedOrphans: 0,
      replacedFailed: 0,
      stoppedIdle: 0,
      rotated: 0,
      refusedQuota: 0,
      forbidden: 0,
      warmCreated: 0,
      warmReplaced: 0,
      skippedNotLeader: false,
      durationMs: 0,
    };
    const done = () => ({ ...report, durationMs: performance.now() - started });
    if (!isLeader()) return { ...done(), skippedNotLeader: true };
    const projects = await o.projects();
    report.projects = projects.length;
    const t = now();
    if (o.activity) {
      const shared = await o.activity().catch((error: unknown) => (o.logger.warn("shared call activity not read", { error }), new Map<string, number>()));
      for (const [id, at] of shared)
        if (at > (lastCall.get(id) ?? -Infinity) && (idleTimeoutMs === 0 || t - at < idleTimeoutMs)) {
          lastCall.set(id, at);
          idleStopped.delete(id);
        }
    }
    const byPod = new Map<string, { w: ProjectWorkspace; id: string }>();
    const byLabel = new Map<string, { w: ProjectWorkspace; id: string }>();
    for (const w of projects) {
      const d = { w, id: canonicalProjectId(w.clientId, w.projectId) };
      byPod.set(runnerPodName(o.template, w), d);
      byLabel.set(runnerNames(w).projectLabel, d);
      if (w.volume) volumes.set(d.id, w.volume);
    }
    // A claimed warm pod is its Project's under another name.
    const projectOf = (p: PodFacts) => (p.warm ? undefined : (byPod.get(p.name) ?? byLabel.get(p.project)));
    const credentialFp = (w: ProjectWorkspace) => (o.credentialFor ? fingerprintOf(o.credentialFor(w)) : "");
    const busy = async (id: string) => (o.busy ? await o.busy(id) : false);

    // Orphans, ended pods and idle Runners.
    for (const p of [...pods.values()]) {
      if (p.terminating || p.warm) continue;
      const d = projectOf(p);
      if (!isLeader()) return { ...done(), skippedNotLeader: true };
      if (!d) {
        await del(p.name);
        try {
          await call(api.deleteNamespacedSecret({ name: `${p.name}-credential`, namespace }));
        } catch (e) {
          if (status(e) !== 404) throw e;
        }
        report.deletedOrphans++;
        o.logger.info("orphan runner pod removed", { pod: p.name });
        continue;
      }
      // A pod seen for a Project counts as a call at first sight: a restarted broker does not stop a fleet at once.
      if (!lastCall.has(d.id)) lastCall.set(d.id, t);
      if (p.phase === "Failed" || p.phase === "Succeeded") {
        await del(p.name);
        report.replacedFailed++;
        o.logger.info("ended runner pod replaced", { pod: p.name, phase: p.phase });
        continue;
      }
      if (idleTimeoutMs > 0 && !wanted(d.id, t) && !(await busy(d.id))) {
        await del(p.name);
        lastCall.delete(d.id);
        idleStopped.add(d.id);
        report.stoppedIdle++;
        o.logger.info("idle runner stopped", { pod: p.name, project: d.id });
      }
    }

    // Rolling rotation: stale template hash or credential fingerprint, never while busy.
    let unavailable = 0;
    for (const p of pods.values()) if (projectOf(p) && (p.terminating || !p.ready)) unavailable++;
    for (const p of [...pods.values()]) {
      if (unavailable >= maxUnavailable) break;
      const d = projectOf(p);
      if (!d || p.terminating) continue;
      const stale = p.hash !== hash || (o.credentialFor !== undefined && p.fingerprint !== credentialFp(d.w));
      if (!stale || (await busy(d.id))) continue;
      if (!isLeader()) return { ...done(), skippedNotLeader: true };
      await del(p.name);
      unavailable++;
      report.rotated++;
      o.logger.info("runner pod rotated", { pod: p.name, template_changed: p.hash !== hash });
    }

    // Missing Runners of wanted Projects.
    const live = liveByTenant();
    const served = new Set([...pods.values()].filter((p) => !p.warm).map((p) => p.project));
    for (const [name, d] of byPod) {
      if (pods.has(name) || served.has(runnerNames(d.w).projectLabel) || !wanted(d.id, t)) continue;
      const over = quotaCheck(d.w, live);
      if (over) {
        refused.set(d.id, over);
        report.refusedQuota++;
        continue;
      }
      refused.delete(d.id);
      if (!isLeader()) return { ...done(), skippedNotLeader: true };
      const r = await createFor(d.w);
      if (r === "created") {
        report.created++;
        const tenant = runnerNames(d.w).tenantLabel;
        live.set(tenant, (live.get(tenant) ?? 0) + 1);
      }
      if (r === "forbidden") report.forbidden++;
    }
    // Projects gone: forget them.
    const ids = new Set([...byPod.values()].map((d) => d.id));
    for (const id of lastCall.keys()) if (!ids.has(id)) lastCall.delete(id);
    for (const id of volumes.keys()) if (!ids.has(id)) volumes.delete(id);
    if (pool) {
      const w = await pool.maintain();
      report.warmCreated = w.warmCreated;
      report.warmReplaced = w.warmReplaced;
    }
    report.pods = pods.size;
    return done();
  };

  const runPass = (): Promise<ReconcileReport> => {
    if (pass) {
      again = true;
      return pass;
    }
    pass = once().finally(() => {
      pass = undefined;
      if (again && !stopped) {
        again = false;
        schedule();
      }
    });
    return pass;
  };

  return {
    async start() {
      stopped = false;
      await relist();
      await watch();
      const tick = () => {
        resyncTimer = setTimeout(() => {
          void relist()
            .then(() => runPass())
            .catch((error: unknown) => o.logger.warn("fleet resync failed", { error }))
            .finally(() => {
              if (!stopped) tick();
            });
        }, resyncMs);
      };
      tick();
      await runPass();
    },
    async stop() {
      stopped = true;
      if (resyncTimer) clearTimeout(resyncTimer);
      if (debounceTimer) clearTimeout(debounceTimer);
      watchAbort?.abort();
      await pass?.catch(() => undefined);
    },
    async reconcile() {
      if (stopped) await relist();
      return runPass();
    },
    async resync() {
      await relist();
      return runPass();
    },
    async touch(w) {
      const id = canonicalProjectId(w.clientId, w.projectId);
      lastCall.set(id, now());
      idleStopped.delete(id);
      const p = podOf(w);
      if (p && !p.terminating) return { action: "exists" };
      const over = quotaCheck(w, liveByTenant());
      if (over) {
        refused.set(id, over);
        return { action: "refused", failure: quotaExceededFailure(over.limit, over.use, id) };
      }
      refused.delete(id);
      // Only the leader creates; a follower's call is picked up by the leader's next pass
      // once the activity reaches it (the broker shares call activity through its stores).
      if (!isLeader() || p?.terminating) return { action: "starting" };
      const volume = volumes.get(id);
      const r = await createFor(volume ? { ...w, volume } : w);
      return r === "created" ? { action: "created" } : r === "exists" ? { action: "exists" } : { action: "starting" };
    },
    status(w) {
      const id = canonicalProjectId(w.clientId, w.projectId);
      const q = refused.get(id);
      const p = podOf(w);
      if (!p && q) {
        return {
          state: "refused",
          detail_code: "quota_exceeded",
          message: `The tenant's live Runner quota is used (${q.use} of ${q.limit}).`,
          evidence: { quota: "live_runners", limit: q.limit, use: q.use },
        };
      }
      const f = forbidden.get(id);
      if (!p && f !== undefined) return { state: "failed", detail_code: "runner_create_forbidden", message: f, retry_after_ms: 60_000 };
      if (idleStopped.has(id) && (!p || p.terminating)) return { state: "stopped", detail_code: "runner_idle_stopped" };
      if (!p) return { state: "absent" };
      return podFleetState(p, now(), o.pendingNodeGraceMs);
    },
    noteCall(w) {
      const id = canonicalProjectId(w.clientId, w.projectId);
      lastCall.set(id, now());
      idleStopped.delete(id);
    },
    admit(w) {
      const id = canonicalProjectId(w.clientId, w.projectId);
      lastCall.set(id, now());
      idleStopped.delete(id);
      const p = podOf(w);
      const over = p && !p.terminating ? undefined : quotaCheck(w, liveByTenant());
      if (!over) {
        refused.delete(id);
        return undefined;
      }
      refused.set(id, over);
      return quotaExceededFailure(over.limit, over.use, id);
    },
    async claimWarm(w, options) {
      const claimed = pool ? await pool.claim(w, options) : undefined;
      if (claimed) {
        const id = canonicalProjectId(w.clientId, w.projectId);
        volumes.set(id, `${claimed.name}-workspace`);
        lastCall.set(id, now());
        idleStopped.delete(id);
        schedule();
      }
      return claimed;
    },
    warmReady: () => pool?.ready() ?? 0,
    workspaceOf(w) {
      const volume = volumes.get(canonicalProjectId(w.clientId, w.projectId));
      return volume ? { ...w, volume } : w;
    },
    claimedPod(w) {
      const p = podOf(w);
      return p && p.name !== runnerPodName(o.template, w) ? p.name : undefined;
    },
    async removeClaimed(w) {
      const p = podOf(w);
      return pool && p && p.name !== runnerPodName(o.template, w) ? pool.removeClaimed(p.name) : false;
    },
    owners,
    cachedPods: () => pods.size,
    stats: () => ({ ...counters }),
  };
}
