/**
 * The Kubernetes warm pool against the fake Kubernetes API server: the pool is filled to its
 * size and refilled after a claim, an ended warm pod is replaced, a claim relabels the pod and
 * its PVC to the Project (and the broker then finds the Project's Runner there), a claim
 * refused by the pod falls back to a cold start, an empty pool falls back to a cold start, and
 * warm pods count against no tenant's quota. The pods' claim RPC is served here by a stand-in
 * that checks the warm token and accepts one claim per pod (the Runner's own claim server is
 * tested in test/integration/kube-warm-claim.test.ts).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import type { KubeConfig } from "@kubernetes/client-node";
import { createLogger, startServiceServer } from "@webcodex/platform";
import type { ServiceServer } from "@webcodex/platform";
import { RunnerWarmService } from "@webcodex/proto";
import type { ClaimRequest } from "@webcodex/proto";
import { fakeKubeConfig, startFakeKubeApi } from "../testing/fake-kube-api.js";
import type { FakeKubeApi } from "../testing/fake-kube-api.js";
import { testRunnerPodTemplate } from "../testing/runner-template.js";
import { startTestFleet } from "../testing/test-fleet.js";
import { runnerPodName } from "../provisioning/kubernetes.js";
import { runnerNames } from "../provisioning/provisioner.js";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";
import { WARM_LABEL, warmToken } from "./warm-pods.js";

const logger = createLogger({ service: "test", level: "silent" });
const NS = "runners";
const KEY = "runner-key";
const template = testRunnerPodTemplate({ namespace: NS });
const ws = (tenant: string, project: string): ProjectWorkspace => ({ clientId: tenant, projectId: project });
const until = async (cond: () => boolean, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe("Kubernetes warm pool", () => {
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  let claimServer: ServiceServer;
  /** Claims the stand-in accepted, by pod; pods whose claim it refuses (a broken Runner). */
  const claims = new Map<string, ClaimRequest>();
  const broken = new Set<string>();
  before(async () => {
    api = await startFakeKubeApi({ autoRunPods: true });
    kubeConfig = await fakeKubeConfig(api);
    claimServer = await startServiceServer({
      name: "warm-stand-in",
      port: 0,
      logger,
      routes: (router) =>
        router.service(RunnerWarmService, {
          claim(req) {
            const pod = api.list("pods", NS).find((p) => req.warmToken === warmToken(KEY, p.metadata.name));
            if (!pod) throw new ConnectError("the warm token is not this Runner's", Code.Unauthenticated);
            if (broken.has(pod.metadata.name)) throw new ConnectError("broken", Code.Internal);
            if (claims.has(pod.metadata.name)) throw new ConnectError("this Runner is claimed already", Code.FailedPrecondition);
            claims.set(pod.metadata.name, req);
            return { runner: pod.metadata.name };
          },
        }),
    });
  });
  after(async () => {
    await claimServer.close();
    await api.close();
  });
  const reset = () => {
    for (const k of [...api.objects.keys()]) {
      const [plural, ns, name] = k.split("/");
      api.remove(plural!, ns!, name!);
    }
    claims.clear();
    broken.clear();
  };
  const warmPods = () => api.list("pods", NS, `${WARM_LABEL}=true`);

  const start = (size: number, quota = {}) =>
    startTestFleet({
      kubeConfig,
      template,
      quota,
      credentialFor: (w) => `cred-${w.projectId}`,
      warmPool: { size, tokenFor: (pod) => warmToken(KEY, pod), address: () => claimServer.url },
      logger,
    });

  it("fills the pool to its size with pod + PVC + warm Secret triples owned by the anchor, with no project identity", async () => {
    reset();
    const { fleet, p } = await start(2);
    try {
      await until(() => fleet.warmReady() === 2);
      const pods = warmPods();
      assert.equal(pods.length, 2);
      const anchor = api.get("configmaps", NS, "wcx-runner-anchor")!.metadata.uid;
      for (const pod of pods) {
        const name = pod.metadata.name;
        assert.match(name, /^wcx-runner-warm-[0-9a-f]{10}$/);
        assert.equal(pod.metadata.labels?.[template.projectLabelKey], undefined, "no project label");
        assert.equal(pod.metadata.labels?.[template.tenantLabelKey], undefined, "no tenant label");
        assert.equal(pod.metadata.ownerReferences?.[0]?.uid, anchor);
        const c = (pod.spec!["containers"] as Array<{ env: Array<{ name: string; value?: string }> }>)[0]!;
        const env = Object.fromEntries(c.env.map((e) => [e.name, e.value]));
        assert.equal(env["WEBCODEX_RUNNER_WARM"], "1");
        assert.equal(env["WEBCODEX_RUNNER_PROJECT_ID"], undefined);
        const volumes = pod.spec!["volumes"] as Array<{ name: string; persistentVolumeClaim?: { claimName: string } }>;
        assert.equal(
          volumes.find((v) => v.name === "workspace")?.persistentVolumeClaim?.claimName,
          `${name}-workspace`,
          "the pod mounts its own PVC from the start",
        );
        assert.ok(api.get("persistentvolumeclaims", NS, `${name}-workspace`), "its PVC exists");
        const secret = api.get("secrets", NS, `${name}-warm`)!;
        assert.equal(
          Buffer.from((secret["data"] as Record<string, string>)["token"]!, "base64").toString(),
          warmToken(KEY, name),
          "its warm token is minted into its own Secret",
        );
      }
      // A pass with the pool full makes nothing more.
      const r = await fleet.reconcile();
      assert.equal(r.warmCreated, 0);
      assert.equal(warmPods().length, 2);
    } finally {
      await p.close();
    }
  });

  it("create_project claims a warm pod: the pod and PVC are relabelled to the Project, its credential sent and put in a Secret; the pool refills; the broker finds the Runner there", async () => {
    reset();
    const { fleet, p } = await start(1);
    try {
      await until(() => fleet.warmReady() === 1);
      const warmName = warmPods()[0]!.metadata.name;
      const a = ws("tenant-a", "app");
      const r = await p.ensureRunner(a, { source: {} });
      assert.deepEqual(r, { action: "created", name: warmName });
      assert.equal(api.get("pods", NS, runnerPodName(template, a)), undefined, "no cold pod was made");
      const sent = claims.get(warmName)!;
      assert.deepEqual([sent.clientId, sent.projectId, sent.credential], ["tenant-a", "app", "cred-app"]);
      const n = runnerNames(a);
      const pod = api.get("pods", NS, warmName)!;
      assert.equal(pod.metadata.labels?.[WARM_LABEL], undefined);
      assert.equal(pod.metadata.labels?.[template.projectLabelKey], n.projectLabel);
      assert.equal(pod.metadata.labels?.[template.tenantLabelKey], n.tenantLabel);
      assert.equal(pod.metadata.annotations?.["webcodex.dev/project-id"], "app");
      assert.ok(pod.metadata.annotations?.["webcodex.dev/credential-fingerprint"], "the credential's fingerprint, as a cold pod has");
      assert.equal(pod.metadata.ownerReferences?.[0]?.name, "wcx-runner-anchor");
      const pvc = api.get("persistentvolumeclaims", NS, `${warmName}-workspace`)!;
      assert.equal(pvc.metadata.labels?.[template.projectLabelKey], n.projectLabel);
      assert.deepEqual([pvc.metadata.annotations?.["webcodex.dev/client-id"], pvc.metadata.annotations?.["webcodex.dev/project-id"]], ["tenant-a", "app"]);
      assert.equal(pvc.metadata.ownerReferences, undefined, "a Project's workspace outlives the release, as a cold one does");
      const cred = api.get("secrets", NS, `${warmName}-credential`)!;
      assert.equal(Buffer.from((cred["data"] as Record<string, string>)["credential"]!, "base64").toString(), "cred-app");
      assert.equal(api.get("secrets", NS, `${warmName}-warm`), undefined, "the warm token is gone with the claim");

      // The broker's view: the Project's Runner is that pod (ready), the next ensure keeps it, and passes keep it.
      assert.deepEqual(await p.provisioningState!(a), { state: "ready" });
      assert.deepEqual(await p.ensureRunner(a), { action: "exists", name: warmName });
      const pass = await fleet.resync();
      assert.equal(pass.deletedOrphans, 0);
      assert.ok(api.get("pods", NS, warmName), "a pass keeps the claimed pod (known by its project label)");
      assert.equal(api.get("pods", NS, runnerPodName(template, a)), undefined);
      // The pool refilled.
      await until(() => fleet.warmReady() === 1 && warmPods().every((w) => w.metadata.name !== warmName));

      // Stopped (rotated, crashed away): the Project's next pod mounts the claimed volume, not a new one.
      api.remove("pods", NS, warmName);
      await until(() => api.get("pods", NS, runnerPodName(template, a)) !== undefined);
      const cold = api.get("pods", NS, runnerPodName(template, a))!;
      const vols = cold.spec!["volumes"] as Array<{ name: string; persistentVolumeClaim?: { claimName: string } }>;
      assert.equal(vols.find((v) => v.name === "workspace")?.persistentVolumeClaim?.claimName, `${warmName}-workspace`);
      assert.equal(api.get("persistentvolumeclaims", NS, `${runnerPodName(template, a)}-workspace`), undefined, "no second volume");

      // Removing the Project removes its pod and the claimed volume.
      assert.equal(await p.removeRunner(a), true);
      assert.equal(api.get("persistentvolumeclaims", NS, `${warmName}-workspace`), undefined);
    } finally {
      await p.close();
    }
  });

  it("replaces a warm pod that ended; a claim the pod refuses discards it and starts the Project cold; an empty pool starts cold", async () => {
    reset();
    const { fleet, p } = await start(1);
    try {
      await until(() => fleet.warmReady() === 1);
      const first = warmPods()[0]!.metadata.name;
      api.setPodStatus(NS, first, { phase: "Failed" });
      await until(() => api.get("pods", NS, first) === undefined && fleet.warmReady() === 1);
      assert.equal(api.get("persistentvolumeclaims", NS, `${first}-workspace`), undefined, "its PVC went with it");
      assert.equal(api.get("secrets", NS, `${first}-warm`), undefined);

      const second = warmPods()[0]!.metadata.name;
      broken.add(second);
      const b = ws("tenant-b", "svc");
      assert.deepEqual(await p.ensureRunner(b, { source: {} }), { action: "created", name: runnerPodName(template, b) });
      assert.equal(api.get("pods", NS, second), undefined, "a pod that refused its claim is discarded");
      assert.ok(api.get("persistentvolumeclaims", NS, `${runnerPodName(template, b)}-workspace`), "the cold path made the Project's own volume");

      // No Ready warm pod (the replacement is still starting): cold at once.
      await until(() => warmPods().length === 1);
      const starting = warmPods()[0]!.metadata.name;
      api.setPodStatus(NS, starting, { phase: "Pending" });
      await until(() => fleet.warmReady() === 0);
      const c = ws("tenant-b", "web");
      assert.deepEqual(await p.ensureRunner(c, { source: {} }), { action: "created", name: runnerPodName(template, c) });
      assert.equal(claims.size, 0, "nothing was claimed");
      assert.ok(api.get("pods", NS, starting), "the starting warm pod stays in the pool");
    } finally {
      await p.close();
    }
  });

  it("a smaller pool size (a broker restarted with new values) removes the extra warm pods with their PVCs and Secrets", async () => {
    reset();
    const big = await start(2);
    await until(() => big.fleet.warmReady() === 2);
    await big.p.close();
    const names = warmPods().map((p) => p.metadata.name);
    const small = await start(1);
    try {
      await until(() => warmPods().length === 1);
      const gone = names.filter((n) => !api.get("pods", NS, n));
      assert.equal(gone.length, 1);
      assert.equal(api.get("persistentvolumeclaims", NS, `${gone[0]}-workspace`), undefined);
      assert.equal(api.get("secrets", NS, `${gone[0]}-warm`), undefined);
      assert.equal(small.fleet.warmReady(), 1);
    } finally {
      await small.p.close();
    }
  });

  it("warm pods count against no tenant's live-Runner quota; a claimed one counts like any Runner", async () => {
    reset();
    const { fleet, p } = await start(3, { runnersPerTenant: 1 });
    try {
      await until(() => fleet.warmReady() === 3);
      const a = ws("tenant-q", "one");
      assert.equal(fleet.admit(a), undefined, "three warm pods, none counted");
      const r = await p.ensureRunner(a, { source: {} });
      assert.match(r.name, /^wcx-runner-warm-/);
      await until(() => fleet.warmReady() === 3);
      const b = ws("tenant-q", "two");
      await p.ensureRunner(b, { source: {} });
      const refused = await p.provisioningState!(b);
      assert.equal(refused.state === "failed" && refused.failure.reason_code, "quota_exceeded");
      assert.deepEqual(refused.state === "failed" && refused.failure.evidence, { quota: "live_runners", limit: 1, use: 1 });
      assert.equal(claims.size, 1, "the refused Project claimed nothing");
      assert.equal(fleet.admit(ws("tenant-other", "x")), undefined, "another tenant is not held back by the pool");
    } finally {
      await p.close();
    }
  });
});
