// Chart checks of the fleet items: GitOps renders, the Runner namespace (created by default) and
// its egress, the migration hook, scraping (run: node --test tools/chart/). helm comes from
// fetch-helm.sh; chart-ops.test.mjs has the operations items.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  root,
  chartDir,
  productionValues,
  RELEASE,
  NAMESPACE,
  helmRun,
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

describe("GitOps: renders without a cluster", () => {
  const EXISTING = [
    ["--set", "postgres.url=", "--set", "postgres.existingSecret=pg", "--set", "redis.url=", "--set", "redis.existingSecret=rd"],
    ["--set", "runner.token.existingSecret=runner-key", "--set", "runner.token.existingSecretKey=k1"],
    ["--set", "serviceKey.existingSecret=svc-key", "--set", "serviceKey.existingSecretKey=k2"],
    ["--set", "gateway.mcpSessionKey.existingSecret=session-key"],
    ["--set", "gateway.trialToken.enabled=true", "--set", "gateway.trialToken.existingSecret=trial"],
  ].flat();
  const raw = async (extra) => {
    const res = await helmRun(["template", RELEASE, chartDir, "--namespace", NAMESPACE, ...extra]);
    assert.ok(res.ok, res.stderr);
    return res.stdout;
  };

  test("with existingSecret for every generated secret, helm template twice is byte-identical and renders no Secret", async () => {
    const [a, b] = [await raw(EXISTING), await raw(EXISTING)];
    assert.equal(a, b, "two renders differ");
    const objs = await template(EXISTING);
    assert.deepEqual(
      byKind(objs, "Secret").map((o) => o.metadata.name),
      [],
      "every Secret is the operator's",
    );
    const broker = envOf(find(objs, "Deployment", "runner-broker").spec.template.spec.containers[0]);
    assert.deepEqual(broker.WEBCODEX_SERVICE_KEY.valueFrom.secretKeyRef, { name: "svc-key", key: "k2" });
    assert.deepEqual(broker.WEBCODEX_RUNNER_TOKEN.valueFrom.secretKeyRef, { name: "runner-key", key: "k1" });
    for (const d of byKind(objs, "Deployment")) {
      const env = envOf(d.spec.template.spec.containers[0]);
      assert.deepEqual(env.WEBCODEX_SERVICE_KEY.valueFrom.secretKeyRef, { name: "svc-key", key: "k2" }, d.metadata.name);
    }
  });

  test("control: without them two renders differ (generated keys change with every render)", async () => {
    assert.notEqual(await raw([]), await raw([]));
  });
});

describe("first install: the Runner namespace, its keep policy and its egress", () => {
  const npOfRunner = (objs) => byKind(objs, "NetworkPolicy").find((n) => n.metadata.namespace !== NAMESPACE && n.metadata.name.endsWith("-runner"));
  const prod = ["-f", productionValues];

  test("the production values install with the Runner namespace pre-existing (not owned) or created by the chart (kept on uninstall)", async () => {
    const preExisting = await template(prod);
    assert.deepEqual(byKind(preExisting, "Namespace"), [], "pre-created by the operator: the chart must not own it");
    const owned = await template([...prod, "--set", "runner.createNamespace=true", "--set", "runner.token.existingSecret="]);
    const [ns] = byKind(owned, "Namespace");
    assert.equal(ns.metadata.name, "webcodex-runners");
    assert.equal(ns.metadata.annotations["helm.sh/resource-policy"], "keep", "helm uninstall keeps the namespace and every workspace PVC in it");
    for (const mode of ["enforce", "warn", "audit"]) assert.equal(ns.metadata.labels[`pod-security.kubernetes.io/${mode}`], "restricted");
    // Workspace PVCs are the broker's, never the chart's: uninstall cannot delete them.
    assert.deepEqual(byKind(owned, "PersistentVolumeClaim"), []);
    // The key Runner credentials derive from stays in the release namespace; Runner pods get
    // only their own per-Runner Secret, made by the broker.
    const tokens = byKind(owned, "Secret").filter((s) => s.metadata.name.endsWith("runner-token"));
    assert.deepEqual(
      tokens.map((s) => s.metadata.namespace),
      [NAMESPACE],
    );
  });

  test("Runners must live in a namespace other than the release's; the default is <release namespace>-runners", async () => {
    const err = await templateError(["--set", `runner.namespace=${NAMESPACE}`]);
    assert.match(err, /runner\.namespace: Runners must live in a namespace other than the release's \(webcodex\)/);
    const objs = await rendered("defaults");
    assert.equal(runnerTemplate(objs).namespace, `${NAMESPACE}-runners`);
  });

  test("clone egress is a typed allow-list, closed by default", async () => {
    const closed = npOfRunner(await template(["--set", "networkPolicy.enabled=true"]));
    assert.ok(closed, "the Runner NetworkPolicy is rendered");
    assert.ok(!closed.spec.egress.some((r) => (r.to ?? []).some((t) => t.ipBlock)), "no clone destination by default");
    const open = npOfRunner(await template(prod));
    const rule = open.spec.egress.find((r) => (r.to ?? []).some((t) => t.ipBlock?.cidr === "203.0.113.0/24"));
    assert.deepEqual(rule, { to: [{ ipBlock: { cidr: "203.0.113.0/24" } }], ports: [{ protocol: "TCP", port: 443 }] });
    assert.match(
      await templateError([
        "--set",
        "runner.cloneEgress[0].name=git",
        "--set",
        "runner.cloneEgress[0].cidr=git.example.com",
        "--set",
        "runner.cloneEgress[0].except=null",
      ]),
      /cloneEgress|cidr/,
    );
  });

  test("clone egress to every address (/0) needs an except list; link-local, metadata and the cluster CIDRs are always excluded", async () => {
    const any4 = ["--set", "networkPolicy.enabled=true", "--set", "runner.cloneEgress[0].name=any", "--set", "runner.cloneEgress[0].cidr=0.0.0.0/0"];
    const ports = ["--set", "runner.cloneEgress[0].ports={443}"];
    assert.match(await templateError([...any4, ...ports]), /except/, "except is required");
    const emptyExcept = join(mkdtempSync(join(tmpdir(), "wcx-chart-")), "values.yaml");
    writeFileSync(emptyExcept, "runner:\n  cloneEgress:\n    - { name: any, cidr: 0.0.0.0/0, except: [], ports: [443] }\n");
    assert.match(await templateError(["-f", emptyExcept]), /cloneEgress any: 0\.0\.0\.0\/0 allows every address; list what it excludes in except/);
    const np = npOfRunner(
      await template([
        ...any4,
        ...ports,
        "--set",
        "runner.cloneEgress[0].except={10.0.0.0/8}",
        "--set",
        "runner.clusterCIDRs={10.96.0.0/12,192.168.0.0/16,fd00:10::/56}",
      ]),
    );
    const block = np.spec.egress.flatMap((r) => r.to ?? []).find((t) => t.ipBlock?.cidr === "0.0.0.0/0").ipBlock;
    assert.deepEqual(block.except, ["10.0.0.0/8", "169.254.0.0/16", "10.96.0.0/12", "192.168.0.0/16"], "IPv4 excepts only, for an IPv4 block");
    const v6 = npOfRunner(
      await template([
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "runner.cloneEgress[0].name=any6",
        "--set",
        "runner.cloneEgress[0].cidr=::/0",
        "--set",
        "runner.cloneEgress[0].except={fc00::/7}",
        ...ports,
        "--set",
        "runner.clusterCIDRs={10.96.0.0/12,fd00:10::/56}",
      ]),
    );
    const block6 = v6.spec.egress.flatMap((r) => r.to ?? []).find((t) => t.ipBlock?.cidr === "::/0").ipBlock;
    assert.deepEqual(block6.except, ["fc00::/7", "fe80::/10", "fd00:ec2::254/128", "fd00:10::/56"]);
    // A narrower block is rendered as given.
    const narrow = npOfRunner(await template(prod));
    assert.equal(narrow.spec.egress.flatMap((r) => r.to ?? []).find((t) => t.ipBlock)?.ipBlock.except, undefined);
  });

  test("with otel.endpoint and no OTLP destinations, Runners get no egress to arbitrary IPs; named destinations are allowed", async () => {
    const set = ["--set", "networkPolicy.enabled=true", "--set", "otel.endpoint=http://collector.observability.svc:4318"];
    const runnerNp = npOfRunner(await template(set));
    for (const rule of runnerNp.spec.egress)
      assert.ok(rule.to && rule.to.length > 0, `a Runner egress rule without destinations allows any IP: ${JSON.stringify(rule)}`);
    assert.ok(!runnerNp.spec.egress.some((r) => r.ports?.some((p) => p.port === 4318)));
    const named = npOfRunner(await template([...set, "--set", "networkPolicy.otel.to[0].namespaceSelector.matchLabels.name=observability"]));
    const otlp = named.spec.egress.find((r) => r.ports?.some((p) => p.port === 4318));
    assert.deepEqual(otlp.to, [{ namespaceSelector: { matchLabels: { name: "observability" } } }]);
  });

  test("the Runner pod template carries the release, the safe-to-evict value and the tenants' clone Secrets", async () => {
    const t = runnerTemplate(await template(prod));
    assert.equal(t.release, RELEASE);
    assert.equal(t.safeToEvict, false);
    assert.deepEqual(t.gitCredentialSecrets, { acme: "webcodex-git-acme" });
    const { pod } = brokerCode().buildRunnerObjects(brokerCode().parseRunnerPodTemplate(t), { clientId: "acme", projectId: "app" }, t.namespace, {
      git: { url: "https://git.example.com/app.git" },
    });
    const env = envOf(pod.spec.containers[0]);
    assert.deepEqual(env.WEBCODEX_RUNNER_CLONE_PASSWORD.valueFrom.secretKeyRef, { name: "webcodex-git-acme", key: "password" });
    assert.equal(pod.metadata.annotations["webcodex.dev/template-hash"], brokerCode().templateHash(brokerCode().parseRunnerPodTemplate(t)));
  });
});

describe("first install: migrations and the Runner token", () => {
  test("the migration hook waits for the database within its deadline, and the documented helm --timeout exceeds that deadline", async () => {
    for (const name of ["defaults", "production"]) {
      const objs = await rendered(name);
      const job = byKind(objs, "Job").find((j) => j.metadata.name.endsWith("-migrate"));
      const wait = Number(envOf(job.spec.template.spec.containers[0]).WEBCODEX_MIGRATE_WAIT_S.value);
      assert.ok(wait > 0 && wait < job.spec.activeDeadlineSeconds, `${name}: wait ${wait} s within the ${job.spec.activeDeadlineSeconds} s deadline`);
      const doc = readFileSync(join(root, "docs/operators.md"), "utf8");
      const timeouts = [...doc.matchAll(/helm upgrade[^\n]*--timeout (\d+)m/g)].map((m) => Number(m[1]) * 60);
      assert.ok(timeouts.length >= 2, "the install and upgrade commands give Helm a timeout");
      for (const t of timeouts)
        assert.ok(t > job.spec.activeDeadlineSeconds, `${name}: helm --timeout ${t} s must exceed the hook's ${job.spec.activeDeadlineSeconds} s deadline`);
    }
    assert.match(await templateError(["--set", "migrations.waitForDatabaseSeconds=600"]), /waitForDatabaseSeconds must be less than/);
  });

  test("the broker restarts when the Runner token changes; the generated key lives only in the release namespace", async () => {
    const objs = await rendered("defaults");
    const broker = find(objs, "Deployment", "runner-broker");
    const secrets = byKind(objs, "Secret").filter((s) => s.metadata.name.endsWith("runner-token"));
    assert.deepEqual(
      secrets.map((s) => s.metadata.namespace),
      [NAMESPACE],
      "never in the Runner namespace",
    );
    const { createHash } = await import("node:crypto");
    assert.equal(broker.spec.template.metadata.annotations["checksum/runner-token"], createHash("sha256").update(secrets[0].data.token).digest("hex"));
    const prod = find(await rendered("production"), "Deployment", "runner-broker");
    const other = find(await template(["-f", productionValues, "--set", "runner.token.existingSecret=rotated-token"]), "Deployment", "runner-broker");
    assert.notEqual(
      prod.spec.template.metadata.annotations["checksum/runner-token"],
      other.spec.template.metadata.annotations["checksum/runner-token"],
      "naming another Secret restarts the broker",
    );
  });
});

describe("scraping", () => {
  test("a ServiceMonitor per service when asked, and the metrics ports open to the configured scrapers", async () => {
    const set = ["-f", productionValues, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prometheus"];
    const objs = await template(set);
    const monitors = byKind(objs, "ServiceMonitor");
    assert.deepEqual(monitors.map((m) => component(m)).sort(), ["audit", "gateway", "ref-resolver", "runner-broker", "tool-registry"]);
    for (const m of monitors) {
      assert.equal(m.apiVersion, "monitoring.coreos.com/v1");
      assert.equal(m.metadata.labels.release, "prometheus");
      assert.deepEqual(m.spec.endpoints, [{ port: "metrics", path: "/metrics", interval: "30s" }]);
      const svc = find(objs, "Service", component(m));
      assert.ok(
        svc.spec.ports.some((p) => p.name === "metrics"),
        `${component(m)}: the Service has the named port`,
      );
      for (const [k, v] of Object.entries(m.spec.selector.matchLabels)) assert.equal(svc.spec.selector[k], v);
      const np = find(objs, "NetworkPolicy", component(m));
      const scrape = np.spec.ingress.find((r) => JSON.stringify(r.from ?? []).includes("monitoring"));
      assert.ok(scrape, `${component(m)}: the scrapers may reach the metrics port`);
      assert.deepEqual(scrape.ports, [{ protocol: "TCP", port: svc.spec.ports.find((p) => p.name === "metrics").port }]);
    }
    assert.deepEqual(byKind(await rendered("defaults"), "ServiceMonitor"), [], "off by default");
  });

  test("scraping without naming the scrapers is a validation error while NetworkPolicies are on", async () => {
    for (const flag of ["metrics.podAnnotations=true", "metrics.serviceMonitor.enabled=true"]) {
      const err = await templateError(["--set", flag, "--set", "networkPolicy.enabled=true"]);
      assert.match(err, /networkPolicy\.metricsFrom names no scraper/, flag);
    }
    await template(["--set", "metrics.podAnnotations=true", "--set", "networkPolicy.enabled=false"]);
  });
});

describe("default values install", () => {
  test("the Runner namespace is created by default (kept on uninstall); true/false force it either way", async () => {
    const objs = await rendered("defaults");
    const [ns] = byKind(objs, "Namespace");
    assert.equal(ns?.metadata.name, `${NAMESPACE}-runners`, "no cluster (helm template): the chart renders the namespace every namespaced Runner object needs");
    assert.equal(ns.metadata.annotations["helm.sh/resource-policy"], "keep");
    const runnerNsObjects = objs.filter((o) => o.metadata?.namespace === ns.metadata.name);
    assert.ok(runnerNsObjects.length > 0, "the Runner objects live in it");
    assert.deepEqual(byKind(await template(["--set", "runner.createNamespace=false"]), "Namespace"), []);
    assert.equal(byKind(await template(["--set", "runner.createNamespace=true"]), "Namespace").length, 1);
    assert.match(
      await templateError(["--set", "runner.createNamespace=true", "--set", `runner.namespace=${NAMESPACE}`]),
      /runner\.createNamespace: needs a runner namespace other than the release namespace/,
    );
  });
});

describe("the Kubernetes warm pool", () => {
  const brokerRole = (objs) => byKind(objs, "Role").find((r) => r.rules.some((rule) => rule.resources.includes("pods") && rule.verbs.includes("create")));
  test("runner.fleet.warmPool.size reaches the broker (WEBCODEX_FLEET_WARM_POOL); off by default, with no patch right on Runner pods", async () => {
    const off = await template([]);
    assert.equal(envOf(find(off, "Deployment", "runner-broker").spec.template.spec.containers[0]).WEBCODEX_FLEET_WARM_POOL.value, "0");
    assert.ok(!brokerRole(off).rules.some((r) => r.verbs.includes("patch") && r.resources.includes("pods")), "no patch on pods without a pool");
    const on = await template(["--set", "runner.fleet.warmPool.size=3"]);
    assert.equal(envOf(find(on, "Deployment", "runner-broker").spec.template.spec.containers[0]).WEBCODEX_FLEET_WARM_POOL.value, "3");
    const rule = brokerRole(on).rules.find((r) => r.resources.includes("pods"));
    assert.ok(rule.verbs.includes("patch") && rule.resources.includes("persistentvolumeclaims"), "a claim relabels the pod and its PVC");
  });

  test("the pool size is bounded by the schema", async () => {
    assert.match(await templateError(["--set", "runner.fleet.warmPool.size=-1"]), /warmPool|minimum|size/);
    assert.match(await templateError(["--set", "runner.fleet.warmPool.size=65"]), /warmPool|maximum|size/);
  });
});
