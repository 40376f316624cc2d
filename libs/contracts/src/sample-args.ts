/**
 * Sample arguments for a tool's input schema, shared by every input-contract test. It picks
 * declared const/default/enum values first, then bounded type samples for required children;
 * a schema construct it does not understand throws rather than inventing a fixture.
 *
 * Semantic identity fixtures and cross-field overrides live here and only here:
 * - `project` is the placeholder ref `~p1` (tests that reach a real Runner pass their own);
 * - `session_id` is omitted (optional);
 * - run_process / run_detached_process need `args` (the schema keeps it optional so the
 *   `argv` alias can reach normalization): `["true"]`;
 * - read_files / search paths default to "README.md";
 * - call_runtime_tool targets `list_tools` with `{}`.
 */
import { toolDefinition } from "./catalog.js";
import type { JsonSchema } from "./json-schema.js";

const identityFixtures: Record<string, unknown> = {
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

function sample(schema: JsonSchema, key: string | undefined, where: string): unknown {
  if (key !== undefined && key in identityFixtures && (schema.type === "string" || schema.type === undefined)) return identityFixtures[key];
  if (schema.const !== undefined) return schema.const;
  if (schema.default !== undefined) return schema.default;
  if (schema.enum !== undefined && schema.enum.length > 0) return schema.enum[0];
  if (schema.oneOf) {
    const first = schema.oneOf[0];
    if (!first) throw new Error(`${where}: empty oneOf`);
    return sample(first, key, `${where}/oneOf/0`);
  }
  switch (schema.type) {
    case "string":
      if (schema.pattern !== undefined) throw new Error(`${where}: string pattern samples are not supported`);
      return "x".repeat(Math.max(schema.minLength ?? 1, 1));
    case "integer":
    case "number":
      return schema.minimum ?? 1;
    case "boolean":
      return false;
    case "array": {
      if (!schema.items) throw new Error(`${where}: array without items`);
      const n = Math.max(schema.minItems ?? 0, 1);
      return Array.from({ length: n }, (_, i) => sample(schema.items as JsonSchema, undefined, `${where}/${i}`));
    }
    case "object": {
      if (schema.additionalProperties !== false && schema.additionalProperties !== undefined) return {};
      if (schema.additionalProperties === undefined && schema.properties === undefined) return {};
      const out: Record<string, unknown> = {};
      for (const name of schema.required ?? []) {
        const child = schema.properties?.[name];
        if (!child) throw new Error(`${where}: required ${name} has no schema`);
        out[name] = sample(child, name, `${where}/${name}`);
      }
      return out;
    }
    default:
      throw new Error(`${where}: unsupported schema construct ${JSON.stringify(schema).slice(0, 80)}`);
  }
}

/** Arguments that validate against `tool`'s registered input schema. */
export function sampleToolArgs(tool: string): Record<string, unknown> {
  const def = toolDefinition(tool);
  if (!def) throw new Error(`no tool ${tool}`);
  const base = sample(def.inputSchema, undefined, tool) as Record<string, unknown>;
  return { ...base, ...crossFieldOverrides[tool] };
}
