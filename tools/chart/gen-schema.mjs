#!/usr/bin/env node
// Generates charts/webcodex/values.schema.json. The schema is authored here (with shared
// definitions for the per-service blocks and for the Kubernetes shapes values pass through)
// so that every object is closed (`additionalProperties: false`, or a typed map) and lists
// its `required` keys. chart.test.mjs fails when the checked-in file drifts from this output.
//
//   node tools/chart/gen-schema.mjs          # rewrite the schema
//   node tools/chart/gen-schema.mjs --check  # exit 1 if the checked-in file is stale
// One concept over 400 lines: the values schema, authored as one document with its shared definitions.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { runnerCapabilityRows } from "./sources.mjs";

const here = dirname(fileURLToPath(import.meta.url));
export const schemaPath = resolve(here, "../../charts/webcodex/values.schema.json");

const ref = (name) => ({ $ref: `#/definitions/${name}` });
const str = (extra = {}) => ({ type: "string", ...extra });
const bool = (extra = {}) => ({ type: "boolean", ...extra });
const int = (extra = {}) => ({ type: "integer", ...extra });
const arr = (items, extra = {}) => ({ type: "array", items, ...extra });
const map = (values, extra = {}) => ({ type: "object", additionalProperties: values, ...extra });

/** A closed object: every listed property allowed, `required` as given (default: all). */
function obj(properties, required = Object.keys(properties), extra = {}) {
  const o = { type: "object", additionalProperties: false, properties };
  if (required.length > 0) o.required = required;
  return { ...o, ...extra };
}

/** The tool policy's schema, as the tool-registry checks it (docs/tool-policy.schema.json, generated from libs/contracts). */
function toolPolicySchema() {
  const { $schema: _drop, title: _title, ...schema } = JSON.parse(readFileSync(resolve(here, "../../docs/tool-policy.schema.json"), "utf8"));
  return schema;
}

const definitions = {
  // An upstream MCP server (gateway.mcpUpstreams): optional fields have the gateway's defaults,
  // and the gateway validates each entry in full at start-up (docs/mcp-gateway.md).
  mcpUpstream: obj(
    {
      id: str({ pattern: "^[a-z0-9][a-z0-9_-]{0,62}$" }),
      url: str({ pattern: "^https?://" }),
      tenants: arr(ref("clientId"), { minItems: 1 }),
      subjects: arr(str({ minLength: 1 })),
      auth: obj(
        { mode: { enum: ["none", "static"] }, env: str({ pattern: "^[A-Z_][A-Z0-9_]*$" }), header: str({ pattern: "^[A-Za-z0-9-]+$" }), prefix: str() },
        ["mode"],
      ),
      read_only_tools: arr(str({ minLength: 1 })),
      allow_tools: arr(str({ minLength: 1 })),
      deny_tools: arr(str({ minLength: 1 })),
      project: str({ pattern: "^agent:[^:]+:[^:]+$" }),
      timeout_ms: int({ minimum: 100, maximum: 600000 }),
      max_concurrency: int({ minimum: 1, maximum: 256 }),
      queue_timeout_ms: int({ minimum: 0, maximum: 60000 }),
      rate_limit_per_minute: int({ minimum: 0 }),
      max_result_bytes: int({ minimum: 1024, maximum: 16777216 }),
      catalog_ttl_ms: int({ minimum: 0, maximum: 3600000 }),
    },
    ["id", "url", "tenants"],
  ),
  toolPolicy: toolPolicySchema(),
  port: int({ minimum: 1, maximum: 65535 }),
  clientId: str({ pattern: "^[^,=\\s]+$", description: "An OAuth client id (tenant); no comma, '=' or space." }),
  replicas: int({ minimum: 0, description: "Replica count (>= 0)." }),
  stringMap: map(str()),
  imageOverride: str({
    description: "Full image reference; empty means <image.repository>/<service>:<tag>.",
    pattern: "^$|^[a-z0-9][a-z0-9._/:@-]*$",
  }),
  url: str({ pattern: "^https?://[^\\s/]+" }),
  optionalUrl: str({ pattern: "^$|^https?://[^\\s/]+" }),
  quantity: {
    oneOf: [
      str({
        pattern: "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
      }),
      { type: "number", minimum: 0 },
    ],
  },
  resourceList: map(ref("quantity"), { propertyNames: { pattern: "^[a-zA-Z0-9./_-]+$" } }),
  resources: obj(
    {
      requests: ref("resourceList"),
      limits: {
        allOf: [ref("resourceList"), { required: ["cpu", "memory"] }],
        description: "Limits are mandatory: every container is resource-limited.",
      },
    },
    ["requests", "limits"],
  ),
  labelSelectorRequirement: obj(
    {
      key: str({ minLength: 1 }),
      operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist"] },
      values: arr(str()),
    },
    ["key", "operator"],
  ),
  labelSelector: obj({ matchLabels: ref("stringMap"), matchExpressions: arr(ref("labelSelectorRequirement")) }, []),
  toleration: obj(
    {
      key: str(),
      operator: { enum: ["Exists", "Equal"] },
      value: str(),
      effect: { enum: ["", "NoSchedule", "PreferNoSchedule", "NoExecute"] },
      tolerationSeconds: int(),
    },
    [],
  ),
  tolerations: arr(ref("toleration")),
  nodeSelectorRequirement: obj(
    {
      key: str({ minLength: 1 }),
      operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] },
      values: arr(str()),
    },
    ["key", "operator"],
  ),
  nodeSelectorTerm: obj(
    {
      matchExpressions: arr(ref("nodeSelectorRequirement")),
      matchFields: arr(ref("nodeSelectorRequirement")),
    },
    [],
  ),
  podAffinityTerm: obj(
    {
      labelSelector: ref("labelSelector"),
      namespaceSelector: ref("labelSelector"),
      namespaces: arr(str()),
      topologyKey: str({ minLength: 1 }),
      matchLabelKeys: arr(str()),
      mismatchLabelKeys: arr(str()),
    },
    ["topologyKey"],
  ),
  weightedPodAffinityTerm: obj({
    weight: int({ minimum: 1, maximum: 100 }),
    podAffinityTerm: ref("podAffinityTerm"),
  }),
  podAffinity: obj(
    {
      requiredDuringSchedulingIgnoredDuringExecution: arr(ref("podAffinityTerm")),
      preferredDuringSchedulingIgnoredDuringExecution: arr(ref("weightedPodAffinityTerm")),
    },
    [],
  ),
  affinity: obj(
    {
      nodeAffinity: obj(
        {
          requiredDuringSchedulingIgnoredDuringExecution: obj({
            nodeSelectorTerms: arr(ref("nodeSelectorTerm"), { minItems: 1 }),
          }),
          preferredDuringSchedulingIgnoredDuringExecution: arr(obj({ weight: int({ minimum: 1, maximum: 100 }), preference: ref("nodeSelectorTerm") })),
        },
        [],
      ),
      podAffinity: ref("podAffinity"),
      podAntiAffinity: ref("podAffinity"),
    },
    [],
  ),
  topologySpreadConstraint: obj(
    {
      maxSkew: int({ minimum: 1 }),
      topologyKey: str({ minLength: 1 }),
      whenUnsatisfiable: { enum: ["DoNotSchedule", "ScheduleAnyway"] },
      labelSelector: ref("labelSelector"),
      minDomains: int({ minimum: 1 }),
      nodeAffinityPolicy: { enum: ["Honor", "Ignore"] },
      nodeTaintsPolicy: { enum: ["Honor", "Ignore"] },
      matchLabelKeys: arr(str()),
    },
    ["maxSkew", "topologyKey", "whenUnsatisfiable"],
    { description: "Without labelSelector the chart selects the service's own pods." },
  ),
  keySelector: obj({ name: str({ minLength: 1 }), key: str({ minLength: 1 }), optional: bool() }, ["name", "key"]),
  envVar: obj(
    {
      name: str({ pattern: "^[-._a-zA-Z][-._a-zA-Z0-9]*$" }),
      value: str(),
      valueFrom: obj(
        {
          secretKeyRef: ref("keySelector"),
          configMapKeyRef: ref("keySelector"),
          fieldRef: obj({ fieldPath: str(), apiVersion: str() }, ["fieldPath"]),
          resourceFieldRef: obj({ resource: str(), containerName: str(), divisor: ref("quantity") }, ["resource"]),
        },
        [],
      ),
    },
    ["name"],
  ),
  extraEnv: arr(ref("envVar"), { description: "Extra container env (EnvVar list)." }),
  networkPolicyPeer: obj(
    {
      podSelector: ref("labelSelector"),
      namespaceSelector: ref("labelSelector"),
      ipBlock: obj({ cidr: str({ minLength: 1 }), except: arr(str()) }, ["cidr"]),
    },
    [],
  ),
  networkPolicyPort: obj(
    {
      protocol: { enum: ["TCP", "UDP", "SCTP"] },
      port: { oneOf: [ref("port"), str({ minLength: 1 })] },
      endPort: ref("port"),
    },
    [],
  ),
  egressRule: obj({ to: arr(ref("networkPolicyPeer")), ports: arr(ref("networkPolicyPort")) }, []),
  egressTarget: obj(
    {
      ports: arr(ref("port"), { minItems: 1, description: "TCP ports of this destination." }),
      to: arr(ref("networkPolicyPeer"), { description: "Empty: any destination on these ports." }),
    },
    ["ports", "to"],
  ),
  pdb: obj({
    enabled: bool({ description: "Render a PodDisruptionBudget." }),
    maxUnavailable: {
      oneOf: [int({ minimum: 0 }), str({ pattern: "^[0-9]+%$" })],
      description: "Pods a voluntary disruption may take down at once (count or percentage).",
    },
  }),
  hpa: obj({
    enabled: bool({ description: "Render a CPU HorizontalPodAutoscaler; it then owns the replica count." }),
    minReplicas: int({ minimum: 1, description: "Lower bound of the HPA (<= maxReplicas)." }),
    maxReplicas: int({ minimum: 1, description: "Upper bound of the HPA." }),
    targetCPUUtilizationPercentage: int({ minimum: 1, maximum: 100, description: "Average CPU utilization the HPA aims at." }),
  }),
};

/** External store reached by URL or by an existing Secret (validateValues wants exactly one). */
function storeRef(urlPattern) {
  return obj({
    url: str({ pattern: urlPattern }),
    existingSecret: str(),
    existingSecretKey: str({ minLength: 1 }),
  });
}

/** The block every Deployment-backed service shares; `extra` adds service-specific keys. */
function serviceBlock(extra = {}, { hpa = true } = {}) {
  const properties = {
    enabled: bool(),
    image: ref("imageOverride"),
    replicas: ref("replicas"),
    port: ref("port"),
    ...extra,
    resources: ref("resources"),
    podAnnotations: ref("stringMap"),
    podLabels: ref("stringMap"),
    nodeSelector: ref("stringMap"),
    tolerations: ref("tolerations"),
    affinity: ref("affinity"),
    topologySpreadConstraints: arr(ref("topologySpreadConstraint")),
    extraEnv: ref("extraEnv"),
    pdb: ref("pdb"),
  };
  if (hpa) properties.hpa = ref("hpa");
  return obj(properties);
}

const hostname = str({ pattern: "^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?$" });

export const schema = {
  $schema: "http://json-schema.org/draft-07/schema#",
  title: "WebCodex Helm chart values",
  description: "Closed schema: unknown keys fail. Generated by tools/chart/gen-schema.mjs; do not edit by hand.",
  definitions,
  ...obj({
    nameOverride: str({ maxLength: 63 }),
    fullnameOverride: str({ maxLength: 63 }),
    commonLabels: ref("stringMap"),
    image: obj({
      repository: str({ minLength: 1 }),
      tag: str(),
      pullPolicy: { enum: ["Always", "IfNotPresent", "Never"] },
      pullSecrets: arr(str({ minLength: 1 })),
    }),
    logLevel: { enum: ["debug", "info", "warn", "error", "silent"] },
    securityContext: obj({
      runAsUser: int({ minimum: 1, description: "Non-root uid (>= 1)." }),
      runAsGroup: int({ minimum: 1 }),
      fsGroup: int({ minimum: 1 }),
    }),
    postgres: storeRef("^$|^postgres(ql)?://"),
    redis: storeRef("^$|^rediss?://"),
    serviceKey: obj({ existingSecret: str(), existingSecretKey: str({ minLength: 1 }) }),
    oauth: obj({
      issuer: ref("url"),
      jwksUrl: ref("optionalUrl"),
      audience: str(),
      clientIdClaim: str({ pattern: "^$|^\\S+$" }),
      admissionClaim: str({ pattern: "^$|^\\S+$" }),
      tenantPreset: { enum: ["client", "keycloak", "okta", "entra", "issuer"] },
      adminClaim: str({ pattern: "^$|^\\S+$" }),
      adminValues: arr(str({ minLength: 1, pattern: "^[^,]+$" })),
      clockToleranceSeconds: int({ minimum: 0, maximum: 300 }),
    }),
    otel: obj({
      endpoint: ref("optionalUrl"),
      serviceNamePrefix: str({ minLength: 1, pattern: "^[a-zA-Z0-9._-]+$" }),
    }),
    probes: obj({ type: { enum: ["http", "grpc"] } }),
    grpcReflection: bool(),
    grafanaDashboard: obj({ enabled: bool(), labels: ref("stringMap"), annotations: ref("stringMap") }),
    metrics: obj({
      podAnnotations: bool(),
      serviceMonitor: obj({ enabled: bool(), interval: str({ pattern: "^[0-9]+(ms|s|m|h)$" }), labels: ref("stringMap") }),
    }),
    gateway: serviceBlock({
      publicUrl: ref("url"),
      allowedHosts: arr(hostname),
      readOnlyClients: arr(ref("clientId")),
      rateLimitPerMinute: int({ minimum: 0 }),
      rateLimitTenantPerMinute: int({ minimum: 0 }),
      rateLimitBurst: int({ minimum: 0 }),
      rateLimits: map(int({ minimum: 0 }), { propertyNames: ref("clientId") }),
      // Upstream MCP servers; each entry is checked in full by the gateway at start-up (docs/mcp-gateway.md).
      mcpUpstreams: arr(ref("mcpUpstream")),
      auditSpool: obj({ sizeLimit: ref("quantity") }),
      skillCatalogs: obj({ existingClaim: str({ pattern: "^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 253 }) }),
      // One Secret every replica reads the Mcp-Session-Id key from (generated when empty).
      mcpSessionKey: obj({ existingSecret: str(), existingSecretKey: str({ minLength: 1 }) }),
      // Trial mode: a static bearer token besides OAuth (off by default).
      trialToken: obj({ enabled: bool(), existingSecret: str(), existingSecretKey: str({ minLength: 1 }), clientId: ref("clientId") }),
      service: obj({
        type: { enum: ["ClusterIP", "NodePort", "LoadBalancer"] },
        annotations: ref("stringMap"),
      }),
      ingress: obj({
        enabled: bool(),
        className: str(),
        annotations: ref("stringMap"),
        hosts: arr(hostname),
        path: str({ pattern: "^/" }),
        pathType: { enum: ["Prefix", "Exact", "ImplementationSpecific"] },
        tls: arr(obj({ secretName: str({ minLength: 1 }), hosts: arr(hostname) })),
      }),
    }),
    toolRegistry: serviceBlock({ toolPolicy: ref("toolPolicy") }),
    refResolver: serviceBlock(),
    audit: serviceBlock({
      retentionDays: int({ minimum: 1, maximum: 3650 }),
      partitionsAheadDays: int({ minimum: 0, maximum: 366 }),
    }),
    runnerBroker: serviceBlock(
      {
        provisioner: { enum: ["kubernetes"] },
        registrationPort: ref("port"),
        projectConcurrency: int({ minimum: 1, maximum: 1024 }),
        dispatchTimeoutMs: int({ minimum: 1000 }),
        jobReconcileIntervalMs: int({ minimum: 0 }),
      },
      { hpa: false },
    ),
    runner: obj({
      namespace: str({ maxLength: 63, pattern: "^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" }),
      createNamespace: bool(),
      image: ref("imageOverride"),
      port: ref("port"),
      resources: ref("resources"),
      storageClass: str(),
      storageSize: {
        allOf: [ref("quantity"), str({ minLength: 1 })],
        description: "Workspace PVC size.",
      },
      runtimeClassName: str({ pattern: "^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" }),
      nodeSelector: ref("stringMap"),
      tolerations: ref("tolerations"),
      podLabels: ref("stringMap"),
      podAnnotations: ref("stringMap"),
      tmpSizeLimit: ref("quantity"),
      terminationGracePeriodSeconds: int({ minimum: 0 }),
      token: obj({ existingSecret: str(), existingSecretKey: str({ minLength: 1 }) }),
      extraEgress: arr(ref("egressRule")),
      clusterCIDRs: arr(str({ pattern: "^[0-9a-fA-F.:]+/[0-9]{1,3}$" })),
      safeToEvict: { type: ["boolean", "null"] },
      gitCredentialSecrets: { type: "object", additionalProperties: str({ minLength: 1, maxLength: 253, pattern: "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" }) },
      // Typed clone egress: which hosts (by CIDR) and ports Runners may clone from; closed by default.
      // A /0 (every address) must say what it excludes (validate-values refuses one without
      // except): the chart adds link-local, the cloud metadata addresses and clusterCIDRs to it.
      cloneEgress: arr(
        obj({
          name: str({ minLength: 1 }),
          cidr: str({ pattern: "^[0-9a-fA-F.:]+/[0-9]{1,3}$" }),
          except: arr(str({ pattern: "^[0-9a-fA-F.:]+/[0-9]{1,3}$" })),
          ports: arr(ref("port"), { minItems: 1 }),
        }),
        {},
      ),
      resourceQuota: obj({ enabled: bool(), hard: ref("resourceList") }),
      fleet: obj({
        enabled: bool(),
        idleTimeoutMinutes: int({ minimum: 0, maximum: 10080 }),
        resyncSeconds: int({ minimum: 1, maximum: 86400 }),
        rotation: obj({ maxUnavailable: int({ minimum: 1, maximum: 1000 }) }),
        quota: obj({ liveRunnersPerTenant: int({ minimum: 0 }), projectsPerTenant: int({ minimum: 0 }), projectCreationsPerHour: int({ minimum: 0 }) }),
      }),
      sensitiveWriteGlobs: arr(str({ minLength: 1, pattern: "\\S" })),
      // The Runner refuses unknown names and the frozen baseline, so the chart does too.
      disabledCapabilities: arr(
        {
          enum: runnerCapabilityRows()
            .filter((r) => !r.baselineV2)
            .map((r) => r.wire),
        },
        { uniqueItems: true },
      ),
    }),
    migrations: obj({
      enabled: bool(),
      image: ref("imageOverride"),
      backoffLimit: int({ minimum: 0 }),
      activeDeadlineSeconds: int({ minimum: 1 }),
      waitForDatabaseSeconds: int({ minimum: 0 }),
      resources: ref("resources"),
    }),
    networkPolicy: obj({
      enabled: bool(),
      gatewayIngressFrom: arr(ref("networkPolicyPeer")),
      metricsFrom: arr(ref("networkPolicyPeer")),
      dns: arr(ref("networkPolicyPeer"), { minItems: 1 }),
      postgres: ref("egressTarget"),
      redis: ref("egressTarget"),
      kubeApi: ref("egressTarget"),
      otel: ref("egressTarget"),
      oauth: ref("egressTarget"),
      mcpUpstreams: ref("egressTarget"),
    }),
    serviceAccount: obj({ brokerAnnotations: ref("stringMap") }),
    tests: obj({
      enabled: bool(),
      mcpToken: obj({ existingSecret: str(), existingSecretKey: str({ minLength: 1 }) }),
    }),
  }),
};

export function render() {
  return `${JSON.stringify(schema, null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = render();
  if (process.argv.includes("--check")) {
    const current = readFileSync(schemaPath, "utf8");
    if (current !== text) {
      console.error(`${schemaPath} is stale: run node tools/chart/gen-schema.mjs`);
      process.exit(1);
    }
  } else {
    writeFileSync(schemaPath, text);
    console.error(`wrote ${schemaPath}`);
  }
}
