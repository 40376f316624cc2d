/** The fake Kubernetes API server, driven through @kubernetes/client-node as the broker drives a cluster. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ApiException, CoordinationV1Api, CoreV1Api, Watch } from "@kubernetes/client-node";
import { fakeKubeConfig, parseLabelSelector, startFakeKubeApi } from "./fake-kube-api.js";
import type { FakeKubeApi } from "./fake-kube-api.js";

const ns = "runners";
const code = (e: unknown) => (e instanceof ApiException ? e.code : -1);

describe("fake Kubernetes API server", () => {
  let api: FakeKubeApi;
  let core: CoreV1Api;
  let coord: CoordinationV1Api;
  let watch: Watch;
  before(async () => {
    api = await startFakeKubeApi({ eventWindow: 50 });
    const kc = await fakeKubeConfig(api);
    core = kc.makeApiClient(CoreV1Api);
    coord = kc.makeApiClient(CoordinationV1Api);
    watch = new Watch(kc);
  });
  after(() => api.close());

  it("creates, reads, lists by label selector and refuses a second create with 409", async () => {
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "a", labels: { app: "r", tier: "x" } } } });
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "b", labels: { app: "r", tier: "y" } } } });
    await core.createNamespacedPod({ namespace: "other", body: { metadata: { name: "c", labels: { app: "r" } } } });
    const a = await core.readNamespacedPod({ name: "a", namespace: ns });
    assert.ok(a.metadata?.uid && a.metadata.resourceVersion);
    assert.equal(a.status?.phase, "Pending");
    const names = async (labelSelector: string) => (await core.listNamespacedPod({ namespace: ns, labelSelector })).items.map((p) => p.metadata?.name).sort();
    assert.deepEqual(await names("app=r"), ["a", "b"]);
    assert.deepEqual(await names("app=r,tier!=x"), ["b"]);
    assert.deepEqual(await names("tier in (x, z)"), ["a"]);
    assert.deepEqual(await names("!tier"), []);
    await assert.rejects(core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "a" } } }), (e) => code(e) === 409);
    await assert.rejects(core.readNamespacedPod({ name: "zz", namespace: ns }), (e) => code(e) === 404);
    await assert.rejects(core.listNamespacedPod({ namespace: ns, labelSelector: "a in b" }), (e) => code(e) === 400);
  });

  it("refuses a replace carrying a stale resourceVersion with 409 (optimistic concurrency)", async () => {
    await coord.createNamespacedLease({ namespace: ns, body: { metadata: { name: "l" }, spec: { holderIdentity: "one" } } });
    const first = await coord.readNamespacedLease({ name: "l", namespace: ns });
    await coord.replaceNamespacedLease({ name: "l", namespace: ns, body: { ...first, spec: { holderIdentity: "two" } } });
    await assert.rejects(
      coord.replaceNamespacedLease({ name: "l", namespace: ns, body: { ...first, spec: { holderIdentity: "three" } } }),
      (e) => code(e) === 409,
    );
    assert.equal((await coord.readNamespacedLease({ name: "l", namespace: ns })).spec?.holderIdentity, "two");
  });

  it("garbage-collects dependents when their owner is deleted", async () => {
    const owner = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "anchor" } } });
    const ref = [{ apiVersion: "v1", kind: "ConfigMap", name: "anchor", uid: owner.metadata!.uid! }];
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "owned", ownerReferences: ref } } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "owned-s", ownerReferences: ref }, stringData: { k: "v" } } });
    assert.equal(api.get("secrets", ns, "owned-s")?.["data"] && (api.get("secrets", ns, "owned-s")!["data"] as Record<string, string>)["k"], "dg==");
    await core.deleteNamespacedConfigMap({ name: "anchor", namespace: ns });
    assert.equal(api.get("pods", ns, "owned"), undefined);
    assert.equal(api.get("secrets", ns, "owned-s"), undefined);
    assert.ok(api.get("pods", ns, "a"), "an object without the owner reference stays");
  });

  it("streams watch events after a resourceVersion, filtered, and answers 410 for one past its window", async () => {
    const list = await core.listNamespacedPod({ namespace: ns, labelSelector: "app=r" });
    const seen: string[] = [];
    let ended: unknown = "open";
    const ctl = await watch.watch(
      `/api/v1/namespaces/${ns}/pods`,
      { labelSelector: "app=r", resourceVersion: list.metadata?.resourceVersion },
      (type, obj: { metadata: { name: string } }) => seen.push(`${type} ${obj.metadata.name}`),
      (err) => (ended = err),
    );
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "w1", labels: { app: "r" } } } });
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "w2", labels: { app: "other" } } } });
    api.setPodStatus(ns, "w1", { phase: "Running" });
    await core.deleteNamespacedPod({ name: "w1", namespace: ns });
    for (let i = 0; i < 100 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(seen, ["ADDED w1", "MODIFIED w1", "DELETED w1"]);
    assert.equal(api.dropWatches(), 1);
    for (let i = 0; i < 100 && ended === "open"; i++) await new Promise((r) => setTimeout(r, 10));
    assert.notEqual(ended, "open", "a dropped watch ends the client's stream");
    ctl.abort();

    for (let i = 0; i < 60; i++) api.put("configmaps", { metadata: { name: `churn-${i}`, namespace: ns } });
    const errors: Array<{ code?: number }> = [];
    await watch.watch(
      `/api/v1/namespaces/${ns}/pods`,
      { resourceVersion: list.metadata?.resourceVersion },
      (type, obj: { code?: number }) => type === "ERROR" && errors.push(obj),
      () => undefined,
    );
    for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(errors[0]?.code, 410);
  });

  it("injects 500s, 403 refusals and latency", async () => {
    api.failNext(2, 500, (r) => r.method === "GET" && r.path.endsWith("/pods"));
    await assert.rejects(core.listNamespacedPod({ namespace: ns }), (e) => code(e) === 500);
    await assert.rejects(core.listNamespacedPod({ namespace: ns }), (e) => code(e) === 500);
    assert.ok((await core.listNamespacedPod({ namespace: ns })).items.length > 0);
    api.forbidCreate((plural) => plural === "pods", 'pods "x" is forbidden: exceeded quota: runners, requested: pods=1, used: pods=5, limited: pods=5');
    await assert.rejects(
      core.createNamespacedPod({ namespace: ns, body: { metadata: { name: "x" } } }),
      (e) => code(e) === 403 && /exceeded quota/.test(String((e as ApiException<string>).body)),
    );
    api.forbidCreate(undefined);
    api.latencyMs = 150;
    const t = performance.now();
    await core.readNamespacedPod({ name: "a", namespace: ns });
    assert.ok(performance.now() - t >= 140);
    api.latencyMs = 0;
  });

  it("parses selectors as the API server does", () => {
    assert.equal(parseLabelSelector("a=1,b notin (2,3)")({ a: "1", b: "4" }), true);
    assert.equal(parseLabelSelector("a=1,b notin (2,3)")({ a: "1", b: "3" }), false);
    assert.equal(parseLabelSelector("a")({}), false);
    assert.throws(() => parseLabelSelector("a b"));
  });
});
