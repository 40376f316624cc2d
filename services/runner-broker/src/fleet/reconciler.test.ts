/**
 * The fleet reconciler and leader election against the fake Kubernetes API server.
 * One concept over 400 lines: the reconciler's contract (ownership, orphans, idle stop, rotation,
 * quota, pod conditions, watch loss, leadership), against one fake cluster.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeConfig } from "@kubernetes/client-node";
import { createLogger } from "@webcodex/platform";
import { canonicalProjectId } from "@webcodex/contracts";
import { fakeKubeConfig, startFakeKubeApi } from "../testing/fake-kube-api.js";
import type { FakeKubeApi, KubeObject } from "../testing/fake-kube-api.js";
import { testRunnerPodTemplate } from "../testing/runner-template.js";
import { startTestFleet } from "../testing/test-fleet.js";
import { runnerPodName, TEMPLATE_HASH_ANNOTATION, templateHash } from "../provisioning/kubernetes.js";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";
import { CREDENTIAL_FINGERPRINT_ANNOTATION, createFleetReconciler } from "./reconciler.js";
import type { FleetReconcilerOptions } from "./reconciler.js";
import { createLeaderElector } from "./leader.js";

const logger = createLogger({ service: "test", level: "silent" });
const NS = "runners";

const baseTemplate = (image?: string) => testRunnerPodTemplate({ namespace: NS, image });

const ws = (tenant: string, project: string): ProjectWorkspace => ({ clientId: tenant, projectId: project });
const until = async (cond: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe("fleet reconciler", () => {
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  before(async () => {
    api = await startFakeKubeApi({ autoRunPods: true });
    kubeConfig = await fakeKubeConfig(api);
  });
  after(() => api.close());
  const runnerPods = () => api.list("pods", NS, "app.kubernetes.io/component=runner");
  const reset = () => {
    for (const p of [...api.objects.keys()]) {
      const [plural, ns, name] = p.split("/");
      api.remove(plural!, ns!, name!);
    }
  };
  const make = (o: Partial<FleetReconcilerOptions> & { projects: () => Promise<ProjectWorkspace[]> }) =>
    createFleetReconciler({ kubeConfig, template: baseTemplate(), anchorName: "wcx-runner-anchor", logger, debounceMs: 20, ...o });

  it("creates a called Project's Runner owned by the anchor, removes orphans, replaces ended pods; deleting the anchor collects every Runner", async () => {
    reset();
    const a = ws("tenant-a", "app");
    const b = ws("tenant-a", "site");
    let projects = [a, b];
    const fleet = await make({ projects: async () => projects, credentialFor: (w) => `cred-${w.projectId}` });
    await fleet.reconcile();
    assert.equal(runnerPods().length, 0, "no call yet: no Runner");
    assert.deepEqual(await fleet.touch(a), { action: "created" });
    assert.deepEqual(await fleet.touch(b), { action: "created" });
    assert.deepEqual(await fleet.touch(a), { action: "exists" });
    const anchor = api.get("configmaps", NS, "wcx-runner-anchor");
    assert.ok(anchor, "the anchor exists");
    const pod = api.get("pods", NS, runnerPodName(baseTemplate(), a))!;
    assert.deepEqual(
      pod.metadata.ownerReferences?.map((r) => [r.kind, r.name, r.uid]),
      [["ConfigMap", "wcx-runner-anchor", anchor.metadata.uid]],
    );
    assert.equal(pod.metadata.annotations?.[TEMPLATE_HASH_ANNOTATION], templateHash(baseTemplate()));
    assert.ok(pod.metadata.annotations?.[CREDENTIAL_FINGERPRINT_ANNOTATION]);
    const secret = api.get("secrets", NS, `${pod.metadata.name}-credential`)!;
    assert.equal(secret.metadata.ownerReferences?.[0]?.uid, anchor.metadata.uid);

    // Project b is deleted: its pod and Secret are orphans.
    projects = [a];
    // A pod of another release is never touched.
    api.put("pods", {
      metadata: { name: "other-release-runner", namespace: NS, labels: { "app.kubernetes.io/instance": "other", "app.kubernetes.io/component": "runner" } },
    });
    let r = await fleet.reconcile();
    assert.equal(r.deletedOrphans, 1);
    assert.deepEqual(
      runnerPods()
        .map((p) => p.metadata.name)
        .sort(),
      [pod.metadata.name, "other-release-runner"].sort(),
    );
    assert.equal(api.get("secrets", NS, `${runnerPodName(baseTemplate(), b)}-credential`), undefined);

    // a's pod fails: the next pass replaces it (delete, then create once it is gone).
    api.setPodStatus(NS, pod.metadata.name, { phase: "Failed" });
    await fleet.reconcile(); // the fake deletes at once; the cache saw the status only if watching, so reconcile reads it via relist
    r = await fleet.reconcile();
    const replaced = api.get("pods", NS, pod.metadata.name)!;
    assert.notEqual(replaced.metadata.uid, pod.metadata.uid, "a new pod");
    assert.equal((replaced.status as { phase?: string }).phase, "Running");

    api.remove("configmaps", NS, "wcx-runner-anchor");
    assert.deepEqual(
      runnerPods().map((p) => p.metadata.name),
      ["other-release-runner"],
      "uninstall (anchor gone) collects the release's Runners",
    );
    assert.equal(api.list("secrets", NS).length, 0);
    await fleet.stop();
  });

  it("stops an idle Runner (project and workspace stay, never while busy), and the next call starts it again", async () => {
    reset();
    let t = 1_000_000;
    const a = ws("t", "idle");
    const b = ws("t", "busy");
    const busy = new Set([canonicalProjectId(b.clientId, b.projectId)]);
    const fleet = await make({ projects: async () => [a, b], idleTimeoutMs: 60_000, now: () => t, busy: (id) => busy.has(id) });
    await fleet.touch(a);
    await fleet.touch(b);
    api.put("persistentvolumeclaims", { metadata: { name: `${runnerPodName(baseTemplate(), a)}-workspace`, namespace: NS } });
    t += 30_000;
    assert.equal((await fleet.reconcile()).stoppedIdle, 0, "within the idle window");
    t += 31_000;
    const r = await fleet.reconcile();
    assert.equal(r.stoppedIdle, 1, "a stopped, busy b kept");
    assert.equal(api.get("pods", NS, runnerPodName(baseTemplate(), a)), undefined);
    assert.ok(api.get("pods", NS, runnerPodName(baseTemplate(), b)));
    assert.ok(api.get("persistentvolumeclaims", NS, `${runnerPodName(baseTemplate(), a)}-workspace`), "the workspace stays");
    assert.deepEqual(fleet.status(a), { state: "stopped", detail_code: "runner_idle_stopped" });
    assert.equal((await fleet.reconcile()).created, 0, "a stopped Runner is not restarted without a call");

    assert.deepEqual(await fleet.touch(a), { action: "created" }, "the next call starts it");
    assert.ok(api.get("pods", NS, runnerPodName(baseTemplate(), a)));
    assert.equal(fleet.status(a).state, "ready");
    await fleet.stop();
  });

  it("counts calls every broker replica served (shared call activity): no idle stop while another replica's calls come in; a follower's call starts a stopped Runner", async () => {
    reset();
    let t = 1_000_000;
    const { createMemoryCallActivity } = await import("./activity.js");
    const shared = createMemoryCallActivity(() => t);
    const a = ws("t", "shared");
    const id = canonicalProjectId(a.clientId, a.projectId);
    const leader = await make({ projects: async () => [a], idleTimeoutMs: 60_000, now: () => t, activity: () => shared.all() });
    await leader.touch(a);
    // Calls keep coming in on another replica only (without them the leader's own clock ends at 60 s).
    for (let i = 0; i < 4; i++) {
      t += 30_000;
      shared.note(id);
      assert.equal((await leader.reconcile()).stoppedIdle, 0, `minute ${(i + 1) / 2}: another replica's calls keep it`);
    }
    assert.ok(api.get("pods", NS, runnerPodName(baseTemplate(), a)), "still running after 2 minutes of calls elsewhere");
    // Silence everywhere: stopped after the timeout.
    t += 61_000;
    assert.equal((await leader.reconcile()).stoppedIdle, 1);
    assert.equal(api.get("pods", NS, runnerPodName(baseTemplate(), a)), undefined);
    // A follower's call (recorded in the shared activity) makes the leader's next pass start it.
    t += 1_000;
    shared.note(id);
    assert.equal((await leader.reconcile()).created, 1, "the leader starts the Runner a follower's call asked for");
    assert.ok(api.get("pods", NS, runnerPodName(baseTemplate(), a)));
    await leader.stop();
  });

  it("rotates Runners to a new template with at most maxUnavailable down at a time, never a busy one", async () => {
    reset();
    const projects = ["p1", "p2", "p3", "p4"].map((p) => ws("t", p));
    const busy = new Set<string>([canonicalProjectId("t", "p4")]);
    const v1 = await make({ projects: async () => projects });
    for (const p of projects) await v1.touch(p);
    await v1.stop();
    const v2t = baseTemplate("runner:2");
    const v2 = await make({ projects: async () => projects, template: v2t, maxUnavailable: 1, busy: (id) => busy.has(id) });
    const hashes = () => runnerPods().map((p) => p.metadata.annotations?.[TEMPLATE_HASH_ANNOTATION]);
    let maxDown = 0;
    for (let i = 0; i < 10; i++) {
      const r = await v2.reconcile();
      maxDown = Math.max(maxDown, projects.length - runnerPods().length);
      assert.ok(r.rotated <= 1, "one at a time");
      if (hashes().filter((h) => h === templateHash(v2t)).length === 3 && runnerPods().length === 4) break;
    }
    assert.equal(maxDown, 1);
    assert.deepEqual(hashes().filter((h) => h === templateHash(v2t)).length, 3, "all but the busy one rotated");
    assert.equal(api.get("pods", NS, runnerPodName(v2t, projects[3]!))!.metadata.annotations?.[TEMPLATE_HASH_ANNOTATION], templateHash(baseTemplate()));
    busy.clear();
    for (let i = 0; i < 4; i++) await v2.reconcile();
    assert.ok(
      hashes().every((h) => h === templateHash(v2t)),
      "rotated once idle",
    );
    await v2.stop();
  });

  it("rotates a Runner whose credential changed: its Secret is replaced and its pod recreated", async () => {
    reset();
    const a = ws("t", "rot");
    let key = "k1";
    const fleet = await make({ projects: async () => [a], credentialFor: () => `cred-${key}` });
    await fleet.touch(a);
    const name = runnerPodName(baseTemplate(), a);
    const before1 = api.get("pods", NS, name)!.metadata.uid;
    key = "k2";
    await fleet.reconcile();
    await fleet.reconcile();
    const pod = api.get("pods", NS, name)!;
    assert.notEqual(pod.metadata.uid, before1);
    const data = api.get("secrets", NS, `${name}-credential`)!["data"] as Record<string, string>;
    assert.equal(Buffer.from(data["credential"]!, "base64").toString(), "cred-k2");
    await fleet.stop();
  });

  it("refuses a Runner over the tenant's live-Runner quota with quota_exceeded, limit and use", async () => {
    reset();
    const ps = ["q1", "q2", "q3"].map((p) => ws("small", p));
    const fleet = await make({ projects: async () => [...ps, ws("other", "q1")], quota: { runnersPerTenant: 2 } });
    await fleet.touch(ps[0]!);
    await fleet.touch(ps[1]!);
    const r = await fleet.touch(ps[2]!);
    assert.equal(r.action, "refused");
    assert.equal(r.failure?.reason_code, "quota_exceeded");
    assert.deepEqual(r.failure?.evidence, { quota: "live_runners", limit: 2, use: 2 });
    assert.ok(r.failure?.follow_up, "a follow-up to wait with");
    assert.equal(fleet.status(ps[2]!).detail_code, "quota_exceeded");
    assert.equal((await fleet.touch(ws("other", "q1"))).action, "created", "another tenant is not limited by it");
    assert.equal(runnerPods().length, 3);
    assert.equal((await fleet.reconcile()).refusedQuota, 1, "the pass refuses it too");
    await fleet.stop();
  });

  it("reports each pod condition with its own detail code; pending for a node is starting", async () => {
    reset();
    let t = Date.now();
    const a = ws("t", "cond");
    const fleet = await make({ projects: async () => [a], now: () => t });
    await fleet.start();
    await fleet.touch(a);
    const name = runnerPodName(baseTemplate(), a);
    const expect = async (status: Record<string, unknown>, detail: string | undefined, state: string) => {
      api.setPodStatus(NS, name, status);
      await until(() => fleet.status(a).detail_code === detail && fleet.status(a).state === state);
    };
    await expect(
      { phase: "Pending", containerStatuses: [{ name: "runner", state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 5m" } } }] },
      "runner_crash_loop",
      "failed",
    );
    await expect(
      { phase: "Pending", containerStatuses: [{ name: "runner", state: { waiting: { reason: "ImagePullBackOff", message: "not found" } } }] },
      "runner_image_pull",
      "failed",
    );
    const unsched = {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/3 nodes are available: 3 Insufficient cpu." }],
    };
    await expect(unsched, "runner_waiting_for_node", "starting");
    t += 10 * 60_000;
    await expect(
      { ...unsched, conditions: [{ ...unsched.conditions[0], message: "0/3 nodes are available: 3 Insufficient memory." }] },
      "runner_unschedulable",
      "failed",
    );
    await expect({ phase: "Running", conditions: [{ type: "Ready", status: "True" }] }, undefined, "ready");

    const b = ws("t", "forbidden");
    api.forbidCreate((plural) => plural === "pods", 'pods "x" is forbidden: violates PodSecurity "restricted:latest"');
    assert.equal((await fleet.touch(b)).action, "starting");
    assert.equal(fleet.status(b).detail_code, "runner_create_forbidden");
    assert.match(fleet.status(b).message ?? "", /PodSecurity/);
    api.forbidCreate(undefined);
    await fleet.stop();
  });

  it("recovers from a dropped watch and failing re-lists: later changes are still reconciled", async () => {
    reset();
    const a = ws("t", "w");
    const fleet = await make({ projects: async () => [a] });
    await fleet.start();
    await fleet.touch(a);
    await until(() => api.openWatches() === 1);
    api.failNext(2, 500, (r) => r.method === "GET" && r.path.endsWith("/pods"));
    api.dropWatches();
    const stray: KubeObject = {
      metadata: { name: "wcx-runner-stray", namespace: NS, labels: { "app.kubernetes.io/instance": "wcx", "app.kubernetes.io/component": "runner" } },
    };
    api.put("pods", stray);
    await until(() => api.get("pods", NS, "wcx-runner-stray") === undefined, 10_000);
    assert.ok(fleet.stats().relists >= 2, "it re-listed");
    // The Runner deleted behind its back is recreated from the watch.
    api.remove("pods", NS, runnerPodName(baseTemplate(), a));
    await until(() => api.get("pods", NS, runnerPodName(baseTemplate(), a)) !== undefined);
    await fleet.stop();
  });
});

describe("fleet leader election (coordination.k8s.io Lease)", () => {
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  before(async () => {
    api = await startFakeKubeApi({ autoRunPods: true });
    kubeConfig = await fakeKubeConfig(api);
  });
  after(() => api.close());

  it("two brokers: one reconciles; when it dies the other takes over after the lease lapses", async () => {
    let ta = 1_000_000;
    let tb = 1_000_000;
    const opts = { kubeConfig, namespace: NS, name: "wcx-fleet-leader", leaseDurationMs: 15_000, logger };
    const a = await createLeaderElector({ ...opts, identity: "broker-a", now: () => ta });
    const b = await createLeaderElector({ ...opts, identity: "broker-b", now: () => tb });
    assert.equal(await a.tryAcquireOrRenew(), true);
    assert.equal(await b.tryAcquireOrRenew(), false);
    const w = ws("t", "leader");
    const fa = await createFleetReconciler({
      kubeConfig,
      template: baseTemplate(),
      anchorName: "anchor",
      projects: async () => [w],
      isLeader: a.isLeader,
      logger,
    });
    const fb = await createFleetReconciler({
      kubeConfig,
      template: baseTemplate(),
      anchorName: "anchor",
      projects: async () => [w],
      isLeader: b.isLeader,
      logger,
    });
    api.put("pods", {
      metadata: { name: "wcx-runner-orphan", namespace: NS, labels: { "app.kubernetes.io/instance": "wcx", "app.kubernetes.io/component": "runner" } },
    });
    const before = api.requests.filter((r) => r.method === "DELETE").length;
    assert.equal((await fb.reconcile()).skippedNotLeader, true, "the follower writes nothing");
    assert.equal(api.requests.filter((r) => r.method === "DELETE").length, before);
    assert.equal((await fa.reconcile()).deletedOrphans, 1, "the leader reconciles");

    // a renews within its duration: b still cannot take it.
    ta += 5_000;
    tb += 5_000;
    assert.equal(await a.tryAcquireOrRenew(), true);
    tb += 10_000;
    assert.equal(await b.tryAcquireOrRenew(), false);
    // a dies (no more renewals). Its own clock passes the renew deadline: it stops leading before its next write.
    ta += 11_000;
    assert.equal(a.isLeader(), false);
    assert.equal((await fa.reconcile()).skippedNotLeader, true);
    tb += 6_000; // past a's renewTime + 15 s
    assert.equal(await b.tryAcquireOrRenew(), true);
    const lease = api.get("leases", NS, "wcx-fleet-leader")!;
    assert.equal((lease.spec as { holderIdentity: string; leaseTransitions: number }).holderIdentity, "broker-b");
    assert.equal((lease.spec as { leaseTransitions: number }).leaseTransitions, 1);
    api.put("pods", {
      metadata: { name: "wcx-runner-orphan2", namespace: NS, labels: { "app.kubernetes.io/instance": "wcx", "app.kubernetes.io/component": "runner" } },
    });
    assert.equal((await fb.reconcile()).deletedOrphans, 1, "the new leader reconciles");
    // a comes back: it does not take the Lease from a live holder.
    assert.equal(await a.tryAcquireOrRenew(), false);
    // b stops cleanly: it releases the Lease and a takes it at once.
    await b.stop();
    assert.equal(await a.tryAcquireOrRenew(), true);
    await a.stop();
  });

  it("two replicas racing for a free Lease: exactly one wins", async () => {
    const opts = { kubeConfig, namespace: NS, name: "wcx-race", logger };
    const electors = await Promise.all(["r1", "r2", "r3"].map((identity) => createLeaderElector({ ...opts, identity })));
    const won = await Promise.all(electors.map((e) => e.tryAcquireOrRenew()));
    assert.equal(won.filter(Boolean).length, 1);
    const again = await Promise.all(electors.map((e) => e.tryAcquireOrRenew()));
    assert.deepEqual(again, won, "the winner keeps it");
    for (const e of electors) await e.stop();
  });
});

describe("the Kubernetes provisioner under the fleet", () => {
  let api: FakeKubeApi;
  let kubeConfig: KubeConfig;
  before(async () => {
    api = await startFakeKubeApi({ autoRunPods: true });
    kubeConfig = await fakeKubeConfig(api);
  });
  after(() => api.close());

  it("owns what it creates, knows Projects by their workspace claims, refuses over quota and reports conditions by detail code", async () => {
    const template = baseTemplate();
    const { fleet, p } = await startTestFleet({ kubeConfig, template, quota: { runnersPerTenant: 1 }, logger });
    try {
      const a = ws("tenant", "one");
      await p.ensureRunner(a);
      const pod = api.get("pods", NS, runnerPodName(template, a))!;
      assert.equal(pod.metadata.ownerReferences?.[0]?.uid, api.get("configmaps", NS, "wcx-runner-anchor")?.metadata.uid);
      const claim = api.get("persistentvolumeclaims", NS, `${pod.metadata.name}-workspace`)!;
      assert.deepEqual([claim.metadata.annotations?.["webcodex.dev/client-id"], claim.metadata.annotations?.["webcodex.dev/project-id"]], ["tenant", "one"]);
      await until(() => p.provisioningState !== undefined && fleet.status(a).state === "ready");
      assert.deepEqual(await p.provisioningState!(a), { state: "ready" });
      // The loop knows the Project from its claim: a pass keeps its Runner, and an orphan goes.
      api.put("pods", { metadata: { name: "wcx-runner-nobody", namespace: NS, labels: template.labels } });
      await until(() => api.get("pods", NS, "wcx-runner-nobody") === undefined);
      assert.ok(api.get("pods", NS, pod.metadata.name));

      const b = ws("tenant", "two");
      await p.ensureRunner(b);
      assert.equal(api.get("pods", NS, runnerPodName(template, b)), undefined, "over the quota nothing is created");
      const refused = await p.provisioningState!(b);
      assert.equal(refused.state, "failed");
      assert.equal(refused.state === "failed" && refused.failure.reason_code, "quota_exceeded");

      // The API refuses a pod (Pod Security): the state names it, with the API's message.
      api.forbidCreate((plural) => plural === "pods", 'pods "x" is forbidden: violates PodSecurity "restricted:latest"');
      const c = ws("other", "refused");
      await p.ensureRunner(c);
      const forbidden = await p.provisioningState!(c);
      assert.equal(forbidden.state === "unschedulable" && forbidden.condition.detailCode, "runner_create_forbidden");
      assert.match(forbidden.state === "unschedulable" ? forbidden.condition.message : "", /PodSecurity/);
      api.forbidCreate(undefined);
      api.setPodStatus(NS, pod.metadata.name, {
        phase: "Running",
        containerStatuses: [{ name: "runner", state: { waiting: { reason: "CrashLoopBackOff", message: "back-off" } } }],
      });
      await until(() => fleet.status(a).detail_code === "runner_crash_loop");
      const st = await p.provisioningState!(a);
      assert.equal(st.state === "unschedulable" && st.condition.detailCode, "runner_crash_loop");
    } finally {
      await p.close();
    }
  });
  it("refuses create_project over the tenant's projects and hourly creations quotas, counted from the workspace claims; nothing is created", async () => {
    const { createTenantQuotas } = await import("./tenant-quotas.js");
    const template = baseTemplate();
    let clock = 1_000_000;
    const { p } = await startTestFleet({
      kubeConfig,
      template,
      leaseName: "wcx-fleet-q",
      identity: "broker-q",
      tenantQuotas: createTenantQuotas({ projects: 2, creationsPerHour: 2 }, () => clock),
      logger,
    });
    const claimOf = (w: { clientId: string; projectId: string }) => api.get("persistentvolumeclaims", NS, `${runnerPodName(template, w)}-workspace`);
    try {
      const [one, two, three] = [ws("quota-t", "p1"), ws("quota-t", "p2"), ws("quota-t", "p3")];
      await p.ensureRunner(one, { source: {} });
      await p.ensureRunner(two, { source: {} });
      assert.ok(claimOf(one) && claimOf(two));
      // Ensuring an existing Project again is no creation and is never refused.
      await p.ensureRunner(one, { source: {} });
      assert.notEqual((await p.provisioningState!(one)).state, "failed");
      await p.ensureRunner(three, { source: {} });
      assert.equal(claimOf(three), undefined, "over the projects quota no claim is made");
      assert.equal(api.get("pods", NS, runnerPodName(template, three)), undefined, "and no pod");
      const refused = await p.provisioningState!(three);
      assert.equal(refused.state, "failed");
      assert.equal(refused.state === "failed" && refused.failure.reason_code, "quota_exceeded");
      assert.deepEqual(refused.state === "failed" && refused.failure.evidence, { quota: "projects", limit: 2, use: 2 });
      // Another tenant is not counted against this one.
      await p.ensureRunner(ws("quota-other", "p1"), { source: {} });
      assert.ok(claimOf(ws("quota-other", "p1")));

      // Room again (a project removed with its claim), but two creations this hour: the third waits for the window.
      await p.removeRunner(two);
      assert.equal(claimOf(two), undefined);
      await p.ensureRunner(three, { source: {} });
      const hourly = await p.provisioningState!(three);
      assert.equal(hourly.state === "failed" && hourly.failure.detail_code, "project_creations_per_hour");
      assert.deepEqual(hourly.state === "failed" && { ...hourly.failure.evidence, retry_after_ms: 0 }, {
        quota: "project_creations_per_hour",
        limit: 2,
        use: 2,
        retry_after_ms: 0,
      });
      clock += 3_600_001;
      await p.ensureRunner(three, { source: {} });
      assert.notEqual((await p.provisioningState!(three)).state, "failed");
      assert.ok(claimOf(three), "after the hour the creation goes through");
    } finally {
      await p.close();
    }
  });
});
