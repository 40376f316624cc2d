// Chart checks for the Secrets an operator deals with (run: node --test tools/chart/):
// gateway replicas share one MCP session key; the Secret names the docs tell an operator to
// create are the ones the chart reads, in the namespace the docs say; the Runner token Secret
// has one place; ci/values-minimal.yaml installs with nothing else, and its `helm test` uses a
// token that does not expire.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { validateObject } from "./k8s-validate.mjs";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const chartDir = join(root, "charts/webcodex");
const productionValues = join(chartDir, "ci/production-values.yaml");
const minimalValues = join(chartDir, "ci/values-minimal.yaml");
const RELEASE = "webcodex";
const NAMESPACE = "webcodex";

let helmPromise;
function getHelm() {
  helmPromise ??= run("bash", [join(here, "fetch-helm.sh")], { cwd: root, maxBuffer: 1 << 20 }).then(({ stdout }) => stdout.trim().split("\n").pop());
  return helmPromise;
}

async function helm(args) {
  const { stdout } = await run(await getHelm(), args, { cwd: root, maxBuffer: 64 << 20 });
  return stdout;
}

/** `helm template` with extra args, parsed. */
async function template(extra = []) {
  const out = await helm(["template", RELEASE, chartDir, "--namespace", NAMESPACE, ...extra]);
  return parseAllDocuments(out)
    .map((d) => d.toJS())
    .filter((o) => o != null);
}

const component = (o) => o.metadata?.labels?.["app.kubernetes.io/component"];
const podSpecs = (objs) =>
  objs.flatMap((o) => {
    if (o.kind === "Pod") return [{ owner: o, spec: o.spec, namespace: o.metadata.namespace }];
    if (["Deployment", "Job", "StatefulSet"].includes(o.kind)) return [{ owner: o, spec: o.spec.template.spec, namespace: o.metadata.namespace }];
    return [];
  });
/** Every Secret a pod spec reads: env secretKeyRef, envFrom, volumes. */
const secretRefs = (spec) => [
  ...[...(spec.containers ?? []), ...(spec.initContainers ?? [])].flatMap((c) => [
    ...(c.env ?? []).flatMap((e) =>
      e.valueFrom?.secretKeyRef ? [{ name: e.valueFrom.secretKeyRef.name, key: e.valueFrom.secretKeyRef.key, env: e.name }] : [],
    ),
    ...(c.envFrom ?? []).flatMap((e) => (e.secretRef ? [{ name: e.secretRef.name }] : [])),
  ]),
  ...(spec.volumes ?? []).flatMap((v) => (v.secret ? [{ name: v.secret.secretName }] : [])),
];
const envOf = (c) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));

/** The runner pod template (JSON in a ConfigMap): the Secrets Runner pods read in the runner namespace. */
function runnerTemplateText(objs) {
  const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-runner-pod-template"));
  assert.ok(cm);
  return cm.data["runner-pod-template.json"];
}

/** `kubectl -n <ns> create secret generic <name>` commands in the docs (continued lines joined). */
function documentedSecrets() {
  const docsDir = join(root, "docs");
  const out = [];
  for (const file of readdirSync(docsDir).filter((f) => f.endsWith(".md"))) {
    const text = readFileSync(join(docsDir, file), "utf8").replace(/\\\n\s*/g, " ");
    for (const m of text.matchAll(/kubectl\s+-n\s+(\S+)\s+create\s+secret\s+generic\s+([a-z0-9-]+)((?:\s+--from-literal=[a-zA-Z0-9_.-]+=\S+)*)/g)) {
      const keys = [...m[3].matchAll(/--from-literal=([a-zA-Z0-9_.-]+)=/g)].map((k) => k[1]);
      out.push({ file, namespace: m[1], name: m[2], keys });
    }
  }
  return out;
}

/** Every `existingSecret`-like value in a values document, with its dotted path. */
function existingSecretValues(values, at = "") {
  if (values === null || typeof values !== "object") return [];
  return Object.entries(values).flatMap(([k, v]) => {
    const path = at ? `${at}.${k}` : k;
    if (k === "existingSecret" && typeof v === "string" && v !== "") return [{ path, name: v, key: values.existingSecretKey }];
    if (k === "gitCredentialSecrets" && v && typeof v === "object")
      return Object.entries(v).map(([tenant, name]) => ({ path: `${path}.${tenant}`, name, runner: true }));
    return existingSecretValues(v, path);
  });
}

describe("gateway replicas share one MCP session key", () => {
  test("3 replicas: one pod template reads WEBCODEX_MCP_SESSION_KEY from one rendered Secret, which nothing else reads", async () => {
    const objs = await template(["--set", "gateway.replicas=3"]);
    const gateways = objs.filter((o) => o.kind === "Deployment" && component(o) === "gateway");
    assert.equal(gateways.length, 1, "one Deployment: every replica runs the same pod template");
    assert.equal(gateways[0].spec.replicas, 3);
    const ref = envOf(gateways[0].spec.template.spec.containers[0]).WEBCODEX_MCP_SESSION_KEY?.valueFrom?.secretKeyRef;
    assert.deepEqual(ref, { name: "webcodex-mcp-session-key", key: "key" });
    const secrets = objs.filter((o) => o.kind === "Secret" && o.metadata.name === ref.name);
    assert.equal(secrets.length, 1);
    assert.equal(secrets[0].metadata.namespace, NAMESPACE);
    assert.ok(Buffer.from(secrets[0].data.key, "base64").length >= 32, "a key of at least 32 bytes");
    // Only the gateway reads it: not the Runner pods, not the other services.
    const readers = podSpecs(objs).filter(({ spec }) => secretRefs(spec).some((r) => r.name === ref.name));
    assert.deepEqual(
      readers.map(({ owner }) => component(owner)),
      ["gateway"],
    );
    assert.ok(!runnerTemplateText(objs).includes(ref.name));
  });

  test("production (HPA 3 to 20 replicas): every replica reads the operator's Secret; the chart renders none of its own", async () => {
    const objs = await template(["-f", productionValues]);
    const gateway = objs.find((o) => o.kind === "Deployment" && component(o) === "gateway");
    const hpa = objs.find((o) => o.kind === "HorizontalPodAutoscaler" && component(o) === "gateway");
    assert.ok(hpa && hpa.spec.minReplicas >= 3, "several replicas");
    const ref = envOf(gateway.spec.template.spec.containers[0]).WEBCODEX_MCP_SESSION_KEY?.valueFrom?.secretKeyRef;
    assert.deepEqual(ref, { name: "webcodex-mcp-session-key", key: "key" });
    assert.equal(objs.filter((o) => o.kind === "Secret" && o.metadata.name === ref.name).length, 0, "the existing Secret is used, none generated");
  });

  test("a generated key is kept across upgrades (lookup of the Secret already in the cluster)", () => {
    const template_ = readFileSync(join(chartDir, "templates/secrets.yaml"), "utf8");
    assert.match(template_, /lookup "v1" "Secret" \.Release\.Namespace \$sessionName/);
  });
});

describe("the Secrets the docs name are the ones the chart reads", () => {
  test("every `kubectl create secret` in the docs is read by the production render, in that namespace and under that key", async () => {
    const objs = await template(["-f", productionValues]);
    const values = parseYaml(readFileSync(productionValues, "utf8"));
    const runnerNs = values.runner.namespace;
    const documented = documentedSecrets();
    assert.ok(documented.length >= 5, `secrets documented: ${documented.map((d) => d.name).join(", ")}`);
    const problems = [];
    for (const d of documented) {
      if (d.namespace === runnerNs) {
        // Runner pods are made by the broker from the template: the tenant credential Secrets.
        if (!runnerTemplateText(objs).includes(`"${d.name}"`)) problems.push(`${d.file}: ${d.name} in ${d.namespace} is not read by Runner pods`);
        continue;
      }
      if (d.namespace !== NAMESPACE) {
        problems.push(`${d.file}: ${d.name} is created in ${d.namespace}, neither the release nor the runner namespace`);
        continue;
      }
      const refs = podSpecs(objs)
        .filter((p) => p.namespace === NAMESPACE)
        .flatMap(({ spec }) => secretRefs(spec))
        .filter((r) => r.name === d.name);
      if (refs.length === 0) problems.push(`${d.file}: ${d.name} in ${d.namespace} is read by no pod of the release`);
      for (const r of refs)
        if (r.key !== undefined && !d.keys.includes(r.key))
          problems.push(`${d.file}: ${d.name} is read under key ${r.key}, the docs create ${d.keys.join(",")}`);
    }
    assert.deepEqual(problems, []);
  });

  test("every existing Secret the production values name is one the docs tell the operator to create, in the namespace it is read from", () => {
    const values = parseYaml(readFileSync(productionValues, "utf8"));
    const documented = documentedSecrets();
    const missing = existingSecretValues(values)
      .filter(({ name, key, runner }) => {
        const ns = runner ? values.runner.namespace : NAMESPACE;
        return !documented.some((d) => d.name === name && d.namespace === ns && (key === undefined || d.keys.includes(key)));
      })
      .map(({ path, name }) => `${path}: ${name}`);
    assert.deepEqual(missing, []);
  });
});

describe("the Runner token Secret has one place: the release namespace", () => {
  test("the chart renders it only in the release namespace, and only the broker reads it", async () => {
    const objs = await template();
    const tokenSecrets = objs.filter((o) => o.kind === "Secret" && o.metadata.name === "webcodex-runner-token");
    assert.deepEqual(
      tokenSecrets.map((o) => o.metadata.namespace),
      [NAMESPACE],
    );
    const readers = podSpecs(objs).filter(({ spec }) => secretRefs(spec).some((r) => r.name === "webcodex-runner-token"));
    assert.deepEqual(
      readers.map(({ owner, namespace }) => [component(owner), namespace]),
      [["runner-broker", NAMESPACE]],
    );
    assert.ok(!runnerTemplateText(objs).includes("webcodex-runner-token"), "no Runner pod reads it");
  });

  test("every sentence of the docs and values comments about the Runner token's Secret names the release namespace, none the runner namespace", () => {
    // YAML: its comments only (one block per run of comment lines); Markdown: paragraphs and list items.
    const comments = (text) =>
      text
        .split("\n")
        .map((l) => (/^\s*#/.test(l) ? l.replace(/^\s*#\s?(-- )?/, "") : "\n\n"))
        .join(" ");
    const texts = [
      ...readdirSync(join(root, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => [`docs/${f}`, readFileSync(join(root, "docs", f), "utf8")]),
      ["charts/webcodex/values.yaml", comments(readFileSync(join(chartDir, "values.yaml"), "utf8"))],
      ["charts/webcodex/ci/production-values.yaml", comments(readFileSync(productionValues, "utf8"))],
    ];
    const wrong = [];
    let naming = 0;
    for (const [file, text] of texts) {
      const blocks = text.split(/\n\s*\n|\n\s*(?=[-*|] )/).map((b) => b.replace(/\s+/g, " "));
      for (const sentence of blocks.flatMap((b) => b.split(/(?<=[.!?])\s+/))) {
        if (!/runner token|runner\.token|runner-token/i.test(sentence) || !/namespace/i.test(sentence)) continue;
        naming++;
        if (/runner namespace|both namespaces|same name in|runner namespaces/i.test(sentence) && !/per-Runner/.test(sentence))
          wrong.push(`${file}: ${sentence}`);
        else if (!/release namespace|this namespace/i.test(sentence)) wrong.push(`${file}: ${sentence}`);
      }
    }
    assert.ok(naming >= 3, `sentences that place the Runner token: ${naming}`);
    assert.deepEqual(wrong, []);
  });
});

describe("ci/values-minimal.yaml: a trial install with nothing else", () => {
  test("renders alone, every object valid, and every Secret a release pod reads is rendered by the chart (nothing to create first)", async () => {
    const objs = await template(["-f", minimalValues]);
    const problems = [];
    for (const o of objs) for (const p of await validateObject(o)) problems.push(`${o.kind}/${o.metadata?.name}: ${p}`);
    assert.deepEqual(problems, []);
    const rendered = new Set(objs.filter((o) => o.kind === "Secret").map((o) => `${o.metadata.namespace}/${o.metadata.name}`));
    const missing = podSpecs(objs)
      .flatMap(({ spec, namespace, owner }) => secretRefs(spec).map((r) => ({ ...r, at: `${namespace}/${r.name}`, owner: owner.metadata.name })))
      .filter((r) => !rendered.has(r.at))
      .map((r) => `${r.owner} reads ${r.at}`);
    assert.deepEqual(missing, []);
    // The chart makes the Runner namespace itself.
    assert.ok(objs.some((o) => o.kind === "Namespace" && o.metadata.name === "webcodex-runners"));
  });

  test("helm install --dry-run accepts it alone", async () => {
    const out = await helm(["install", RELEASE, chartDir, "--namespace", NAMESPACE, "--dry-run=client", "-f", minimalValues]);
    assert.match(out, /STATUS: pending-install/);
    assert.match(out, /TRIAL MODE/);
  });

  test("trial mode: the gateway accepts the generated token, and helm test's MCP check uses that same Secret, which does not expire", async () => {
    const objs = await template(["-f", minimalValues]);
    const gateway = objs.find((o) => o.kind === "Deployment" && component(o) === "gateway");
    const env = envOf(gateway.spec.template.spec.containers[0]);
    assert.deepEqual(env.WEBCODEX_DEV_TOKEN.valueFrom.secretKeyRef, { name: "webcodex-trial-token", key: "token" });
    assert.equal(env.WEBCODEX_DEV_CLIENT_ID.value, "trial");
    const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === "webcodex-trial-token");
    assert.ok(Buffer.from(secret.data.token, "base64").length >= 16, "the gateway's minimum dev token length");
    const mcpTest = objs.find(
      (o) => o.kind === "Pod" && o.metadata.annotations?.["helm.sh/hook"] === "test" && o.metadata.name.endsWith("test-mcp-tools-list"),
    );
    assert.ok(mcpTest, "helm test runs MCP tools/list");
    assert.deepEqual(envOf(mcpTest.spec.containers[0]).MCP_TOKEN.valueFrom.secretKeyRef, { name: "webcodex-trial-token", key: "token" });
    // A generated static token: not a JWT, so nothing in it expires.
    assert.doesNotMatch(Buffer.from(secret.data.token, "base64").toString(), /^eyJ/);
  });

  test("trial mode is off by default: no static token is accepted and no trial Secret exists", async () => {
    const objs = await template();
    const gateway = objs.find((o) => o.kind === "Deployment" && component(o) === "gateway");
    assert.equal(envOf(gateway.spec.template.spec.containers[0]).WEBCODEX_DEV_TOKEN, undefined);
    assert.ok(!objs.some((o) => o.kind === "Secret" && o.metadata.name.endsWith("trial-token")));
  });
});
