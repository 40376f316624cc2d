// Building blocks of the chart's values schema (tools/chart/gen-schema.mjs): the JSON-schema
// constructors and the definitions of the Kubernetes shapes values pass through (resources,
// affinity, tolerations, env, NetworkPolicy peers, PDB, HPA), every object closed.

export const ref = (name) => ({ $ref: `#/definitions/${name}` });
export const str = (extra = {}) => ({ type: "string", ...extra });
export const bool = (extra = {}) => ({ type: "boolean", ...extra });
export const int = (extra = {}) => ({ type: "integer", ...extra });
export const arr = (items, extra = {}) => ({ type: "array", items, ...extra });
export const map = (values, extra = {}) => ({ type: "object", additionalProperties: values, ...extra });

/** A closed object: every listed property allowed, `required` as given (default: all). */
export function obj(properties, required = Object.keys(properties), extra = {}) {
  const o = { type: "object", additionalProperties: false, properties };
  if (required.length > 0) o.required = required;
  return { ...o, ...extra };
}

/** Kubernetes shapes the values pass through, closed like the rest of the schema. */
export const kubeDefinitions = {
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
