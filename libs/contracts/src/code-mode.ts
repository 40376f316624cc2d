/**
 * Code Mode facts derived from the catalog: which tools a cell may call (the read-only ones,
 * by the effect column, never a hand list) and the TypeScript declaration of the cell's API,
 * generated from those tools' input schemas and result fields.
 */
import type { JsonSchema } from "./json-schema.js";
import type { ToolDefinition } from "./tool-definition.js";

/** The canonical name of the Code Mode tool. */
export const CODE_CELL_TOOL = "run_code_cell";

/**
 * Whether a cell may call `def`: a read-only tool a model could call itself. The gateway entry
 * points (call_runtime_tool could forward to anything), app-only card helpers and the cell
 * itself (no nesting) are left out.
 */
export function cellCallable(def: ToolDefinition): boolean {
  return def.effect === "read_only" && def.implemented && def.gatewayEntry !== true && def.appOnly !== true && def.name !== CODE_CELL_TOOL;
}

/** The tools of an admitted selection a cell may call, in catalog order. */
export function cellToolNames(admitted: Iterable<ToolDefinition>): string[] {
  return [...admitted].filter(cellCallable).map((d) => d.name);
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (k: string) => (IDENT.test(k) ? k : JSON.stringify(k));

/** A TypeScript type for a JSON schema (closed objects, enums, unions, arrays). */
export function schemaType(schema: JsonSchema, indent = ""): string {
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const union = schema.oneOf ?? schema.anyOf;
  if (union) return union.map((s) => schemaType(s, indent)).join(" | ");
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "array": {
      const item = schema.items ? schemaType(schema.items, indent) : "unknown";
      return item.includes("|") ? `Array<${item}>` : `${item}[]`;
    }
    default: {
      const props = Object.entries(schema.properties ?? {});
      const extra = typeof schema.additionalProperties === "object" ? `[key: string]: ${schemaType(schema.additionalProperties, indent)}` : undefined;
      if (props.length === 0) return extra ? `{ ${extra} }` : schema.properties ? "{}" : "Record<string, unknown>";
      const inner = `${indent}  `;
      const required = new Set(schema.required ?? []);
      const lines = props.map(([k, s]) => {
        const doc = s.description ? `${inner}/** ${s.description.replace(/\*\//g, "*\\/")} */\n` : "";
        return `${doc}${inner}${key(k)}${required.has(k) ? "" : "?"}: ${schemaType(s, inner)};`;
      });
      if (extra) lines.push(`${inner}${extra};`);
      return `{\n${lines.join("\n")}\n${indent}}`;
    }
  }
}

/** The result type of a tool as a cell sees it: its documented top-level fields, each unknown (job_attention goes to the cell's own result). */
function resultType(def: ToolDefinition): string {
  const fields = def.resultFields ?? [];
  return `{ ${fields.map((f) => `${key(f)}?: unknown`).join("; ")}; [field: string]: unknown }`;
}

/**
 * The TypeScript declaration of a cell's API for an admitted selection: one method per
 * callable tool, typed from its input schema (`project` and `session_id` optional, since they
 * default to the cell's), plus `text`.
 */
export function cellDeclaration(admitted: Iterable<ToolDefinition>): string {
  const methods = [...admitted].filter(cellCallable).map((def) => {
    const schema: JsonSchema = { ...def.inputSchema, required: (def.inputSchema.required ?? []).filter((r) => r !== "project" && r !== "session_id") };
    const first = def.description.split(/(?<=\.)\s/)[0] ?? def.description;
    return `  /** ${first.replace(/\*\//g, "*\\/")} */\n  ${def.name}(args: ${schemaType(schema, "  ")}): Promise<${resultType(def)}>;`;
  });
  return [
    "/** A failed child call rejects with its structured failure. */",
    "interface ToolFailure { reason_code: string; failure_stage: string; detail_code?: string; message?: string; evidence?: Record<string, unknown> }",
    "/** Read-only tools, by canonical name; `project` and `session_id` default to the cell's. */",
    "declare const tools: {",
    methods.join("\n"),
    "};",
    "/** Appends to the cell's only model-visible output (strings as they are, other values as JSON). */",
    "declare function text(value: unknown): void;",
  ].join("\n");
}
