// Chart checks of the operations items: image digests, the metrics port, process-local
// readiness, the shutdown drain, migration timing, the Runner admission policy and the gateway's
// allocator setting
// (run: node --test tools/chart/). helm comes from fetch-helm.sh.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { validateObject } from "./k8s-validate.mjs";
import {
  root,
  productionValues,
  NAMESPACE,
  template,
  templateError,
  rendered,
  byKind,
  component,
  find,
  brokerCode,
  runnerTemplate,
  envOf,
} from "./chart-harness.mjs";

const SHA = (c) => `sha256:${c.repeat(64)}`;
const IMAGES = { gateway: "a", "tool-registry": "b", "ref-resolver": "c", audit: "d", "runner-broker": "e", runner: "f" };

describe("image.digests: images referenced by digest", () => {
  test("every container the chart runs, and the Runner pod the broker builds, carries its image's digest", async () => {
    const set = Object.entries(IMAGES).flatMap(([name, c]) => ["--set", `image.digests.${name}=${SHA(c)}`]);
    const objs = await template(set);
    const images = [];
    for (const o of objs) {
      const spec = o.kind === "Deployment" || o.kind === "Job" ? o.spec.template.spec : o.kind === "Pod" ? o.spec : undefined;
      for (const c of spec?.containers ?? []) images.push(c.image);
    }
    const { parseRunnerPodTemplate, buildRunnerObjects } = brokerCode();
    const { pod } = buildRunnerObjects(parseRunnerPodTemplate(runnerTemplate(objs)), { clientId: "t", projectId: "p" });
    images.push(pod.spec.containers[0].image);
    assert.ok(images.length >= 8);
    for (const image of images) {
      const name = image.match(/\/([a-z-]+):[^@]+@/)?.[1];
      assert.ok(name in IMAGES, `${image} is referenced by digest`);
      assert.ok(image.endsWith(`@${SHA(IMAGES[name])}`), `${image} carries ${name}'s own digest`);
    }
    const plain = await rendered("defaults");
    const gw = find(plain, "Deployment", "gateway").spec.template.spec.containers[0].image;
    assert.ok(!gw.includes("@"), "control: no digest unless set");
    const override = find(await template([...set, "--set", "gateway.image=registry.example/gw:1"]), "Deployment", "gateway");
    assert.equal(override.spec.template.spec.containers[0].image, "registry.example/gw:1", "a component's own image override wins");
  });

  test("the schema takes only sha256 digests of the chart's images", async () => {
    assert.match(await templateError(["--set", "image.digests.gateway=sha256:abc"]), /digests|pattern/);
    assert.match(await templateError(["--set", `image.digests.postgres=${SHA("a")}`]), /digests|postgres/);
  });
});

describe("metrics port, process-local readiness, shutdown drain", () => {
  test("metrics are on their own port, which the Service's http port (the one the Ingress routes to) is not", async () => {
    const objs = await rendered("production");
    const ingress = byKind(objs, "Ingress");
    assert.equal(ingress.length, 1, "production renders the gateway Ingress");
    const backendPorts = ingress[0].spec.rules.flatMap((r) => r.http.paths.map((p) => p.backend.service.port));
    assert.deepEqual([...new Set(backendPorts.map((p) => p.name))], ["http"]);
    for (const d of byKind(objs, "Deployment")) {
      const [c] = d.spec.template.spec.containers;
      const metrics = c.ports.find((p) => p.name === "metrics");
      const http = c.ports.find((p) => p.name === "http");
      assert.ok(metrics && metrics.containerPort !== http.containerPort, `${component(d)}: a separate metrics port`);
      assert.equal(envOf(c).WEBCODEX_METRICS_PORT.value, String(metrics.containerPort));
      const svc = find(objs, "Service", component(d));
      assert.equal(svc.spec.ports.find((p) => p.name === "metrics").targetPort, "metrics");
      assert.equal(svc.spec.ports.find((p) => p.name === "http").targetPort, "http");
    }
    const gwNp = find(objs, "NetworkPolicy", "gateway");
    const publicRule = gwNp.spec.ingress[0];
    assert.deepEqual(
      publicRule.ports.map((p) => p.port),
      [8080],
      "the gateway's public rule opens the service port only",
    );
    const annotated = await template(["--set", "metrics.podAnnotations=true", "--set", "networkPolicy.enabled=false", "--set", "metrics.port=9300"]);
    for (const d of byKind(annotated, "Deployment")) assert.equal(d.spec.template.metadata.annotations["prometheus.io/port"], "9300");
  });

  test("readiness is process-local by default (dependency health stays a diagnostic); probes.readiness=dependencies restores it", async () => {
    for (const d of byKind(await rendered("defaults"), "Deployment")) {
      const [c] = d.spec.template.spec.containers;
      assert.equal(envOf(c).WEBCODEX_READINESS.value, "process", component(d));
      assert.equal(c.readinessProbe.httpGet.path, "/readyz");
      assert.equal(c.livenessProbe.httpGet.path, "/healthz");
    }
    for (const d of byKind(await template(["--set", "probes.readiness=dependencies"]), "Deployment")) {
      assert.equal(envOf(d.spec.template.spec.containers[0]).WEBCODEX_READINESS.value, "dependencies");
    }
    assert.match(await templateError(["--set", "probes.readiness=redis"]), /readiness/);
  });

  test("grace = preStop + drain + 5 s; gateway and broker drain longer than a dispatched call may run; preStop 0 renders no hook", async () => {
    const objs = await rendered("defaults");
    const v = { gateway: 690, "runner-broker": 690, "tool-registry": 25, "ref-resolver": 25, audit: 25 };
    const dispatchS = Number(envOf(find(objs, "Deployment", "runner-broker").spec.template.spec.containers[0]).WEBCODEX_DISPATCH_TIMEOUT_MS.value) / 1000;
    for (const d of byKind(objs, "Deployment")) {
      const spec = d.spec.template.spec;
      const [c] = spec.containers;
      const drain = Number(envOf(c).WEBCODEX_SHUTDOWN_DRAIN_MS.value) / 1000;
      assert.equal(drain, v[component(d)], component(d));
      assert.deepEqual(c.lifecycle.preStop.exec.command, ["node", "-e", "setTimeout(() => {}, 5000)"]);
      assert.equal(spec.terminationGracePeriodSeconds, 5 + drain + 5);
      if (["gateway", "runner-broker"].includes(component(d))) assert.ok(drain > dispatchS, `${component(d)} drains past the ${dispatchS} s dispatch timeout`);
    }
    const tuned = find(await template(["--set", "gateway.shutdown.preStopSeconds=0", "--set", "gateway.shutdown.drainSeconds=1200"]), "Deployment", "gateway");
    assert.equal(tuned.spec.template.spec.containers[0].lifecycle, undefined);
    assert.equal(tuned.spec.template.spec.terminationGracePeriodSeconds, 1205);
    assert.equal(envOf(tuned.spec.template.spec.containers[0]).WEBCODEX_SHUTDOWN_DRAIN_MS.value, "1200000");
  });
});

describe("migration timing", () => {
  test("the default hook deadline fits helm's default 5m timeout; one that does not fit fails the render with a clear message", async () => {
    const job = find(await rendered("defaults"), "Job", "migrate");
    assert.ok(job.spec.activeDeadlineSeconds < 300, `${job.spec.activeDeadlineSeconds} s < helm's default 300 s`);
    const err = await templateError(["--set", "migrations.activeDeadlineSeconds=600"]);
    assert.match(err, /migrations\.activeDeadlineSeconds \(600\) does not fit in helm's --timeout \(300 s, migrations\.helmTimeoutSeconds/);
    const longer = find(await template(["--set", "migrations.activeDeadlineSeconds=600", "--set", "migrations.helmTimeoutSeconds=1200"]), "Job", "migrate");
    assert.equal(longer.spec.activeDeadlineSeconds, 600);
  });
});

describe("runner.admissionPolicy: a ValidatingAdmissionPolicy pinning broker-created pods to the template", () => {
  test("off by default; on, it matches the broker's ServiceAccount in the runner namespace and pins what the broker's own pod carries", async () => {
    assert.deepEqual(byKind(await rendered("production"), "ValidatingAdmissionPolicy"), []);
    const objs = await template(["-f", productionValues, "--set", "runner.admissionPolicy.enabled=true"]);
    const [policy] = byKind(objs, "ValidatingAdmissionPolicy");
    const [binding] = byKind(objs, "ValidatingAdmissionPolicyBinding");
    assert.ok(policy && binding);
    for (const o of [policy, binding]) assert.deepEqual(await validateObject(o), [], `${o.kind} is valid for its schema`);
    assert.equal(binding.spec.policyName, policy.metadata.name);
    assert.deepEqual(binding.spec.validationActions, ["Deny"]);
    assert.equal(policy.spec.failurePolicy, "Fail");
    const t = runnerTemplate(objs);
    assert.deepEqual(binding.spec.matchResources.namespaceSelector, { matchLabels: { "kubernetes.io/metadata.name": t.namespace } });
    const brokerSa = find(objs, "Deployment", "runner-broker").spec.template.spec.serviceAccountName;
    assert.deepEqual(policy.spec.matchConditions, [
      { name: "created-by-the-broker", expression: `request.userInfo.username == "system:serviceaccount:${NAMESPACE}:${brokerSa}"` },
    ]);
    assert.deepEqual(policy.spec.matchConstraints.resourceRules, [
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"] },
    ]);
    // The literals the policy pins are what the broker puts on a Runner pod built from the same template.
    const { pod } = brokerCode().buildRunnerObjects(brokerCode().parseRunnerPodTemplate(t), { clientId: "acme", projectId: "app" });
    const exprs = policy.spec.validations.map((v) => v.expression).join("\n");
    const [c] = pod.spec.containers;
    assert.ok(exprs.includes(`c.image == ${JSON.stringify(c.image)}`), "the Runner image");
    assert.ok(exprs.includes(`c.args == ${JSON.stringify(c.args)}`), "the Runner command");
    assert.ok(exprs.includes(`object.spec.serviceAccountName == ${JSON.stringify(pod.spec.serviceAccountName)}`));
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.ok(exprs.includes(`object.spec.runtimeClassName == ${JSON.stringify(pod.spec.runtimeClassName)}`), "the sandbox runtime class");
    assert.ok(exprs.includes(`runAsUser == ${pod.spec.securityContext.runAsUser}`));
    assert.equal(pod.metadata.labels["app.kubernetes.io/component"], "runner");
    assert.ok(exprs.includes(`object.metadata.labels['app.kubernetes.io/instance'] == ${JSON.stringify(pod.metadata.labels["app.kubernetes.io/instance"])}`));
    assert.equal(pod.spec.initContainers, undefined, "the broker's pod has no init container, which the policy refuses");
    for (const v of policy.spec.validations) assert.ok(v.message, "every rule says what it refuses");
    // A new image rolls the policy with the template.
    const bumped = byKind(
      await template(["-f", productionValues, "--set", "runner.admissionPolicy.enabled=true", "--set", "image.tag=9.9.9"]),
      "ValidatingAdmissionPolicy",
    )[0];
    assert.match(bumped.spec.validations.map((v) => v.expression).join("\n"), /runner:9\.9\.9"/);
  });
});

describe("runner.fleet.quota.concurrentJobsPerTenant", () => {
  test("reaches every broker replica, with or without the reconciler; 0 (unlimited) by default", async () => {
    const brokerEnv = async (set) => envOf(find(await template(set), "Deployment", "runner-broker").spec.template.spec.containers[0]);
    assert.equal((await brokerEnv([])).WEBCODEX_FLEET_QUOTA_CONCURRENT_JOBS_PER_TENANT.value, "0");
    assert.equal((await brokerEnv(["--set", "runner.fleet.quota.concurrentJobsPerTenant=4"])).WEBCODEX_FLEET_QUOTA_CONCURRENT_JOBS_PER_TENANT.value, "4");
    const noFleet = await brokerEnv(["--set", "runner.fleet.quota.concurrentJobsPerTenant=4", "--set", "runner.fleet.enabled=false"]);
    assert.equal(noFleet.WEBCODEX_FLEET_QUOTA_CONCURRENT_JOBS_PER_TENANT.value, "4");
    assert.match(await templateError(["--set", "runner.fleet.quota.concurrentJobsPerTenant=-1"]), /concurrentJobsPerTenant|minimum/);
  });
});

describe("docs/sizing.md and the production example agree", () => {
  test("the example ResourceQuota admits the Runners sizing.md plans for, all live at once", async () => {
    const sizing = readFileSync(join(root, "docs/sizing.md"), "utf8");
    const planned = Number(sizing.match(/plan for (\d+) PVCs/)?.[1]);
    assert.ok(planned > 0, "sizing.md states how many workspaces it plans for");
    const objs = await rendered("production");
    const quota = byKind(objs, "ResourceQuota")[0];
    assert.ok(quota, "the production example renders the Runner ResourceQuota");
    const { pod, pvc } = brokerCode().buildRunnerObjects(brokerCode().parseRunnerPodTemplate(runnerTemplate(objs)), { clientId: "t", projectId: "p" });
    const qty = (v) => {
      const m = String(v).match(/^([0-9.]+)(m|Ki|Mi|Gi|Ti)?$/);
      return Number(m[1]) * (m[2] ? { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }[m[2]] : 1);
    };
    const hard = quota.spec.hard;
    assert.ok(Number(hard.pods) >= planned, `pods ${hard.pods} >= ${planned}`);
    assert.ok(Number(hard.persistentvolumeclaims) >= planned);
    assert.ok(qty(hard["requests.storage"]) >= planned * qty(pvc.spec.resources.requests.storage), "storage for every workspace");
    const limits = pod.spec.containers[0].resources.limits;
    assert.ok(qty(hard["limits.cpu"]) >= planned * qty(limits.cpu), `limits.cpu ${hard["limits.cpu"]} for ${planned} Runners at ${limits.cpu}`);
    assert.ok(qty(hard["limits.memory"]) >= planned * qty(limits.memory), `limits.memory ${hard["limits.memory"]} for ${planned} Runners at ${limits.memory}`);
  });
});

describe("gateway allocator", () => {
  test("the gateway starts with MALLOC_MMAP_THRESHOLD_=16384 (a request flood leaves no grown heap), once, unless gateway.extraEnv sets it", async () => {
    const gatewayEnv = (objs) => find(objs, "Deployment", "gateway").spec.template.spec.containers[0].env.filter((e) => e.name === "MALLOC_MMAP_THRESHOLD_");
    assert.deepEqual(gatewayEnv(await rendered("defaults")), [{ name: "MALLOC_MMAP_THRESHOLD_", value: "16384" }]);
    const own = await template(["--set", "gateway.extraEnv[0].name=MALLOC_MMAP_THRESHOLD_", "--set-string", "gateway.extraEnv[0].value=65536"]);
    assert.deepEqual(gatewayEnv(own), [{ name: "MALLOC_MMAP_THRESHOLD_", value: "65536" }]);
    for (const service of ["tool-registry", "ref-resolver", "audit", "runner-broker"]) {
      const env = find(await rendered("defaults"), "Deployment", service).spec.template.spec.containers[0].env;
      assert.equal(
        env.find((e) => e.name === "MALLOC_MMAP_THRESHOLD_"),
        undefined,
        `${service} keeps glibc's default`,
      );
    }
  });
});
