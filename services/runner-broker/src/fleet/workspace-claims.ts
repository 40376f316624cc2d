/**
 * The desired state of a Kubernetes fleet: every Project with a workspace claim (PVC) in the
 * runner namespace, named by the claim's annotations, with the claim's name when it is not the
 * Project's own (a claimed warm pool volume).
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { CLIENT_ID_ANNOTATION, PROJECT_ID_ANNOTATION, runnerPodName } from "../provisioning/kubernetes.js";
import type { RunnerPodTemplate } from "../provisioning/kubernetes.js";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";

/** Every Project with a workspace claim in the namespace (the claim's annotations name it): the desired state in a cluster. */
export async function listWorkspaceClaims(kubeConfig: KubeConfig, template: RunnerPodTemplate, namespace = template.namespace): Promise<ProjectWorkspace[]> {
  const { CoreV1Api } = await import("@kubernetes/client-node");
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const labelSelector = Object.entries(template.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const list = await api.listNamespacedPersistentVolumeClaim({ namespace, labelSelector });
  const out: ProjectWorkspace[] = [];
  for (const c of list.items) {
    const clientId = c.metadata?.annotations?.[CLIENT_ID_ANNOTATION];
    const projectId = c.metadata?.annotations?.[PROJECT_ID_ANNOTATION];
    const volume = c.metadata?.name ?? "";
    const own = volume === `${runnerPodName(template, { clientId: clientId ?? "", projectId: projectId ?? "" })}-workspace`;
    if (clientId && projectId && !c.metadata?.deletionTimestamp) out.push({ clientId, projectId, ...(own ? {} : { volume }) });
  }
  return out;
}
