/**
 * Limits are written once, in the ToolDefinition: a clamp ceiling (and its default) in
 * `clamps`, a batch size in the schema's `maxItems`. Descriptions name them through
 * placeholders rendered from those values, so the prose, the gateway's clamp, the Runner and
 * the broker (which read `clampRule`) cannot disagree:
 *
 * - `{{path}}` → "default D, clamped to C" (or "clamped to C" without a default), from the
 *   tool's clamp rule for `path` (e.g. `wait_ms`, `queries.*.max_results`);
 * - `{{path:ceiling}}` → C;
 * - `{{maxItems}}` in an array schema's description → that array's maxItems;
 * - `{{name}}`, `{{name:MiB}}`, `{{name:KiB}}` → the tool's `limits[name]` (in MiB or KiB).
 *
 * An unresolved placeholder is a programming error and throws when the catalog loads.
 */
import type { JsonSchema } from "./json-schema.js";
import type { ClampRule, ToolDefinition } from "./tool-definition.js";

const PLACEHOLDER = /\{\{([A-Za-z_.*]+)(?::(ceiling|MiB|KiB))?\}\}/g;

/** The text a clamp rule renders as. */
export function clampText(rule: ClampRule): string {
  return rule.default !== undefined ? `default ${rule.default}, clamped to ${rule.ceiling}` : `clamped to ${rule.ceiling}`;
}

function render(text: string, def: ToolDefinition, where: string, maxItems?: number): string {
  const out = text.replace(PLACEHOLDER, (_all, key: string, part: string | undefined) => {
    if (key === "maxItems" && part === undefined) {
      if (maxItems === undefined) throw new Error(`${def.name}: {{maxItems}} in ${where}, which has no maxItems`);
      return String(maxItems);
    }
    const rule = def.clamps?.find((r) => r.path === key);
    if (rule && (part === undefined || part === "ceiling")) return part === "ceiling" ? String(rule.ceiling) : clampText(rule);
    const limit = def.limits?.[key];
    if (limit === undefined || part === "ceiling") throw new Error(`${def.name}: {{${key}}} in ${where} names no clamp rule or limit of the tool`);
    return part === "MiB" ? `${limit / (1024 * 1024)} MiB` : part === "KiB" ? `${limit / 1024} KiB` : String(limit);
  });
  if (out.includes("{{")) throw new Error(`${def.name}: unresolved placeholder in ${where}: ${out}`);
  return out;
}

function renderSchema(schema: JsonSchema, def: ToolDefinition, where: string): JsonSchema {
  const out: JsonSchema = { ...schema };
  if (out.description !== undefined) out.description = render(out.description, def, where, out.maxItems);
  if (out.properties) out.properties = Object.fromEntries(Object.entries(out.properties).map(([k, v]) => [k, renderSchema(v, def, `${where}.${k}`)]));
  if (out.items) out.items = renderSchema(out.items, def, `${where}[]`);
  if (out.oneOf) out.oneOf = out.oneOf.map((s, i) => renderSchema(s, def, `${where}|${i}`));
  if (out.anyOf) out.anyOf = out.anyOf.map((s, i) => renderSchema(s, def, `${where}|${i}`));
  return out;
}

/**
 * The definition with every limit placeholder of its description and schema rendered from its own
 * values; only text changes, so the definition keeps its type.
 */
export function renderLimitText<D extends ToolDefinition>(def: D): D {
  return { ...def, description: render(def.description, def, "description"), inputSchema: renderSchema(def.inputSchema, def, "inputSchema") };
}
