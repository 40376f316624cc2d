/**
 * Builders for the closed JSON Schemas of tool inputs. Every object schema they make has
 * `additionalProperties: false`: an unknown name could hide a typo in a consequential field.
 * Each builder also states, in its type only, the TypeScript type of the values its schema
 * admits (`Static<typeof schema>`), so code that reads validated arguments derives its types
 * from the schema instead of restating them. The emitted JSON is the same either way.
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

declare const staticType: unique symbol;

/**
 * A JSON Schema whose admitted values have the TypeScript type `T`. The marker exists in the
 * type only: no schema object carries it, so it never reaches the wire.
 */
export type Schema<T> = JsonSchema & { readonly [staticType]?: () => T };

/** The type of the values `S` admits: `unknown` for a schema not made by these builders. */
export type Static<S> = S extends { readonly [staticType]?: () => infer T } ? T : unknown;

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type Props = Record<string, JsonSchema>;
/** A closed object's type: the `required` keys present, the others optional. */
export type ObjectStatic<P extends Props, Required extends keyof P> = Simplify<
  { -readonly [K in Required]: Static<P[K]> } & { -readonly [K in Exclude<keyof P, Required>]?: Static<P[K]> }
>;
/** Narrows `string` to the literals of `enum` or `const` when the schema gives them. */
type Narrowed<Base, X> = X extends { readonly enum: readonly (infer E)[] } ? E & Base : X extends { readonly const: infer C } ? C & Base : Base;

/** A closed object; keys listed in `required` must be present (a name not among `properties` does not compile). */
export function object<P extends Props, const R extends readonly (keyof P & string)[] = []>(
  properties: P,
  required?: R,
  description?: string,
): Schema<ObjectStatic<P, R[number]>> {
  const schema: JsonSchema = { type: "object", properties, additionalProperties: false };
  if (required !== undefined && required.length > 0) schema.required = [...required];
  if (description !== undefined) schema.description = description;
  return schema;
}
export const str = <const X extends Partial<JsonSchema> = {}>(description?: string, extra?: X): Schema<Narrowed<string, X>> => ({
  type: "string",
  ...(description ? { description } : {}),
  ...extra,
});
export const int = <const X extends Partial<JsonSchema> = {}>(description?: string, extra?: X): Schema<Narrowed<number, X>> => ({
  type: "integer",
  ...(description ? { description } : {}),
  ...extra,
});
export const bool = (description?: string, extra: Partial<JsonSchema> = {}): Schema<boolean> => ({
  type: "boolean",
  ...(description ? { description } : {}),
  ...extra,
});
export const array = <I extends JsonSchema>(items: I, description?: string, extra: Partial<JsonSchema> = {}): Schema<Static<I>[]> => ({
  type: "array",
  items,
  ...(description ? { description } : {}),
  ...extra,
});
/** A declared map of names to strings (e.g. env additions): keys are data, not fields. */
export const stringMap = (description?: string): Schema<Record<string, string>> => ({
  type: "object",
  ...(description ? { description } : {}),
  propertyNames: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
  additionalProperties: { type: "string" },
});
/** An object whose keys are another schema's business (e.g. an upstream tool's arguments): any JSON object. */
export const anyObject = (description?: string): Schema<Record<string, unknown>> => ({
  type: "object",
  ...(description ? { description } : {}),
});
/**
 * Types a schema whose value is exactly one of its `oneOf` branches: the union of the branches'
 * types. The schema is returned as given (its keys keep their order).
 */
export const oneOf = <B extends JsonSchema>(schema: JsonSchema & { oneOf: B[] }): Schema<Static<B>> => schema;
