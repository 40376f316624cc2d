/**
 * Validation of arguments against each tool's registered input schema (Ajv, compiled once
 * per tool on first use). Errors map to stable reason codes; parser prose never leaves here.
 */
import AjvModule from "ajv";
import type { ErrorObject, ValidateFunction } from "ajv";
import { toolDefinition } from "./catalog.js";
import { ReasonCode } from "./failure.js";

const Ajv = AjvModule.default ?? AjvModule;
const ajv = new Ajv({ allErrors: false, strict: true, strictRequired: false, discriminator: true, allowUnionTypes: true });
const compiled = new Map<string, ValidateFunction>();

function validatorFor(tool: string): ValidateFunction {
  let v = compiled.get(tool);
  if (!v) {
    const def = toolDefinition(tool);
    if (!def) throw new Error(`no tool ${tool}`);
    v = ajv.compile(def.inputSchema);
    compiled.set(tool, v);
  }
  return v;
}

export interface SchemaViolation {
  reason_code: ReasonCode;
  /** JSON pointer of the offending field, e.g. "/timeout" or "/changes/0/edits/1/occurrence". */
  field: string;
  /** The schema keyword that failed (additionalProperties, required, type, enum, ...). */
  detail_code: string;
  /** For an unknown or missing field: the names the object holding it accepts, and which of them it requires. */
  accepted?: { fields: string[]; required: string[] };
}

/** The object schema an additionalProperties or required error was raised by: its schemaPath without the keyword. */
function objectSchemaAt(root: unknown, schemaPath: string): Record<string, unknown> | undefined {
  const segments = schemaPath
    .replace(/^#\/?/, "")
    .split("/")
    .filter((s) => s !== "")
    .slice(0, -1);
  let node: unknown = root;
  for (const raw of segments) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[raw.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return typeof node === "object" && node !== null ? (node as Record<string, unknown>) : undefined;
}

function acceptedAt(root: unknown, schemaPath: string): SchemaViolation["accepted"] {
  const schema = objectSchemaAt(root, schemaPath);
  const properties = schema?.["properties"];
  if (typeof properties !== "object" || properties === null) return undefined;
  const required = Array.isArray(schema?.["required"]) ? (schema["required"] as string[]) : [];
  return { fields: Object.keys(properties), required };
}

function toViolation(error: ErrorObject, root: unknown): SchemaViolation {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "additionalProperties":
      return withAccepted(
        { reason_code: ReasonCode.unknownField, field: `${error.instancePath}/${String(params["additionalProperty"])}`, detail_code: "unknown_field" },
        acceptedAt(root, error.schemaPath),
      );
    case "required":
      return withAccepted(
        { reason_code: ReasonCode.missingField, field: `${error.instancePath}/${String(params["missingProperty"])}`, detail_code: "required" },
        acceptedAt(root, error.schemaPath),
      );
    case "discriminator":
      return { reason_code: ReasonCode.invalidValue, field: `${error.instancePath}/${String(params["tag"] ?? "kind")}`, detail_code: "unknown_kind" };
    default:
      return { reason_code: ReasonCode.invalidValue, field: error.instancePath || "/", detail_code: error.keyword };
  }
}

function withAccepted(violation: SchemaViolation, accepted: SchemaViolation["accepted"]): SchemaViolation {
  return accepted ? { ...violation, accepted } : violation;
}

/** Returns undefined when `args` validates unchanged against `tool`'s registered schema. */
export function validateToolArguments(tool: string, args: unknown): SchemaViolation | undefined {
  const validate = validatorFor(tool);
  if (validate(args)) return undefined;
  const first = validate.errors?.[0];
  return first ? toViolation(first, toolDefinition(tool)?.inputSchema) : { reason_code: ReasonCode.invalidValue, field: "/", detail_code: "invalid" };
}
