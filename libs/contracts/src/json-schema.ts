/**
 * Builders for the closed JSON Schemas of tool inputs. Every object schema they make has
 * `additionalProperties: false`: an unknown name could hide a typo in a consequential field.
 */
export type JsonSchema = {
  type?: "object" | "string" | "integer" | "number" | "boolean" | "array";
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  /** false for records; a value schema for declared string maps (env). Never absent. */
  additionalProperties?: false | JsonSchema;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  enum?: readonly (string | number | boolean)[];
  const?: string | number | boolean;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  /** Ajv/OpenAPI discriminator for oneOf branches keyed by a const property. */
  discriminator?: { propertyName: string };
  minProperties?: number;
  maxProperties?: number;
};

type Props = Record<string, JsonSchema>;

/** A closed object; keys listed in `required` must be present. */
export function object(properties: Props, required: string[] = [], description?: string): JsonSchema {
  const schema: JsonSchema = { type: "object", properties, additionalProperties: false };
  if (required.length > 0) schema.required = required;
  if (description !== undefined) schema.description = description;
  return schema;
}
export const str = (description?: string, extra: Partial<JsonSchema> = {}): JsonSchema => ({
  type: "string",
  ...(description ? { description } : {}),
  ...extra,
});
export const int = (description?: string, extra: Partial<JsonSchema> = {}): JsonSchema => ({
  type: "integer",
  ...(description ? { description } : {}),
  ...extra,
});
export const bool = (description?: string, extra: Partial<JsonSchema> = {}): JsonSchema => ({
  type: "boolean",
  ...(description ? { description } : {}),
  ...extra,
});
export const array = (items: JsonSchema, description?: string, extra: Partial<JsonSchema> = {}): JsonSchema => ({
  type: "array",
  items,
  ...(description ? { description } : {}),
  ...extra,
});
/** A declared map of names to strings (e.g. env additions): keys are data, not fields. */
export const stringMap = (description?: string): JsonSchema => ({
  type: "object",
  ...(description ? { description } : {}),
  propertyNames: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
  additionalProperties: { type: "string" },
});
