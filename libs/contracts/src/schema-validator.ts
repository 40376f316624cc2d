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
}

function toViolation(error: ErrorObject): SchemaViolation {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "additionalProperties":
      return { reason_code: ReasonCode.unknownField, field: `${error.instancePath}/${String(params["additionalProperty"])}`, detail_code: "unknown_field" };
    case "required":
      return { reason_code: ReasonCode.missingField, field: `${error.instancePath}/${String(params["missingProperty"])}`, detail_code: "required" };
    case "discriminator":
      return { reason_code: ReasonCode.invalidValue, field: `${error.instancePath}/${String(params["tag"] ?? "kind")}`, detail_code: "unknown_kind" };
    default:
      return { reason_code: ReasonCode.invalidValue, field: error.instancePath || "/", detail_code: error.keyword };
  }
}

/** Returns undefined when `args` validates unchanged against `tool`'s registered schema. */
export function validateToolArguments(tool: string, args: unknown): SchemaViolation | undefined {
  const validate = validatorFor(tool);
  if (validate(args)) return undefined;
  const first = validate.errors?.[0];
  return first ? toViolation(first) : { reason_code: ReasonCode.invalidValue, field: "/", detail_code: "invalid" };
}
