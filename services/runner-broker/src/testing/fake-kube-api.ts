/**
 * One concept over 400 lines: the fake Kubernetes API server (its resources, watches and faults).
 * A fake Kubernetes API server for tests and benchmarks: the subset the broker uses, over real
 * HTTP so `@kubernetes/client-node` talks to it as to a cluster.
 *
 * Served: namespaced pods, services, configmaps, secrets and persistentvolumeclaims (core/v1)
 * and leases (coordination.k8s.io/v1): create, get, list, watch, replace (PUT), patch (JSON
 * merge or JSON patch) and delete. Every write bumps one resourceVersion counter; a create of an
 * existing name and a replace carrying a stale resourceVersion answer 409; list and watch honour
 * label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!key`); watch replays events after the
 * given resourceVersion and answers 410 Gone for one older than its window. Deleting an owner
 * deletes its dependents (ownerReferences by uid), as the garbage collector does.
 *
 * Faults: `dropWatches()` ends every open watch; `failNext(n, status, match)` answers the next n
 * matching requests with that status; `latencyMs` delays every answer; `forbidCreate(match)`
 * refuses creates with 403 (a ResourceQuota or Pod Security refusal).
 */
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export type KubeObject = Record<string, unknown> & {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generateName?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean }>;
    creationTimestamp?: string;
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  at: number;
}

interface Resource {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

const RESOURCES: Resource[] = [
  { group: "", version: "v1", plural: "pods", kind: "Pod" },
  { group: "", version: "v1", plural: "services", kind: "Service" },
  { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap" },
  { group: "", version: "v1", plural: "secrets", kind: "Secret" },
  { group: "", version: "v1", plural: "persistentvolumeclaims", kind: "PersistentVolumeClaim" },
  { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease" },
];

type WatchEvent = { type: "ADDED" | "MODIFIED" | "DELETED"; rv: number; plural: string; namespace: string; object: KubeObject };

interface OpenWatch {
  plural: string;
  namespace: string;
  selector: (labels: Record<string, string> | undefined) => boolean;
  res: ServerResponse;
}

interface Fault {
  remaining: number;
  status: number;
  match: (r: { method: string; path: string }) => boolean;
}

/** Parses a Kubernetes label selector into a predicate; throws on a malformed one. */
export function parseLabelSelector(selector: string | null | undefined): (labels: Record<string, string> | undefined) => boolean {
  if (!selector) return () => true;
  // Split on commas outside parentheses.
  const terms: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of selector) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      terms.push(cur);
      cur = "";
    } else cur += ch;
  }
  terms.push(cur);
  const tests = terms.map((raw) => {
    const t = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(t))) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = new Set(list.split(",").map((v) => v.trim()));
      return (l: Record<string, string>) => (op === "in" ? key in l && values.has(l[key]!) : !(key in l) || !values.has(l[key]!));
    }
    if ((m = /^([\w./-]+)\s*(!=|==|=)\s*([\w.-]*)$/.exec(t))) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      return op === "!=" ? (l: Record<string, string>) => l[key] !== value : (l: Record<string, string>) => l[key] === value;
    }
    if ((m = /^!([\w./-]+)$/.exec(t))) {
      const key = m[1]!;
      return (l: Record<string, string>) => !(key in l);
    }
    if ((m = /^([\w./-]+)$/.exec(t))) {
      const key = m[1]!;
      return (l: Record<string, string>) => key in l;
    }
    throw new Error(`unable to parse requirement: ${t}`);
  });
  return (labels) => tests.every((f) => f(labels ?? {}));
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target && typeof target === "object" && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902 JSON patch (add, replace, remove, test). */
function jsonPatch(target: KubeObject, ops: Array<{ op: string; path: string; value?: unknown }>): KubeObject {
  const doc = structuredClone(target) as Record<string, unknown>;
  for (const op of ops) {
    const parts = op.path
      .split("/")
      .slice(1)
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = parts.pop();
    if (last === undefined) throw new Error("empty patch path");
    let node: Record<string, unknown> = doc;
    for (const p of parts) {
      if (node[p] === undefined || node[p] === null) {
        if (op.op === "add") node[p] = {};
        else throw new Error(`path not found: ${op.path}`);
      }
      node = node[p] as Record<string, unknown>;
    }
    if (op.op === "add" || op.op === "replace") {
      if (Array.isArray(node) && last === "-") (node as unknown[]).push(op.value);
      else node[last] = op.value;
    } else if (op.op === "remove") delete node[last];
    else if (op.op === "test") {
      if (JSON.stringify(node[last]) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
    } else throw new Error(`unsupported op ${op.op}`);
  }
  return doc as KubeObject;
}

const pick = <T extends object, K extends keyof T>(o: T, ...keys: K[]): Pick<T, K> => {
  const out = {} as Pick<T, K>;
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
};

const statusBody = (code: number, reason: string, message: string) => ({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  reason,
  message,
  code,
});

export interface FakeKubeApiOptions {
  /** How many past events a watch can resume from (older resourceVersions answer 410 Gone). */
  eventWindow?: number;
  /** Pods become Running and Ready when created (a kubelet that always succeeds). */
  autoRunPods?: boolean;
}

export interface FakeKubeApi {
  server: Server;
  url: string;
  /** Every request served, in order (watches included). */
  requests: RecordedRequest[];
  /** Stored objects, keyed `plural/namespace/name`. */
  objects: Map<string, KubeObject>;
  get(plural: string, namespace: string, name: string): KubeObject | undefined;
  list(plural: string, namespace: string, selector?: string): KubeObject[];
  /** Creates or replaces an object as a controller outside the broker would (emits a watch event). */
  put(plural: string, obj: KubeObject): KubeObject;
  /** Sets a pod's status (a kubelet's report); emits MODIFIED. */
  setPodStatus(namespace: string, name: string, status: Record<string, unknown>): void;
  remove(plural: string, namespace: string, name: string): boolean;
  /** Ends every open watch (the connection closes, as when an API server restarts). */
  dropWatches(): number;
  /** How many watch connections are open. */
  openWatches(): number;
  /** Answers the next `count` requests matching `match` with `status`. */
  failNext(count: number, status: number, match?: (r: { method: string; path: string }) => boolean): void;
  /** Refuses creates matching `match` with 403 Forbidden and `message` until cleared (undefined). */
  forbidCreate(match: ((plural: string, obj: KubeObject) => boolean) | undefined, message?: string): void;
  /** Delay before each answer, ms. */
  latencyMs: number;
  /** The last resourceVersion issued. */
  resourceVersion(): number;
  close(): Promise<void>;
}

export async function startFakeKubeApi(options: FakeKubeApiOptions = {}): Promise<FakeKubeApi> {
  const eventWindow = options.eventWindow ?? 10_000;
  const objects = new Map<string, KubeObject>();
  const events: WatchEvent[] = [];
  const watches = new Set<OpenWatch>();
  const faults: Fault[] = [];
  const requests: RecordedRequest[] = [];
  let forbid: { match: (plural: string, obj: KubeObject) => boolean; message: string } | undefined;
  let rv = 1;
  let uidSeq = 0;
  const key = (plural: string, ns: string, name: string) => `${plural}/${ns}/${name}`;

  const emit = (type: WatchEvent["type"], plural: string, namespace: string, object: KubeObject) => {
    const ev: WatchEvent = { type, rv: Number(object.metadata.resourceVersion), plural, namespace, object };
    events.push(ev);
    if (events.length > eventWindow) events.splice(0, events.length - eventWindow);
    const line = `${JSON.stringify({ type, object })}\n`;
    for (const w of watches) if (w.plural === plural && w.namespace === namespace && w.selector(object.metadata.labels)) w.res.write(line);
  };

  const kindOf = (plural: string) => RESOURCES.find((r) => r.plural === plural)!;

  const store = (plural: string, ns: string, obj: KubeObject, type: "ADDED" | "MODIFIED") => {
    // The API server folds a Secret's stringData into data.
    if (plural === "secrets" && obj["stringData"]) {
      const data: Record<string, string> = { ...((obj["data"] as Record<string, string> | undefined) ?? {}) };
      for (const [k, v] of Object.entries(obj["stringData"] as Record<string, string>)) data[k] = Buffer.from(v).toString("base64");
      obj["data"] = data;
      delete obj["stringData"];
    }
    obj.metadata.resourceVersion = String(++rv);
    obj.metadata.namespace = ns;
    const r = kindOf(plural);
    obj.apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
    obj.kind = r.kind;
    objects.set(key(plural, ns, obj.metadata.name), obj);
    emit(type, plural, ns, obj);
    return obj;
  };

  const create = (plural: string, ns: string, body: KubeObject): KubeObject => {
    const obj = structuredClone(body);
    obj.metadata = { ...obj.metadata };
    if (!obj.metadata.name && obj.metadata.generateName) obj.metadata.name = `${obj.metadata.generateName}${(++uidSeq).toString(36)}`;
    obj.metadata.uid = `uid-${++uidSeq}`;
    obj.metadata.creationTimestamp = new Date().toISOString();
    if (plural === "pods") {
      obj.status = options.autoRunPods
        ? { phase: "Running", conditions: [{ type: "Ready", status: "True" }] }
        : { phase: "Pending", conditions: [{ type: "PodScheduled", status: "True" }] };
    }
    return store(plural, ns, obj, "ADDED");
  };

  const removeObject = (plural: string, ns: string, name: string): KubeObject | undefined => {
    const k = key(plural, ns, name);
    const obj = objects.get(k);
    if (!obj) return undefined;
    objects.delete(k);
    const gone = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } };
    emit("DELETED", plural, ns, gone);
    // Garbage collection: dependents owned by this object's uid go too (any kind, same namespace).
    const uid = obj.metadata.uid;
    if (uid) {
      for (const [dk, dep] of [...objects]) {
        if (dep.metadata.namespace === ns && dep.metadata.ownerReferences?.some((o) => o.uid === uid)) {
          const [dplural] = dk.split("/");
          removeObject(dplural!, ns, dep.metadata.name);
        }
      }
    }
    return gone;
  };

  const list = (plural: string, ns: string, selector?: string) => {
    const sel = parseLabelSelector(selector);
    const prefix = `${plural}/${ns}/`;
    const out: KubeObject[] = [];
    for (const [k, o] of objects) if (k.startsWith(prefix) && sel(o.metadata.labels)) out.push(o);
    return out;
  };

  const readBody = (req: IncomingMessage) =>
    new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      req.on("error", reject);
    });

  const api: FakeKubeApi = {
    server: undefined as unknown as Server,
    url: "",
    requests,
    objects,
    latencyMs: 0,
    get: (plural, ns, name) => objects.get(key(plural, ns, name)),
    list,
    put(plural, obj) {
      const ns = obj.metadata.namespace ?? "default";
      const existing = objects.get(key(plural, ns, obj.metadata.name));
      if (!existing) return create(plural, ns, obj);
      return store(plural, ns, { ...structuredClone(obj), metadata: { ...existing.metadata, ...obj.metadata } }, "MODIFIED");
    },
    setPodStatus(ns, name, status) {
      const existing = objects.get(key("pods", ns, name));
      if (!existing) throw new Error(`no pod ${ns}/${name}`);
      store("pods", ns, { ...existing, metadata: { ...existing.metadata }, status: structuredClone(status) }, "MODIFIED");
    },
    remove: (plural, ns, name) => removeObject(plural, ns, name) !== undefined,
    dropWatches() {
      const n = watches.size;
      for (const w of watches) w.res.destroy();
      watches.clear();
      return n;
    },
    openWatches: () => watches.size,
    failNext(count, status, match = () => true) {
      faults.push({ remaining: count, status, match });
    },
    forbidCreate(match, message = "pods is forbidden: exceeded quota") {
      forbid = match ? { match, message } : undefined;
    },
    resourceVersion: () => rv,
    close: () =>
      new Promise<void>((resolve) => {
        api.dropWatches();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://fake");
    const method = req.method ?? "GET";
    requests.push({ method, path: url.pathname, query: url.searchParams, at: Date.now() });
    const raw = await readBody(req);
    if (api.latencyMs > 0) await sleep(api.latencyMs);
    const send = (code: number, obj: unknown) => {
      if (res.destroyed) return;
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(obj));
    };
    const fault = faults.find((f) => f.remaining > 0 && f.match({ method, path: url.pathname }));
    if (fault) {
      fault.remaining--;
      if (fault.remaining === 0) faults.splice(faults.indexOf(fault), 1);
      return send(fault.status, statusBody(fault.status, fault.status === 500 ? "InternalError" : "Injected", "injected fault"));
    }
    const m = /^\/(?:api\/v1|apis\/([^/]+)\/([^/]+))\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(url.pathname);
    const resource = m && RESOURCES.find((r) => r.plural === m[4] && r.group === (m[1] ?? "") && (r.group === "" || r.version === m[2]));
    if (!m || !resource) return send(404, statusBody(404, "NotFound", `the server could not find the requested resource (${url.pathname})`));
    const ns = m[3]!;
    const name = m[5] ? decodeURIComponent(m[5]) : undefined;
    const plural = resource.plural;
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return send(400, statusBody(400, "BadRequest", "invalid JSON body"));
    }

    if (!name) {
      if (method === "POST") {
        const obj = body as KubeObject | undefined;
        if (!obj?.metadata || (!obj.metadata.name && !obj.metadata.generateName)) return send(422, statusBody(422, "Invalid", "metadata.name: Required value"));
        if (forbid?.match(plural, obj)) return send(403, statusBody(403, "Forbidden", forbid.message));
        if (obj.metadata.name && objects.has(key(plural, ns, obj.metadata.name)))
          return send(409, statusBody(409, "AlreadyExists", `${plural} "${obj.metadata.name}" already exists`));
        return send(201, create(plural, ns, obj));
      }
      if (method !== "GET") return send(405, statusBody(405, "MethodNotAllowed", method));
      let selector: ReturnType<typeof parseLabelSelector>;
      try {
        selector = parseLabelSelector(url.searchParams.get("labelSelector"));
      } catch (e) {
        return send(400, statusBody(400, "BadRequest", (e as Error).message));
      }
      if (url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1") {
        const from = Number(url.searchParams.get("resourceVersion") ?? "0");
        res.writeHead(200, { "content-type": "application/json" });
        res.flushHeaders();
        const oldest = events[0]?.rv ?? rv + 1;
        if (from > 0 && from < oldest - 1 && from < rv) {
          res.end(`${JSON.stringify({ type: "ERROR", object: statusBody(410, "Expired", `too old resource version: ${from} (${oldest - 1})`) })}\n`);
          return;
        }
        if (from > 0) {
          for (const ev of events) {
            if (ev.rv > from && ev.plural === plural && ev.namespace === ns && selector(ev.object.metadata.labels)) {
              res.write(`${JSON.stringify({ type: ev.type, object: ev.object })}\n`);
            }
          }
        } else {
          for (const o of list(plural, ns)) if (selector(o.metadata.labels)) res.write(`${JSON.stringify({ type: "ADDED", object: o })}\n`);
        }
        const w: OpenWatch = { plural, namespace: ns, selector, res };
        watches.add(w);
        const timeout = Number(url.searchParams.get("timeoutSeconds") ?? "0");
        const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
        res.on("close", () => {
          watches.delete(w);
          if (timer) clearTimeout(timer);
        });
        return;
      }
      const items = list(plural, ns).filter((o) => selector(o.metadata.labels));
      return send(200, {
        kind: `${resource.kind}List`,
        apiVersion: resource.group ? `${resource.group}/${resource.version}` : resource.version,
        metadata: { resourceVersion: String(rv) },
        items,
      });
    }

    const existing = objects.get(key(plural, ns, name));
    if (method === "GET") return existing ? send(200, existing) : send(404, statusBody(404, "NotFound", `${plural} "${name}" not found`));
    if (method === "DELETE") {
      const gone = removeObject(plural, ns, name);
      return gone ? send(200, gone) : send(404, statusBody(404, "NotFound", `${plural} "${name}" not found`));
    }
    if (!existing) return send(404, statusBody(404, "NotFound", `${plural} "${name}" not found`));
    if (method === "PUT") {
      const obj = body as KubeObject | undefined;
      if (!obj?.metadata) return send(422, statusBody(422, "Invalid", "metadata: Required value"));
      if (obj.metadata.resourceVersion && obj.metadata.resourceVersion !== existing.metadata.resourceVersion) {
        return send(
          409,
          statusBody(
            409,
            "Conflict",
            `Operation cannot be fulfilled on ${plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          ),
        );
      }
      const next = structuredClone(obj);
      next.metadata = { ...next.metadata, ...pick(existing.metadata, "uid", "creationTimestamp"), name };
      if (plural === "pods" && !next.status && existing.status) next.status = existing.status;
      return send(200, store(plural, ns, next, "MODIFIED"));
    }
    if (method === "PATCH") {
      const type = req.headers["content-type"] ?? "";
      let next: KubeObject;
      try {
        next = type.includes("json-patch")
          ? jsonPatch(existing, body as Array<{ op: string; path: string; value?: unknown }>)
          : (mergePatch(existing, body) as KubeObject);
      } catch (e) {
        return send(422, statusBody(422, "Invalid", (e as Error).message));
      }
      const wanted = (body as KubeObject | undefined)?.metadata?.resourceVersion;
      if (!type.includes("json-patch") && wanted && wanted !== existing.metadata.resourceVersion)
        return send(409, statusBody(409, "Conflict", `Operation cannot be fulfilled on ${plural} "${name}": the object has been modified`));
      next.metadata = { ...next.metadata, ...pick(existing.metadata, "uid"), name };
      return send(200, store(plural, ns, next, "MODIFIED"));
    }
    return send(405, statusBody(405, "MethodNotAllowed", method));
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify(statusBody(500, "InternalError", String(e))));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  api.server = server;
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return api;
}

/** A KubeConfig pointed at the fake server (token auth), for `@kubernetes/client-node`. */
export async function fakeKubeConfig(api: { url: string }, token = "sa-token") {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "fake", server: api.url, skipTLSVerify: true }],
    users: [{ name: "broker", token }],
    contexts: [{ name: "fake", cluster: "fake", user: "broker" }],
    currentContext: "fake",
  });
  return kc;
}
