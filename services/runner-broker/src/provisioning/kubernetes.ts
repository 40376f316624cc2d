/**
 * Kubernetes provisioner: one Runner Pod + workspace PVC per Project workspace, built from
 * the chart's Runner pod template (WEBCODEX_RUNNER_POD_TEMPLATE; mapping in
 * docs/operators.md "The Runner pod template"). Pods and PVCs carry the template labels plus
 * hashed tenant and project labels; the security settings (non-root, read-only root,
 * dropped capabilities, no service-account token, resource limits) come from the template
 * and are checked when it is loaded. Create is idempotent (409 means it exists; a pod in a
 * terminal phase is replaced), delete is idempotent (404 means gone).
 *
 * One concept over 400 lines: the Kubernetes provisioner (the objects of one Runner and their
 * lifecycle).
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { KubeConfig, V1PersistentVolumeClaim, V1Pod, V1Secret } from "@kubernetes/client-node";
import type { Logger } from "@webcodex/platform";
import { runnerNames } from "./provisioner.js";
import type { EnsureResult, ProjectWorkspace, Provisioner, ProvisioningState, WorkspaceSource } from "./provisioner.js";

type Json = Record<string, unknown>;

/** The chart's Runner pod template (`webcodex.runnerPodTemplate`). */
export interface RunnerPodTemplate {
  namespace: string;
  serviceAccountName: string;
  image: string;
  imagePullPolicy: string;
  imagePullSecrets: Array<{ name: string }>;
  port: number;
  labels: Record<string, string>;
  tenantLabelKey: string;
  projectLabelKey: string;
  annotations: Record<string, string>;
  resources: { limits?: Record<string, string>; requests?: Record<string, string> };
  storageClass: string | null;
  storageSize: string;
  storageAccessModes: string[];
  runtimeClassName: string | null;
  nodeSelector: Record<string, string>;
  tolerations: Json[];
  automountServiceAccountToken: boolean;
  enableServiceLinks: boolean;
  terminationGracePeriodSeconds: number;
  podSecurityContext: Json;
  securityContext: Json;
  workingDir: string;
  args: string[];
  workspaceMountPath: string;
  tmpSizeLimit: string;
  env: Json[];
  startupProbe: Json;
  livenessProbe: Json;
  readinessProbe: Json;
  /** The Helm release: pod names start with it, so two releases never adopt each other's pods. */
  release?: string;
  /** cluster-autoscaler.kubernetes.io/safe-to-evict on Runner pods; null: no annotation. */
  safeToEvict?: boolean | null;
  /** Tenant → name of the Secret (keys username, password) a created Project is cloned with. */
  gitCredentialSecrets?: Record<string, string>;
}

export const TEMPLATE_HASH_ANNOTATION = "webcodex.dev/template-hash";
/** On a Runner pod: a digest of the credential its Secret holds; a rotated key makes it stale. */
export const CREDENTIAL_FINGERPRINT_ANNOTATION = "webcodex.dev/credential-fingerprint";
/** On a workspace PVC: the Project it holds (the labels are one-way hashes). */
export const CLIENT_ID_ANNOTATION = "webcodex.dev/client-id";
export const PROJECT_ID_ANNOTATION = "webcodex.dev/project-id";

/** A short digest of a Runner credential (never the credential). */
export const credentialFingerprint = (credential: string) => createHash("sha256").update(credential).digest("hex").slice(0, 16);

/** Owner references put on Runner pods and credential Secrets (the release's anchor). */
export type OwnerReference = { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean };
export const SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/** A stable digest of the template: a pod made from another template is replaced on ensure. */
export function templateHash(t: RunnerPodTemplate): string {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : v && typeof v === "object"
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sorted((v as Json)[k])]),
          )
        : v;
  return createHash("sha256")
    .update(JSON.stringify(sorted(t)))
    .digest("hex")
    .slice(0, 16);
}

/** The Runner pod's name: `<release>-runner-<hash of the canonical id>`, at most 63 characters. */
export function runnerPodName(t: RunnerPodTemplate, w: ProjectWorkspace): string {
  const release =
    (t.release ?? t.labels["app.kubernetes.io/instance"] ?? "wcx")
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 30) || "wcx";
  return `${release}-runner-${runnerNames(w).name.slice("wcx-runner-".length)}`.slice(0, 63);
}

const REQUIRED: ReadonlyArray<keyof RunnerPodTemplate> = [
  "namespace",
  "serviceAccountName",
  "image",
  "imagePullPolicy",
  "port",
  "labels",
  "tenantLabelKey",
  "projectLabelKey",
  "resources",
  "storageSize",
  "storageAccessModes",
  "podSecurityContext",
  "securityContext",
  "args",
  "workspaceMountPath",
  "tmpSizeLimit",
  "env",
];

/** Validates a parsed template: every problem in one error, and the security floor enforced. */
export function parseRunnerPodTemplate(raw: unknown): RunnerPodTemplate {
  if (typeof raw !== "object" || raw === null) throw new Error("runner pod template: not a JSON object");
  const t = raw as Partial<RunnerPodTemplate> & Json;
  const problems = REQUIRED.filter((k) => t[k] === undefined || t[k] === null).map((k) => `${k} is required`);
  if (t.automountServiceAccountToken !== false) problems.push("automountServiceAccountToken must be false");
  if ((t.podSecurityContext as Json | undefined)?.["runAsNonRoot"] !== true) problems.push("podSecurityContext.runAsNonRoot must be true");
  const uid = (t.podSecurityContext as Json | undefined)?.["runAsUser"];
  if (typeof uid !== "number" || uid < 1) problems.push("podSecurityContext.runAsUser must be a non-root numeric uid");
  if (!t.resources?.limits?.["cpu"] || !t.resources.limits["memory"]) problems.push("resources.limits.cpu and .memory are required");
  if (problems.length > 0) throw new Error(`runner pod template is invalid:\n  - ${problems.join("\n  - ")}`);
  return {
    annotations: {},
    imagePullSecrets: [],
    nodeSelector: {},
    tolerations: [],
    storageClass: null,
    runtimeClassName: null,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: 30,
    workingDir: "/app",
    startupProbe: {},
    livenessProbe: {},
    readinessProbe: {},
    ...t,
  } as RunnerPodTemplate;
}

export async function loadRunnerPodTemplate(path: string): Promise<RunnerPodTemplate> {
  return parseRunnerPodTemplate(JSON.parse(await readFile(path, "utf8")));
}

/** Where a Runner pod finds its own credential (a file from its per-Runner Secret, never an env var). */
export const RUNNER_CREDENTIAL_DIR = "/var/run/webcodex/runner";
const RUNNER_CREDENTIAL_KEY = "credential";

/**
 * The Pod, PVC and credential Secret for one workspace (pure; the docs/operators.md mapping).
 * With `credential` the pod mounts its own workspace-bound credential from the Secret named
 * `<pod>-credential`; the key it is derived from never enters the pod.
 */
export function buildRunnerObjects(
  t: RunnerPodTemplate,
  w: ProjectWorkspace,
  namespace = t.namespace,
  source?: WorkspaceSource,
  credential?: string,
): { pod: V1Pod; pvc: V1PersistentVolumeClaim; secret?: V1Secret } {
  const n = runnerNames(w);
  const labels = { ...t.labels, [t.tenantLabelKey]: n.tenantLabel, [t.projectLabelKey]: n.projectLabel };
  const podName = runnerPodName(t, w);
  const pvcName = w.volume ?? `${podName}-workspace`;
  const secretName = `${podName}-credential`;
  const annotations = {
    ...t.annotations,
    [TEMPLATE_HASH_ANNOTATION]: templateHash(t),
    ...(credential !== undefined ? { [CREDENTIAL_FINGERPRINT_ANNOTATION]: credentialFingerprint(credential) } : {}),
    ...(t.safeToEvict === true || t.safeToEvict === false ? { [SAFE_TO_EVICT_ANNOTATION]: String(t.safeToEvict) } : {}),
  };
  // A created Project's first start clones its repository; the credential (sent only under its url_prefix) is a reference to the tenant's Secret, never a value in the pod spec.
  const gitSecret = t.gitCredentialSecrets?.[w.clientId];
  const cloneEnv = source?.git
    ? [
        { name: "WEBCODEX_RUNNER_CLONE_URL", value: source.git.url },
        ...(source.git.ref ? [{ name: "WEBCODEX_RUNNER_CLONE_REF", value: source.git.ref }] : []),
        ...(gitSecret
          ? [
              { name: "WEBCODEX_RUNNER_CLONE_USERNAME", valueFrom: { secretKeyRef: { name: gitSecret, key: "username" } } },
              { name: "WEBCODEX_RUNNER_CLONE_PASSWORD", valueFrom: { secretKeyRef: { name: gitSecret, key: "password" } } },
              { name: "WEBCODEX_RUNNER_CLONE_URL_PREFIX", valueFrom: { secretKeyRef: { name: gitSecret, key: "url_prefix", optional: true } } },
            ]
          : []),
      ]
    : [];
  const pvc = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: pvcName, namespace, labels, annotations: { [CLIENT_ID_ANNOTATION]: w.clientId, [PROJECT_ID_ANNOTATION]: w.projectId } },
    spec: {
      accessModes: t.storageAccessModes,
      ...(t.storageClass ? { storageClassName: t.storageClass } : {}),
      resources: { requests: { storage: t.storageSize } },
    },
  };
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: podName, namespace, labels, annotations },
    spec: {
      serviceAccountName: t.serviceAccountName,
      automountServiceAccountToken: t.automountServiceAccountToken,
      enableServiceLinks: t.enableServiceLinks,
      ...(t.runtimeClassName ? { runtimeClassName: t.runtimeClassName } : {}),
      nodeSelector: t.nodeSelector,
      tolerations: t.tolerations,
      imagePullSecrets: t.imagePullSecrets,
      securityContext: t.podSecurityContext,
      terminationGracePeriodSeconds: t.terminationGracePeriodSeconds,
      restartPolicy: "Always",
      containers: [
        {
          name: "runner",
          image: t.image,
          imagePullPolicy: t.imagePullPolicy,
          workingDir: t.workingDir,
          args: t.args,
          ports: [{ name: "http", containerPort: t.port, protocol: "TCP" }],
          env: [
            ...t.env.filter((e) => (e as { name?: unknown }).name !== "WEBCODEX_RUNNER_TOKEN"),
            { name: "WEBCODEX_RUNNER_CLIENT_ID", value: w.clientId },
            { name: "WEBCODEX_RUNNER_PROJECT_ID", value: w.projectId },
            ...(credential !== undefined ? [{ name: "WEBCODEX_RUNNER_TOKEN_FILE", value: `${RUNNER_CREDENTIAL_DIR}/${RUNNER_CREDENTIAL_KEY}` }] : []),
            ...cloneEnv,
          ],
          resources: t.resources,
          securityContext: t.securityContext,
          startupProbe: t.startupProbe,
          livenessProbe: t.livenessProbe,
          readinessProbe: t.readinessProbe,
          volumeMounts: [
            { name: "workspace", mountPath: t.workspaceMountPath },
            { name: "tmp", mountPath: "/tmp" },
            ...(credential !== undefined ? [{ name: "credential", mountPath: RUNNER_CREDENTIAL_DIR, readOnly: true }] : []),
          ],
        },
      ],
      volumes: [
        { name: "workspace", persistentVolumeClaim: { claimName: pvcName } },
        { name: "tmp", emptyDir: { sizeLimit: t.tmpSizeLimit } },
        ...(credential !== undefined ? [{ name: "credential", secret: { secretName, defaultMode: 0o400 } }] : []),
      ],
    },
  };
  const secret =
    credential === undefined
      ? undefined
      : {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: secretName, namespace, labels },
          type: "Opaque",
          stringData: { [RUNNER_CREDENTIAL_KEY]: credential },
        };
  return { pod: pod as unknown as V1Pod, pvc: pvc as unknown as V1PersistentVolumeClaim, ...(secret ? { secret: secret as unknown as V1Secret } : {}) };
}

export interface KubernetesProvisionerOptions {
  template: RunnerPodTemplate;
  /** Defaults to the template's namespace. */
  namespace?: string;
  /** Each Runner's own workspace-bound credential (runner-auth.ts), put in a Secret of its own; absent: none. */
  credentialFor?: (workspace: ProjectWorkspace) => string;
  /** Defaults to in-cluster config when running in a pod, else ~/.kube/config. */
  kubeConfig?: KubeConfig;
  /** Owner references for created pods and Secrets (the fleet's anchor); absent: none. */
  owners?: () => Promise<OwnerReference[]>;
  logger: Logger;
}

/**
 * The Kubernetes client library is loaded by the first provisioner made: it is large (tens
 * of MB of heap once loaded) and a process that never provisions Runner pods (`webcodex dev`,
 * a broker with another provisioner) does not carry it.
 */
export async function createKubernetesProvisioner(o: KubernetesProvisionerOptions): Promise<Provisioner> {
  const { ApiException, CoreV1Api, KubeConfig } = await import("@kubernetes/client-node");
  const status = (e: unknown) => (e instanceof ApiException ? e.code : undefined);
  const defaultKubeConfig = () => {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    return kc;
  };
  const api = (o.kubeConfig ?? defaultKubeConfig()).makeApiClient(CoreV1Api);
  const namespace = o.namespace ?? o.template.namespace;
  const hash = templateHash(o.template);

  const createPod = async (pod: V1Pod): Promise<"created" | "exists"> => {
    try {
      await api.createNamespacedPod({ namespace, body: pod });
      return "created";
    } catch (e) {
      if (status(e) === 409) return "exists";
      throw e;
    }
  };

  return {
    kind: "kubernetes",
    async ensureRunner(w, options: { source?: WorkspaceSource } = {}): Promise<EnsureResult> {
      const { pod, pvc, secret } = buildRunnerObjects(o.template, w, namespace, options.source, o.credentialFor?.(w));
      const name = pod.metadata?.name ?? "";
      if (o.owners) {
        const ownerReferences = await o.owners();
        pod.metadata = { ...pod.metadata, ownerReferences };
        if (secret) secret.metadata = { ...secret.metadata, ownerReferences };
      }
      if (secret) {
        try {
          await api.createNamespacedSecret({ namespace, body: secret });
        } catch (e) {
          if (status(e) !== 409) throw e;
        }
      }
      try {
        await api.createNamespacedPersistentVolumeClaim({ namespace, body: pvc });
      } catch (e) {
        if (status(e) !== 409) throw e;
      }
      if ((await createPod(pod)) === "created") {
        o.logger.info("runner pod created", { pod: name, namespace });
        return { action: "created", name };
      }
      // It exists: keep it unless it has ended (a Runner pod never completes on purpose).
      let existing: V1Pod | undefined;
      try {
        existing = await api.readNamespacedPod({ name, namespace });
      } catch (e) {
        if (status(e) !== 404) throw e;
      }
      const phase = existing?.status?.phase;
      // A pod of another template (an upgrade changed it) is replaced as well.
      const current = existing?.metadata?.annotations?.[TEMPLATE_HASH_ANNOTATION] === hash;
      if (existing && current && phase !== "Failed" && phase !== "Succeeded") return { action: "exists", name };
      if (existing) {
        try {
          await api.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
        } catch (e) {
          if (status(e) !== 404) throw e;
        }
      }
      const action = (await createPod(pod)) === "created" ? "recreated" : "exists";
      o.logger.info("runner pod replaced", {
        pod: name,
        namespace,
        previous_phase: phase ?? "gone",
        template_changed: existing !== undefined && !current,
        action,
      });
      return { action, name };
    },

    async provisioningState(w): Promise<ProvisioningState> {
      let pod: V1Pod;
      try {
        pod = await api.readNamespacedPod({ name: runnerPodName(o.template, w), namespace });
      } catch (e) {
        if (status(e) === 404) return { state: "unknown" };
        throw e;
      }
      return podProvisioningState(pod);
    },

    async removeRunner(w, options = {}) {
      const name = runnerPodName(o.template, w);
      let removed = false;
      const del = async (fn: () => Promise<unknown>) => {
        try {
          await fn();
          removed = true;
        } catch (e) {
          if (status(e) !== 404) throw e;
        }
      };
      await del(() => api.deleteNamespacedPod({ name, namespace }));
      if (o.credentialFor) await del(() => api.deleteNamespacedSecret({ name: `${name}-credential`, namespace }));
      if (!options.keepWorkspace) await del(() => api.deleteNamespacedPersistentVolumeClaim({ name: w.volume ?? `${name}-workspace`, namespace }));
      o.logger.info("runner removed", { pod: name, namespace, keep_workspace: options.keepWorkspace === true, removed });
      return removed;
    },

    async close() {},
  };
}

/** Container waiting reasons that will not clear by themselves (a missing Secret, a bad image). */
const STUCK_WAITING = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"]);

/**
 * What a Runner pod's status says: ready; failed with the failure its Runner left as its
 * termination message (a clone that failed); unschedulable with the pod's own condition
 * (no node fits, an unbound volume, a quota) or the container's stuck waiting reason; else
 * starting.
 */
export function podProvisioningState(pod: V1Pod): ProvisioningState {
  const st = pod.status;
  const container = st?.containerStatuses?.[0];
  const terminated = container?.state?.terminated ?? container?.lastState?.terminated;
  if (terminated?.message) {
    try {
      const f = JSON.parse(terminated.message) as { reason_code?: string; detail_code?: string; message?: string };
      if (f.reason_code === ReasonCode.cloneFailed || f.reason_code === ReasonCode.invalidValue) {
        return {
          state: "failed",
          failure: toolFailure(f.reason_code, PipelineStage.execution, {
            ...(f.detail_code ? { detail_code: f.detail_code } : {}),
            ...(f.message ? { message: f.message } : {}),
          }),
        };
      }
    } catch {
      // Not ours: an ordinary crash; the pod restarts.
    }
  }
  if (st?.phase === "Running" && st.conditions?.some((c) => c.type === "Ready" && c.status === "True")) return { state: "ready" };
  const unscheduled = st?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False");
  if (st?.phase === "Pending" && unscheduled) {
    return { state: "unschedulable", condition: { type: unscheduled.type, reason: unscheduled.reason ?? "Unschedulable", message: unscheduled.message ?? "" } };
  }
  const waiting = container?.state?.waiting;
  if (waiting?.reason && STUCK_WAITING.has(waiting.reason))
    return { state: "unschedulable", condition: { type: "ContainerWaiting", reason: waiting.reason, message: waiting.message ?? "" } };
  return { state: "starting" };
}
