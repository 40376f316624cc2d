/** The Kubernetes provisioner against a fake API server. One concept over 400 lines: one provisioner's objects and lifecycle. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { createLogger } from "@webcodex/platform";
import {
  buildRunnerObjects,
  createKubernetesProvisioner,
  parseRunnerPodTemplate,
  podProvisioningState,
  runnerPodName,
  SAFE_TO_EVICT_ANNOTATION,
  TEMPLATE_HASH_ANNOTATION,
  templateHash,
} from "./kubernetes.js";
import { runnerNames } from "./provisioner.js";
import { runnerCredential } from "../runner-auth.js";

/** The chart's rendered Runner pod template (helm template charts/webcodex, release "wcx"). */
const chartTemplate = {
  annotations: {},
  apiVersion: "webcodex.dev/v1alpha1",
  args: ["node", "tools/cli/bin/webcodex.js", "runner"],
  automountServiceAccountToken: false,
  enableServiceLinks: false,
  env: [
    { name: "WEBCODEX_PORT", value: "8085" },
    { name: "WEBCODEX_LOG_LEVEL", value: "info" },
    { name: "HOME", value: "/tmp" },
    { name: "WEBCODEX_RUNNER_ROOT", value: "/workspace" },
    { name: "WEBCODEX_RUNNER_BROKER_URL", value: "http://wcx-webcodex-runner-broker.webcodex.svc:8084" },
    { name: "WEBCODEX_POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    { name: "WEBCODEX_RUNNER_ADVERTISE_URL", value: "http://$(WEBCODEX_POD_IP):8085" },
    { name: "WEBCODEX_RUNNER_TOKEN", valueFrom: { secretKeyRef: { key: "token", name: "wcx-webcodex-runner-token" } } },
  ],
  image: "ghcr.io/webcodex/runner:0.1.0",
  imagePullPolicy: "IfNotPresent",
  imagePullSecrets: [],
  kind: "RunnerPodTemplate",
  labels: {
    "app.kubernetes.io/component": "runner",
    "app.kubernetes.io/instance": "wcx",
    "app.kubernetes.io/managed-by": "webcodex-runner-broker",
    "app.kubernetes.io/name": "webcodex",
  },
  livenessProbe: { failureThreshold: 3, httpGet: { path: "/healthz", port: 8085 }, periodSeconds: 10, timeoutSeconds: 3 },
  namespace: "webcodex-runners",
  nodeSelector: {},
  podSecurityContext: {
    fsGroup: 10001,
    fsGroupChangePolicy: "OnRootMismatch",
    runAsGroup: 10001,
    runAsNonRoot: true,
    runAsUser: 10001,
    seccompProfile: { type: "RuntimeDefault" },
  },
  port: 8085,
  projectLabelKey: "webcodex.dev/project",
  readinessProbe: { failureThreshold: 3, httpGet: { path: "/readyz", port: 8085 }, periodSeconds: 5, timeoutSeconds: 3 },
  resources: { limits: { cpu: "2", "ephemeral-storage": "2Gi", memory: "2Gi" }, requests: { cpu: "250m", "ephemeral-storage": "256Mi", memory: "512Mi" } },
  runtimeClassName: "gvisor",
  securityContext: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    privileged: false,
    readOnlyRootFilesystem: true,
    runAsGroup: 10001,
    runAsNonRoot: true,
    runAsUser: 10001,
    seccompProfile: { type: "RuntimeDefault" },
  },
  serviceAccountName: "wcx-webcodex-runner",
  startupProbe: { failureThreshold: 30, httpGet: { path: "/healthz", port: 8085 }, periodSeconds: 2, timeoutSeconds: 2 },
  storageAccessModes: ["ReadWriteOnce"],
  storageClass: null,
  storageSize: "10Gi",
  tenantLabelKey: "webcodex.dev/tenant",
  terminationGracePeriodSeconds: 30,
  tmpSizeLimit: "1Gi",
  tolerations: [],
  workingDir: "/app",
  workspaceMountPath: "/workspace",
};

interface Recorded {
  method: string;
  path: string;
  auth: string | undefined;
  body: Record<string, unknown> | undefined;
}

type Obj = Record<string, unknown> & {
  metadata: { name: string; namespace?: string; uid?: string; labels?: Record<string, string> };
  status?: { phase?: string };
};

/** A fake Kubernetes API server for pods and PVCs: records requests and answers like the real one. */
function fakeApiServer() {
  const requests: Recorded[] = [];
  const store = new Map<string, Obj>();
  const status = (code: number, reason: string) => ({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason, code });
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0] ?? "";
      const body = raw ? (JSON.parse(raw) as Obj) : undefined;
      requests.push({ method: req.method ?? "", path, auth: req.headers.authorization, body });
      const send = (code: number, obj: unknown) => {
        res.writeHead(code, { "content-type": "application/json" });
        res.end(JSON.stringify(obj));
      };
      const m = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|persistentvolumeclaims|secrets)(?:\/([^/]+))?$/.exec(path);
      if (!m) return send(404, status(404, "NotFound"));
      const [, ns, kind, name] = m;
      if (req.method === "POST" && body && !name) {
        const key = `${kind}/${ns}/${body.metadata.name}`;
        if (store.has(key)) return send(409, status(409, "AlreadyExists"));
        const created: Obj = { ...body, metadata: { ...body.metadata, namespace: ns ?? "", uid: `uid-${store.size}` }, status: { phase: "Pending" } };
        store.set(key, created);
        return send(201, created);
      }
      const key = `${kind}/${ns}/${name}`;
      const existing = store.get(key);
      if (!existing) return send(404, status(404, "NotFound"));
      if (req.method === "GET") return send(200, existing);
      if (req.method === "DELETE") {
        store.delete(key);
        return send(200, existing);
      }
      return send(405, status(405, "MethodNotAllowed"));
    });
  });
  return { server, requests, store };
}

const labelValue = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

describe("kubernetes provisioner against a fake API server", () => {
  const api = fakeApiServer();
  let kubeConfig: KubeConfig;
  const logger = createLogger({ service: "test", level: "silent" });
  const template = parseRunnerPodTemplate(chartTemplate);
  const workspace = { clientId: "Tenant@Example/Org", projectId: "web.app_1" };

  before(async () => {
    await new Promise<void>((r) => api.server.listen(0, "127.0.0.1", r));
    const port = (api.server.address() as AddressInfo).port;
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: "fake", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: "broker", token: "sa-token" }],
      contexts: [{ name: "fake", cluster: "fake", user: "broker" }],
      currentContext: "fake",
    });
  });
  after(() => new Promise<void>((r) => api.server.close(() => r())));

  it("creates one workspace PVC and one Runner pod, labelled, non-root, limited and tokenless", async () => {
    api.requests.length = 0;
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    const r = await p.ensureRunner(workspace);
    const names = runnerNames(workspace);
    assert.deepEqual(r, { action: "created", name: runnerPodName(template, workspace) });
    assert.deepEqual(
      api.requests.map((q) => `${q.method} ${q.path}`),
      ["POST /api/v1/namespaces/webcodex-runners/persistentvolumeclaims", "POST /api/v1/namespaces/webcodex-runners/pods"],
    );
    for (const q of api.requests) assert.equal(q.auth, "Bearer sa-token");

    const pvc = api.requests[0]!.body as { metadata: { name: string; labels: Record<string, string> }; spec: Record<string, unknown> };
    const pod = api.requests[1]!.body as {
      metadata: { name: string; labels: Record<string, string> };
      spec: {
        automountServiceAccountToken: boolean;
        enableServiceLinks: boolean;
        runtimeClassName?: string;
        serviceAccountName: string;
        securityContext: Record<string, unknown>;
        volumes: Array<Record<string, unknown>>;
        containers: Array<{
          name: string;
          image: string;
          securityContext: Record<string, unknown>;
          resources: { limits: Record<string, string> };
          env: Array<{ name: string; value?: string }>;
          volumeMounts: unknown[];
          ports: unknown[];
        }>;
      };
    };
    // Labels: the template's, plus tenant and project as label-safe stable hashes.
    for (const labels of [pod.metadata.labels, pvc.metadata.labels]) {
      assert.equal(labels["app.kubernetes.io/component"], "runner");
      assert.equal(labels["webcodex.dev/tenant"], names.tenantLabel);
      assert.equal(labels["webcodex.dev/project"], names.projectLabel);
      assert.match(labels["webcodex.dev/tenant"]!, labelValue);
      assert.match(labels["webcodex.dev/project"]!, labelValue);
    }
    assert.notEqual(names.tenantLabel, workspace.clientId);
    assert.equal(runnerNames({ ...workspace }).projectLabel, names.projectLabel, "stable");
    assert.notEqual(runnerNames({ ...workspace, projectId: "other" }).projectLabel, names.projectLabel);
    assert.match(pod.metadata.name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    assert.ok(pod.metadata.name.length <= 63);
    assert.ok(pod.metadata.name.startsWith("wcx-runner-"), "the pod name starts with the release");
    assert.notEqual(runnerPodName({ ...template, release: "other" }, workspace), pod.metadata.name, "another release never names (and adopts) this pod");
    const annotations = (pod.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    assert.equal(annotations[TEMPLATE_HASH_ANNOTATION], templateHash(template));
    assert.equal(SAFE_TO_EVICT_ANNOTATION in annotations, false, "no safe-to-evict annotation unless the value asks for one");

    // PVC.
    assert.equal(pvc.metadata.name, `${pod.metadata.name}-workspace`);
    assert.deepEqual(pvc.spec, { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "10Gi" } } });

    // Pod security: no service-account token, non-root, sandbox runtime, locked-down container.
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.equal(pod.spec.enableServiceLinks, false);
    assert.equal(pod.spec.runtimeClassName, "gvisor");
    assert.equal(pod.spec.serviceAccountName, "wcx-webcodex-runner");
    assert.equal(pod.spec.securityContext["runAsNonRoot"], true);
    assert.equal(pod.spec.securityContext["runAsUser"], 10001);
    assert.deepEqual(pod.spec.securityContext["seccompProfile"], { type: "RuntimeDefault" });
    assert.equal(pod.spec.containers.length, 1);
    const c = pod.spec.containers[0]!;
    assert.equal(c.name, "runner");
    assert.equal(c.securityContext["runAsNonRoot"], true);
    assert.equal(c.securityContext["readOnlyRootFilesystem"], true);
    assert.equal(c.securityContext["allowPrivilegeEscalation"], false);
    assert.deepEqual(c.securityContext["capabilities"], { drop: ["ALL"] });
    assert.deepEqual(c.resources.limits, { cpu: "2", "ephemeral-storage": "2Gi", memory: "2Gi" });
    assert.deepEqual(c.env.slice(-2), [
      { name: "WEBCODEX_RUNNER_CLIENT_ID", value: workspace.clientId },
      { name: "WEBCODEX_RUNNER_PROJECT_ID", value: workspace.projectId },
    ]);
    assert.equal(
      c.env.some((e) => e.name === "WEBCODEX_RUNNER_TOKEN"),
      false,
      "no installation-wide secret reaches a Runner pod",
    );
    assert.deepEqual(pod.spec.volumes, [
      { name: "workspace", persistentVolumeClaim: { claimName: pvc.metadata.name } },
      { name: "tmp", emptyDir: { sizeLimit: "1Gi" } },
    ]);

    // The wire bodies are exactly the documented mapping (nothing dropped by serialization).
    const expected = buildRunnerObjects(template, workspace);
    assert.deepEqual(pod, JSON.parse(JSON.stringify(expected.pod)));
    assert.deepEqual(pvc, JSON.parse(JSON.stringify(expected.pvc)));
  });

  it("with a Runner credential key, each pod mounts only its own workspace-bound credential from a Secret of its own", async () => {
    api.requests.length = 0;
    const key = "runner-credential-key-0123456789abcdef";
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger, credentialFor: (w) => runnerCredential(key, w) });
    const other = { clientId: "other-tenant", projectId: "p" };
    await p.ensureRunner(other);
    const secretReq = api.requests.find((q) => q.method === "POST" && q.path.endsWith("/secrets"));
    const podReq = api.requests.find((q) => q.method === "POST" && q.path.endsWith("/pods"));
    assert.ok(secretReq && podReq);
    const secret = secretReq.body as { metadata: { name: string }; stringData: Record<string, string> };
    const pod = podReq.body as {
      spec: {
        volumes: Array<Record<string, unknown>>;
        containers: Array<{ env: Array<{ name: string; value?: string }>; volumeMounts: Array<Record<string, unknown>> }>;
      };
    };
    assert.deepEqual(secret.stringData, { credential: runnerCredential(key, other) });
    const text = JSON.stringify(pod) + JSON.stringify(secret);
    assert.equal(text.includes(key), false, "the key itself is nowhere in the pod or its Secret");
    const c = pod.spec.containers[0]!;
    assert.equal(
      c.env.some((e) => e.name === "WEBCODEX_RUNNER_TOKEN"),
      false,
    );
    assert.ok(c.env.some((e) => e.name === "WEBCODEX_RUNNER_TOKEN_FILE" && e.value === "/var/run/webcodex/runner/credential"));
    assert.deepEqual(
      pod.spec.volumes.find((v) => v["name"] === "credential"),
      { name: "credential", secret: { secretName: secret.metadata.name, defaultMode: 0o400 } },
    );
    assert.notEqual(runnerCredential(key, other), runnerCredential(key, workspace), "credentials differ per workspace");
    assert.equal(await p.removeRunner(other), true);
    assert.ok(api.requests.some((q) => q.method === "DELETE" && q.path.endsWith(`/secrets/${secret.metadata.name}`)));
  });

  it("is idempotent: a second ensure finds the running pod and creates nothing", async () => {
    api.requests.length = 0;
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    const r = await p.ensureRunner(workspace);
    assert.equal(r.action, "exists");
    assert.equal(api.store.size, 2);
    assert.deepEqual(
      api.requests.map((q) => q.method),
      ["POST", "POST", "GET"],
      "409 on create, then a read of the pod",
    );
  });

  it("replaces a pod that has ended", async () => {
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    const podKey = `pods/webcodex-runners/${runnerPodName(template, workspace)}`;
    api.store.get(podKey)!.status = { phase: "Failed" };
    api.requests.length = 0;
    const r = await p.ensureRunner(workspace);
    assert.equal(r.action, "recreated");
    assert.deepEqual(
      api.requests.map((q) => `${q.method} ${q.path.split("/").slice(-1)[0]}`),
      ["POST persistentvolumeclaims", "POST pods", `GET ${r.name}`, `DELETE ${r.name}`, "POST pods"],
    );
    assert.equal(api.store.get(podKey)?.status?.phase, "Pending");
  });

  it("deletes the pod and the PVC when the project is removed, idempotently", async () => {
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    const name = runnerPodName(template, workspace);
    api.requests.length = 0;
    assert.equal(await p.removeRunner(workspace), true);
    assert.deepEqual(
      api.requests.map((q) => `${q.method} ${q.path}`),
      [`DELETE /api/v1/namespaces/webcodex-runners/pods/${name}`, `DELETE /api/v1/namespaces/webcodex-runners/persistentvolumeclaims/${name}-workspace`],
    );
    assert.equal(api.store.size, 0);
    assert.equal(await p.removeRunner(workspace), false, "404s mean already gone");
  });

  it("keeps the workspace PVC when asked, and uses the configured namespace", async () => {
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger, namespace: "other-ns" });
    await p.ensureRunner(workspace);
    api.requests.length = 0;
    assert.equal(await p.removeRunner(workspace, { keepWorkspace: true }), true);
    assert.deepEqual(
      api.requests.map((q) => `${q.method} ${q.path}`),
      [`DELETE /api/v1/namespaces/other-ns/pods/${runnerPodName(template, workspace)}`],
    );
    assert.equal(api.store.size, 1, "the PVC stays");
  });

  it("a created Project from git: the clone source as env and the tenant's credential as a Secret reference, field by field", async () => {
    const withSecrets = parseRunnerPodTemplate({
      ...chartTemplate,
      gitCredentialSecrets: { [workspace.clientId]: "acme-git-credentials" },
      safeToEvict: false,
    });
    const p = await createKubernetesProvisioner({ template: withSecrets, kubeConfig, logger });
    const created = { ...workspace, projectId: "from-git" };
    api.requests.length = 0;
    await p.ensureRunner(created, { source: { git: { url: "https://git.example.com/acme/app.git", ref: "main" } } });
    const pvc = api.requests[0]!.body as { metadata: { name: string; namespace: string }; spec: Record<string, unknown> };
    const pod = api.requests[1]!.body as {
      metadata: { name: string; annotations: Record<string, string> };
      spec: { volumes: unknown[]; containers: Array<{ env: Array<Record<string, unknown>> }> };
    };
    const podName = runnerPodName(withSecrets, created);
    assert.deepEqual([pvc.metadata.name, pvc.metadata.namespace], [`${podName}-workspace`, "webcodex-runners"]);
    assert.deepEqual(pvc.spec, { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "10Gi" } } });
    assert.equal(pod.metadata.name, podName);
    assert.deepEqual(pod.spec.volumes[0], { name: "workspace", persistentVolumeClaim: { claimName: `${podName}-workspace` } });
    assert.equal(pod.metadata.annotations[SAFE_TO_EVICT_ANNOTATION], "false");
    assert.equal(pod.metadata.annotations[TEMPLATE_HASH_ANNOTATION], templateHash(withSecrets));
    assert.deepEqual(pod.spec.containers[0]!.env.slice(-7), [
      { name: "WEBCODEX_RUNNER_CLIENT_ID", value: created.clientId },
      { name: "WEBCODEX_RUNNER_PROJECT_ID", value: "from-git" },
      { name: "WEBCODEX_RUNNER_CLONE_URL", value: "https://git.example.com/acme/app.git" },
      { name: "WEBCODEX_RUNNER_CLONE_REF", value: "main" },
      { name: "WEBCODEX_RUNNER_CLONE_USERNAME", valueFrom: { secretKeyRef: { name: "acme-git-credentials", key: "username" } } },
      { name: "WEBCODEX_RUNNER_CLONE_PASSWORD", valueFrom: { secretKeyRef: { name: "acme-git-credentials", key: "password" } } },
      { name: "WEBCODEX_RUNNER_CLONE_URL_PREFIX", valueFrom: { secretKeyRef: { name: "acme-git-credentials", key: "url_prefix", optional: true } } },
    ]);
    // Another tenant (no Secret named for it) gets no credential reference at all.
    const other = buildRunnerObjects(withSecrets, { clientId: "beta", projectId: "x" }, "webcodex-runners", { git: { url: "https://git.example.com/b.git" } });
    const otherEnv = (other.pod.spec?.containers[0]?.env ?? []).map((e) => e.name);
    const cloneEnv = otherEnv.filter((n) => n.startsWith("WEBCODEX_RUNNER_CLONE_"));
    assert.deepEqual(cloneEnv, ["WEBCODEX_RUNNER_CLONE_URL"]);
    await p.removeRunner(created);
  });

  it("a pod from another template (an upgrade) is replaced; one from this template is kept", async () => {
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    await p.ensureRunner(workspace);
    const key = `pods/webcodex-runners/${runnerPodName(template, workspace)}`;
    const stored = api.store.get(key)!;
    stored.status = { phase: "Running" };
    (stored.metadata as { annotations?: Record<string, string> }).annotations = { [TEMPLATE_HASH_ANNOTATION]: "0000000000000000" };
    api.requests.length = 0;
    assert.equal((await p.ensureRunner(workspace)).action, "recreated");
    assert.deepEqual(
      api.requests.map((q) => q.method),
      ["POST", "POST", "GET", "DELETE", "POST"],
    );
    api.store.get(key)!.status = { phase: "Running" };
    assert.equal((await p.ensureRunner(workspace)).action, "exists");
    await p.removeRunner(workspace);
  });

  it("a Pending pod with an unschedulable condition is runner_unschedulable with that condition; a clone failure is failed with its reason", async () => {
    const p = await createKubernetesProvisioner({ template, kubeConfig, logger });
    assert.deepEqual(await p.provisioningState!(workspace), { state: "unknown" });
    await p.ensureRunner(workspace);
    const key = `pods/webcodex-runners/${runnerPodName(template, workspace)}`;
    const message = "0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims.";
    api.store.get(key)!.status = { phase: "Pending", conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }] } as unknown as {
      phase?: string;
    };
    assert.deepEqual(await p.provisioningState!(workspace), { state: "unschedulable", condition: { type: "PodScheduled", reason: "Unschedulable", message } });
    await p.removeRunner(workspace);
    // Pure mapping of the other causes.
    const waiting = podProvisioningState({
      status: {
        phase: "Pending",
        containerStatuses: [
          {
            name: "runner",
            image: "i",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: "CreateContainerConfigError", message: 'secret "acme-git" not found' } },
          },
        ],
      },
    });
    assert.deepEqual(waiting, {
      state: "unschedulable",
      condition: { type: "ContainerWaiting", reason: "CreateContainerConfigError", message: 'secret "acme-git" not found' },
    });
    const cloneFailed = podProvisioningState({
      status: {
        phase: "Running",
        containerStatuses: [
          {
            name: "runner",
            image: "i",
            imageID: "",
            ready: false,
            restartCount: 1,
            state: { waiting: { reason: "CrashLoopBackOff" } },
            lastState: {
              terminated: { exitCode: 3, message: JSON.stringify({ reason_code: "clone_failed", detail_code: "authentication_failed", message: "refused" }) },
            },
          },
        ],
      },
    });
    assert.equal(cloneFailed.state, "failed");
    assert.deepEqual(cloneFailed.state === "failed" ? [cloneFailed.failure.reason_code, cloneFailed.failure.detail_code] : [], [
      "clone_failed",
      "authentication_failed",
    ]);
    assert.deepEqual(podProvisioningState({ status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] } }), { state: "ready" });
    assert.deepEqual(podProvisioningState({ status: { phase: "Pending" } }), { state: "starting" });
  });

  it("refuses a template that would mount a token or run as root", () => {
    assert.throws(
      () => parseRunnerPodTemplate({ ...chartTemplate, automountServiceAccountToken: true, podSecurityContext: { runAsUser: 0 } }),
      (e: unknown) => e instanceof Error && /automountServiceAccountToken/.test(e.message) && /runAsNonRoot/.test(e.message) && /runAsUser/.test(e.message),
    );
    assert.throws(() => parseRunnerPodTemplate({ ...chartTemplate, resources: {} }), /limits/);
  });
});
