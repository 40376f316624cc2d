// Validation of rendered Kubernetes objects, offline:
//  1. kubernetes-models per kind (`new Model(obj).validate()`): types, formats, required fields.
//  2. A strict unknown-field check, which kubernetes-models does not do. kubernetes-models
//     ships each OpenAPI schema compiled into an ajv validate function (`_schemas/*.js`), so
//     the schema is not readable as data; instead we run that function over a Proxy of the
//     object and record which properties it looks up. A compiled schema reads every property
//     it declares and enumerates the keys of maps (additionalProperties), so an own key that
//     was neither read nor enumerated is a field the Kubernetes schema does not have.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const modelsDir = dirname(require.resolve("kubernetes-models"));

/** apiVersion group -> the group segment of kubernetes-models' schema names. */
const GROUPS = {
  "": "Core",
  apps: "Apps",
  batch: "Batch",
  policy: "Policy",
  autoscaling: "Autoscaling",
  "networking.k8s.io": "Networking",
  "rbac.authorization.k8s.io": "Rbac",
  "admissionregistration.k8s.io": "Admissionregistration",
};

function splitApiVersion(apiVersion) {
  const i = apiVersion.indexOf("/");
  return i < 0 ? { group: "", version: apiVersion } : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/** The kubernetes-models model class of an object (e.g. Deployment for apps/v1). */
export async function modelClass(apiVersion, kind) {
  const { group, version } = splitApiVersion(apiVersion);
  const mod = await import(group === "" ? `kubernetes-models/${version}` : `kubernetes-models/${group}/${version}`);
  const cls = mod[kind];
  if (typeof cls !== "function") throw new Error(`kubernetes-models has no ${apiVersion} ${kind}`);
  return cls;
}

/** The compiled OpenAPI validate function kubernetes-models uses for that kind. */
export function schemaValidator(apiVersion, kind) {
  const { group, version } = splitApiVersion(apiVersion);
  const g = GROUPS[group];
  if (g === undefined) throw new Error(`no schema mapping for API group "${group}"`);
  const name = `IoK8sApi${g}${version[0].toUpperCase()}${version.slice(1)}${kind}`;
  return require(join(modelsDir, "_schemas", `${name}.js`)).validate;
}

const escape = (k) => String(k).replaceAll("~", "~0").replaceAll("/", "~1");
const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function track(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const children = new Map();
  return new Proxy(value, {
    get(target, prop, receiver) {
      if (typeof prop === "string" && Object.hasOwn(target, prop)) {
        seen.read.add(`${path}/${escape(prop)}`);
        if (!children.has(prop)) children.set(prop, track(target[prop], `${path}/${escape(prop)}`, seen));
        return children.get(prop);
      }
      return Reflect.get(target, prop, receiver);
    },
    has(target, prop) {
      if (typeof prop === "string") seen.read.add(`${path}/${escape(prop)}`);
      return Reflect.has(target, prop);
    },
    ownKeys(target) {
      seen.enumerated.add(path);
      return Reflect.ownKeys(target);
    },
  });
}

function collectUnknown(value, path, seen, out) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => collectUnknown(v, `${path}/${i}`, seen, out));
    return;
  }
  if (!isPlainObject(value)) return;
  const isMap = seen.enumerated.has(path);
  for (const [k, v] of Object.entries(value)) {
    const p = `${path}/${escape(k)}`;
    if (!isMap && !seen.read.has(p))
      out.push(p); // report the unknown field, not its contents
    else collectUnknown(v, p, seen, out);
  }
}

/**
 * Fields of `obj` that its Kubernetes schema does not declare, as JSON pointers
 * (e.g. "/spec/template/spec/containers/0/securityContext/runAsNonRot").
 */
export function unknownFields(obj, validate = schemaValidator(obj.apiVersion, obj.kind)) {
  const seen = { read: new Set(), enumerated: new Set() };
  validate(track(obj, "", seen));
  const out = [];
  collectUnknown(obj, "", seen, out);
  return out;
}

/** Problems of one object: kubernetes-models validation errors plus unknown fields. */
export async function validateObject(obj) {
  const problems = [];
  if (!isPlainObject(obj) || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
    return ["not a Kubernetes object (apiVersion/kind missing)"];
  }
  try {
    const Model = await modelClass(obj.apiVersion, obj.kind);
    new Model(structuredClone(obj)).validate();
  } catch (err) {
    problems.push(`kubernetes-models: ${err.message}`);
  }
  for (const p of unknownFields(obj)) problems.push(`unknown field ${p}`);
  return problems;
}
