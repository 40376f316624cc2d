/**
 * The Runner pod template the broker's fleet tests run with: the chart's shape, trimmed to a
 * small pod (one image, one port, 1 CPU and 1 GiB), valid under `parseRunnerPodTemplate`'s
 * security floor.
 */
import { parseRunnerPodTemplate } from "../provisioning/kubernetes.js";
import type { RunnerPodTemplate } from "../provisioning/kubernetes.js";

export interface TestRunnerPodTemplateOptions {
  /** Namespace of the Runner pods; "runners" unless given. */
  namespace?: string;
  /** The Runner image; a new one is a new template (a rotation). "runner:1" unless given. */
  image?: string | undefined;
  /** The port the Runner serves on; 8085 unless given. */
  port?: number;
}

export function testRunnerPodTemplate({ namespace = "runners", image = "runner:1", port = 8085 }: TestRunnerPodTemplateOptions = {}): RunnerPodTemplate {
  return parseRunnerPodTemplate({
    namespace,
    serviceAccountName: "runner",
    image,
    imagePullPolicy: "IfNotPresent",
    port,
    labels: { "app.kubernetes.io/instance": "wcx", "app.kubernetes.io/component": "runner" },
    tenantLabelKey: "webcodex.dev/tenant",
    projectLabelKey: "webcodex.dev/project",
    resources: { limits: { cpu: "1", memory: "1Gi" } },
    storageSize: "1Gi",
    storageAccessModes: ["ReadWriteOnce"],
    automountServiceAccountToken: false,
    podSecurityContext: { runAsNonRoot: true, runAsUser: 10001 },
    securityContext: {},
    args: ["runner"],
    workspaceMountPath: "/workspace",
    tmpSizeLimit: "1Gi",
    env: [],
    release: "wcx",
  });
}
