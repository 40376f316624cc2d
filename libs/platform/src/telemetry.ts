/**
 * OpenTelemetry bootstrap, and the bounded call facts telemetry and ActionAudit capture.
 *
 * Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set;
 * then traces and metrics go out by OTLP, configured by the standard OTEL_* variables
 * (protocol, headers, intervals). A bad setting warns and falls back to off; an exporter
 * failure is logged, never thrown. Telemetry must never break the app.
 */
import { hash } from "node:crypto";
import type { Logger } from "./logger.js";
import type { Env } from "./config.js";

export interface Telemetry {
  readonly enabled: boolean;
  /** Exports what is buffered (tests, shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const off: Telemetry = { enabled: false, flush: async () => undefined, shutdown: async () => undefined };

export async function startTelemetry(serviceName: string, env: Env, logger: Logger): Promise<Telemetry> {
  const endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  if (!endpoint || env["OTEL_SDK_DISABLED"] === "true") return off;
  try {
    new URL(endpoint);
    const [{ NodeSDK }, api] = await Promise.all([import("@opentelemetry/sdk-node"), import("@opentelemetry/api")]);
    // The SDK's own complaints (bad OTEL_* values, exporter failures) become our warnings.
    const warn = (message: string, ...args: unknown[]) =>
      logger.warn("opentelemetry", { message, detail: args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ") });
    api.diag.setLogger(
      { error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined },
      { logLevel: api.DiagLogLevel.WARN, suppressOverrideMessage: true },
    );
    const sdk = new NodeSDK({ serviceName: env["OTEL_SERVICE_NAME"] ?? serviceName });
    sdk.start();
    logger.info("telemetry enabled", { endpoint });
    const providers = () =>
      [api.trace.getTracerProvider(), api.metrics.getMeterProvider()] as unknown as Array<{
        forceFlush?: () => Promise<void>;
        getDelegate?: () => { forceFlush?: () => Promise<void> };
      }>;
    return {
      enabled: true,
      async flush() {
        for (const p of providers()) {
          const target = p.getDelegate ? p.getDelegate() : p;
          await target.forceFlush?.().catch(() => undefined);
        }
      },
      shutdown: () => sdk.shutdown().catch(() => undefined),
    };
  } catch (error) {
    logger.warn("telemetry disabled: invalid OpenTelemetry configuration", { error });
    return off;
  }
}

// ── Bounded call facts ─────────────────────────────────────────────────────────────────

/** A non-reversible sketch of an argument object's shape (see argumentShape). */
export interface ArgumentShapeSketch {
  /** 16 hex: equal shapes, equal fingerprints. */
  fingerprint: string;
  /** Sorted, deduplicated 12-hex leaf hashes, at most 64, so two shapes can be diffed. */
  leaves: string[];
}

/** The slice of a JSON Schema argumentShape reads: which objects are free-form maps. */
export interface ShapeSchema {
  properties?: Readonly<Record<string, ShapeSchema>>;
  additionalProperties?: boolean | ShapeSchema;
  items?: ShapeSchema;
  oneOf?: readonly ShapeSchema[];
  anyOf?: readonly ShapeSchema[];
}

const MAX_DEPTH = 8;
const MAX_LEAVES = 64;
// One-shot hash: a fraction of createHash's cost for these short inputs (several per call).
const hex = (text: string, n: number) => hash("sha256", text, "hex").slice(0, n);
const pointer = (key: string) => key.replaceAll("~", "~0").replaceAll("/", "~1");

function merged(schema: ShapeSchema | undefined): ShapeSchema | undefined {
  const branches = schema?.oneOf ?? schema?.anyOf;
  if (!schema || !branches) return schema;
  const properties: Record<string, ShapeSchema> = { ...schema.properties };
  for (const b of branches) Object.assign(properties, b.properties);
  return { ...schema, properties };
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function walk(value: unknown, path: string, schema: ShapeSchema | undefined, depth: number, out: Set<string>): void {
  const type = jsonType(value);
  if (depth >= MAX_DEPTH) return void out.add(`${path}:deep`);
  if (type === "array") {
    const items = value as unknown[];
    if (items.length === 0) return void out.add(`${path}:array`);
    for (const item of items) walk(item, `${path}/[]`, schema?.items, depth + 1, out);
    return;
  }
  if (type === "object") {
    // JSON semantics: a key whose value is undefined is absent.
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    if (entries.length === 0) return void out.add(`${path}:object`);
    const s = merged(schema);
    // Keys of a free-form map (e.g. env) are data, not shape: they collapse to `*`.
    const isMap = typeof s?.additionalProperties === "object" && s.additionalProperties !== null;
    // Keys the schema does not declare are the caller's own text (a typo, or anything at
    // all): their names never enter the shape, only how many there were. A short hash of a
    // name could be reversed by guessing.
    let undeclared = 0;
    for (const [key, child] of entries) {
      const declared = Object.hasOwn(s?.properties ?? {}, key) ? s?.properties?.[key] : undefined;
      if (declared) walk(child, `${path}/${pointer(key)}`, declared, depth + 1, out);
      else if (isMap) walk(child, `${path}/*`, s?.additionalProperties as ShapeSchema, depth + 1, out);
      else undeclared++;
    }
    if (undeclared > 0) out.add(`${path}/?:undeclared:${undeclared}`);
    return;
  }
  out.add(`${path}:${type}`);
}

/**
 * The shape of a tool call's arguments: every leaf as (JSON-pointer key path with array
 * indices collapsed to `[]` and map keys to `*`, JSON type), each hashed; keys the schema
 * does not declare collapse to one count per object, so no caller-chosen name is stored. Values never enter
 * it, so it can be stored in ActionAudit; two calls that differ by one renamed field, one
 * retyped value, one dropped or one added field differ by at most one leaf each way. Pass
 * the arguments as received (before normalization) and the tool's input schema when known.
 * Never throws; undefined when the input is not an object.
 */
export function argumentShape(args: unknown, schema?: ShapeSchema): ArgumentShapeSketch | undefined {
  try {
    if (jsonType(args) !== "object") return undefined;
    const leaves = new Set<string>();
    walk(args, "", schema, 0, leaves);
    const hashed = [...new Set([...leaves].map((l) => hex(`wcx.shape.v1\u0000${l}`, 12)))].sort();
    return { fingerprint: hex(`wcx.shape.v1\u0000${hashed.join(",")}`, 16), leaves: hashed.slice(0, MAX_LEAVES) };
  } catch {
    return undefined;
  }
}

/** Byte sizes of a successful result before and after the model projection. */
export interface ResultSizes {
  canonicalBytes: number;
  projectedBytes: number;
  /**
   * Bytes of projected `"key":scalar` members that repeat a member seen earlier in the
   * projection (per-item success/error flags, echoed kinds) or echo a member of the
   * arguments (project, path, dry_run): metadata the model already has.
   */
  projectedMetadataBytes: number;
}

const MAX_SCALAR = 256;

function scalarMembers(value: unknown, visit: (member: string) => void, depth = 0): void {
  if (depth > 32 || value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    for (const item of value) scalarMembers(item, visit, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === null || typeof v === "boolean" || typeof v === "number" || (typeof v === "string" && v.length <= MAX_SCALAR))
      visit(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
    else scalarMembers(v, visit, depth + 1);
  }
}

/**
 * Byte size of a canonical result, for ActionAudit. Take it before the model projection, so
 * nothing a projection adds can be counted. Undefined when the value cannot be serialized.
 */
export function measureCanonical(canonical: unknown): number | undefined {
  try {
    return Buffer.byteLength(JSON.stringify(canonical) ?? "");
  } catch {
    return undefined;
  }
}

/**
 * The sizes of a result for ActionAudit (sizes only; nothing of the content is kept), from the
 * canonical size taken before projection, the model projection and the canonical arguments.
 * Never throws; undefined when a value cannot be serialized.
 */
export function measureProjection(canonicalBytes: number | undefined, projected: unknown, args?: unknown): ResultSizes | undefined {
  if (canonicalBytes === undefined) return undefined;
  try {
    const echoes = new Set<string>();
    scalarMembers(args, (m) => echoes.add(m));
    const seen = new Set<string>();
    let metadata = 0;
    scalarMembers(projected, (m) => {
      if (echoes.has(m) || seen.has(m)) metadata += Buffer.byteLength(m) + 1;
      else seen.add(m);
    });
    return { canonicalBytes, projectedBytes: Buffer.byteLength(JSON.stringify(projected) ?? ""), projectedMetadataBytes: metadata };
  } catch {
    return undefined;
  }
}

/** measureCanonical then measureProjection, for a canonical result that projections never touch. */
export function measureResult(canonical: unknown, projected: unknown, args?: unknown): ResultSizes | undefined {
  return measureProjection(measureCanonical(canonical), projected, args);
}
