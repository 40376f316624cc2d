/**
 * The Kubernetes warm pool's objects and its claim: a warm Runner is a pod + workspace PVC + warm
 * Secret made from the Runner pod template with no project identity (labelled
 * `webcodex.dev/warm=true`, no tenant or project label). The pod mounts its PVC from the start,
 * runs with WEBCODEX_RUNNER_WARM=1 and its warm token (a per-pod HMAC of the broker's Runner key,
 * so only the broker can claim it), is Ready once loaded, and waits for
 * RunnerWarmService.Claim. Claiming makes the pair the Project's: the credential Secret is made,
 * the pod is told its Project over the RPC (it refuses any later claim), and the pod and PVC are
 * relabelled and annotated as a cold Runner's would be. The pod also mounts `<pod>-credential`
 * (optional: absent while warm), so a restarted container finds its credential there.
 */
import { createHmac, randomBytes } from "node:crypto";
import type { V1PersistentVolumeClaim, V1Pod, V1Secret } from "@kubernetes/client-node";
import {
  buildRunnerObjects,
  CLIENT_ID_ANNOTATION,
  CREDENTIAL_FINGERPRINT_ANNOTATION,
  credentialFingerprint,
  PROJECT_ID_ANNOTATION,
  RUNNER_CREDENTIAL_DIR,
  runnerPodName,
} from "../provisioning/kubernetes.js";
import type { OwnerReference, RunnerPodTemplate } from "../provisioning/kubernetes.js";
import { runnerNames } from "../provisioning/provisioner.js";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";
import { WARM_LABEL } from "./pod-state.js";

export { WARM_LABEL };
const WARM_TOKEN_DIR = "/var/run/webcodex/warm";

/** A warm pod's token: only a holder of the broker's Runner key can derive it. */
export function warmToken(key: string, podName: string): string {
  return `wcw1.${createHmac("sha256", key).update(`webcodex-runner-warm-v1\0${podName}`).digest("base64url")}`;
}

/** A fresh warm pod name: `<release>-runner-warm-<random>` (never a Project's pod name). */
export function warmPodName(t: RunnerPodTemplate): string {
  const probe = runnerPodName(t, { clientId: "", projectId: "" });
  const release = probe.slice(0, probe.lastIndexOf("-runner-"));
  return `${release}-runner-warm-${randomBytes(5).toString("hex")}`.slice(0, 63);
}

/** The pod, PVC and warm Secret of one warm Runner (pure). */
export function buildWarmObjects(
  t: RunnerPodTemplate,
  name: string,
  token: string,
  namespace = t.namespace,
  owners: OwnerReference[] = [],
): { pod: V1Pod; pvc: V1PersistentVolumeClaim; secret: V1Secret } {
  // A cold Runner's objects, then its identity taken out and the warm wiring put in.
  const base = buildRunnerObjects(t, { clientId: "", projectId: "" }, namespace);
  const labels = { ...t.labels, [WARM_LABEL]: "true" };
  const pvcName = `${name}-workspace`;
  const pod = base.pod;
  pod.metadata = { ...pod.metadata, name, labels, ...(owners.length ? { ownerReferences: owners } : {}) };
  const spec = pod.spec!;
  const c = spec.containers[0]!;
  c.env = [
    ...(c.env ?? []).filter((e) => e.name !== "WEBCODEX_RUNNER_CLIENT_ID" && e.name !== "WEBCODEX_RUNNER_PROJECT_ID"),
    { name: "WEBCODEX_RUNNER_WARM", value: "1" },
    { name: "WEBCODEX_RUNNER_WARM_TOKEN_FILE", value: `${WARM_TOKEN_DIR}/token` },
    { name: "WEBCODEX_RUNNER_WARM_CREDENTIAL_FILE", value: `${RUNNER_CREDENTIAL_DIR}/credential` },
  ];
  c.volumeMounts = [
    ...(c.volumeMounts ?? []),
    { name: "warm", mountPath: WARM_TOKEN_DIR, readOnly: true },
    { name: "credential", mountPath: RUNNER_CREDENTIAL_DIR, readOnly: true },
  ];
  spec.volumes = [
    { name: "workspace", persistentVolumeClaim: { claimName: pvcName } },
    ...(spec.volumes ?? []).filter((v) => v.name !== "workspace"),
    { name: "warm", secret: { secretName: `${name}-warm`, defaultMode: 0o400 } },
    // Absent until the claim makes it; a restarted container of the claimed pod reads it.
    { name: "credential", secret: { secretName: `${name}-credential`, defaultMode: 0o400, optional: true } },
  ];
  const pvc = base.pvc;
  pvc.metadata = { name: pvcName, namespace, labels, ...(owners.length ? { ownerReferences: owners } : {}) };
  const secret = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: `${name}-warm`, namespace, labels, ...(owners.length ? { ownerReferences: owners } : {}) },
    type: "Opaque",
    stringData: { token },
  } as unknown as V1Secret;
  return { pod, pvc, secret };
}

/**
 * The merge patches that make a claimed warm pod and PVC the Project's: its labels and
 * annotations as a cold Runner's, the warm label removed; the PVC loses its owner (a Project's
 * workspace is kept past an uninstall, as a cold one is), the pod keeps the anchor's.
 */
export function claimPatches(t: RunnerPodTemplate, w: ProjectWorkspace, credential: string | undefined) {
  const n = runnerNames(w);
  const labels = { [WARM_LABEL]: null, [t.tenantLabelKey]: n.tenantLabel, [t.projectLabelKey]: n.projectLabel };
  return {
    pod: {
      metadata: {
        labels,
        annotations: {
          [CLIENT_ID_ANNOTATION]: w.clientId,
          [PROJECT_ID_ANNOTATION]: w.projectId,
          ...(credential !== undefined ? { [CREDENTIAL_FINGERPRINT_ANNOTATION]: credentialFingerprint(credential) } : {}),
        },
      },
    },
    pvc: { metadata: { labels, ownerReferences: null, annotations: { [CLIENT_ID_ANNOTATION]: w.clientId, [PROJECT_ID_ANNOTATION]: w.projectId } } },
  };
}
