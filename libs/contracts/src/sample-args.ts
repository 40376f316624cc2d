/**
 * Sample arguments for a tool's input schema, shared by every input-contract test. It picks
 * declared const/default/enum values first, then bounded type samples for required children,
 * and samples every oneOf/anyOf branch (each a separate variant). A schema construct it does
 * not understand, or a node with neither a type nor const/enum, throws rather than inventing
 * a fixture.
 *
 * Semantic identity fixtures and cross-field overrides live here and only here:
 * - `project` is the placeholder ref `~p1` (tests that reach a real Runner pass their own);
 * - `session_id` is omitted (optional);
 * - run_process / run_detached_process run `["true"]`;
 * - read_files / search paths default to "README.md";
 * - call_runtime_tool targets `list_tools` with `{}`.
 */
import { toolDefinition } from "./catalog.js";
import type { JsonSchema } from "./json-schema.js";

/** String fields whose value is an identity: a fixed, meaningful fixture instead of "x". */
const identityFixtures: Record<string, string> = {
  project: "~p1",
  path: "README.md",
  job_id: "job_sample",
  session_id: "~s1",
  tool: "list_tools",
  pattern: "TODO",
  command: "true",
  code: "print(1)",
  old_text: "a",
  new_text: "b",
  content: "sample\n",
  expected_read_revision: "r_0000000000000000",
  destination: "moved/README.md",
};

const crossFieldOverrides: Record<string, Record<string, unknown>> = {
  run_process: { args: ["true"] },
  run_detached_process: { args: ["true"] },
  call_runtime_tool: { tool: "list_tools", arguments: {} },
  import_host_files: { files: [{ path: "imported.txt", content: "x" }] },
};

/** The schema keywords the sampler understands; any other keyword is an unsupported construct. */
const understood = new Set<string>([
  "type",
  "description",
  "properties",
  "required",
  "additionalProperties",
  "propertyNames",
  "items",
  "enum",
  "const",
  "default",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "pattern",
  "oneOf",
  "anyOf",
  "discriminator",
]);

/**
 * Every variant of a value for `schema`: one per oneOf/anyOf branch (recursively), a child's
 * variants substituted one child at a time (not their cross product). Never empty.
 */
export function sampleSchemaVariants(schema: JsonSchema, where = "#", key?: string): unknown[] {
  const unknownKeyword = Object.keys(schema).find((k) => !understood.has(k));
  if (unknownKeyword !== undefined) throw new Error(`${where}: unsupported schema construct "${unknownKeyword}"`);
  const branches = schema.oneOf ?? schema.anyOf;
  if (schema.oneOf && schema.anyOf) throw new Error(`${where}: oneOf with anyOf is not supported`);
  if (branches) {
    if (branches.length === 0) throw new Error(`${where}: empty ${schema.oneOf ? "oneOf" : "anyOf"}`);
    const kind = schema.oneOf ? "oneOf" : "anyOf";
    return branches.flatMap((b, i) => sampleSchemaVariants(b, `${where}/${kind}/${i}`, key));
  }
  if (schema.const !== undefined) return [schema.const];
  if (schema.type === "string" && key !== undefined && key in identityFixtures) return [identityFixtures[key]];
  if (schema.default !== undefined) return [schema.default];
  if (schema.enum !== undefined) {
    if (schema.enum.length === 0) throw new Error(`${where}: empty enum`);
    return [...schema.enum];
  }
  switch (schema.type) {
    case "string":
      if (schema.pattern !== undefined) throw new Error(`${where}: string pattern samples are not supported`);
      return ["x".repeat(Math.max(schema.minLength ?? 1, 1))];
    case "integer":
    case "number":
      return [schema.minimum ?? 1];
    case "boolean":
      return [false];
    case "array": {
      if (!schema.items) throw new Error(`${where}: array without items`);
      const n = Math.max(schema.minItems ?? 0, 1);
      return sampleSchemaVariants(schema.items, `${where}/items`).map((item) => Array.from({ length: n }, () => structuredClone(item)));
    }
    case "object": {
      // A declared map (env) or the opaque call_runtime_tool.arguments: empty is valid.
      if (typeof schema.additionalProperties === "object" || (schema.additionalProperties === undefined && schema.properties === undefined)) return [{}];
      const children: Array<[string, unknown[]]> = (schema.required ?? []).map((name) => {
        const child = schema.properties?.[name];
        if (!child) throw new Error(`${where}: required ${name} has no schema`);
        return [name, sampleSchemaVariants(child, `${where}/${name}`, name)];
      });
      const base = Object.fromEntries(children.map(([name, variants]) => [name, variants[0]]));
      const variants: unknown[] = [base];
      for (const [name, childVariants] of children) for (const v of childVariants.slice(1)) variants.push({ ...structuredClone(base), [name]: v });
      return variants;
    }
    case undefined:
      throw new Error(`${where}: a schema node without type, const or enum has no sample`);
    default:
      throw new Error(`${where}: unsupported type ${JSON.stringify(schema.type)}`);
  }
}

/** Every sample variant for `tool`: each validates against its registered input schema. */
export function sampleToolArgVariants(tool: string): Array<Record<string, unknown>> {
  const def = toolDefinition(tool);
  if (!def) throw new Error(`no tool ${tool}`);
  return sampleSchemaVariants(def.inputSchema, tool).map((v) => ({ ...(v as Record<string, unknown>), ...structuredClone(crossFieldOverrides[tool]) }));
}

/** The first sample variant for `tool` (the one most tests need). */
export function sampleToolArgs(tool: string): Record<string, unknown> {
  return sampleToolArgVariants(tool)[0] as Record<string, unknown>;
}
