import { test } from "node:test";
import assert from "node:assert/strict";
import { sampleSchemaVariants, sampleToolArgs, sampleToolArgVariants } from "./sample-args.js";
import type { JsonSchema } from "./json-schema.js";

test("edit_project_files samples every change kind: edit, create, delete and move", () => {
  const kinds = sampleToolArgVariants("edit_project_files").map(
    (a) => ((a["changes"] as Array<Record<string, unknown>>)[0] as Record<string, unknown>)["kind"],
  );
  assert.deepEqual(kinds, ["edit", "create", "delete", "move"]);
  assert.deepEqual(sampleToolArgs("edit_project_files"), sampleToolArgVariants("edit_project_files")[0]);
});

test("every anyOf branch is sampled, and variants of two children are substituted one at a time", () => {
  const schema: JsonSchema = {
    type: "object",
    properties: {
      a: { anyOf: [{ type: "string" }, { type: "integer", minimum: 3 }] },
      b: { type: "string", enum: ["x", "y"] },
    },
    required: ["a", "b"],
    additionalProperties: false,
  };
  assert.deepEqual(sampleSchemaVariants(schema), [
    { a: "x", b: "x" },
    { a: 3, b: "x" },
    { a: "x", b: "y" },
  ]);
});

test("a schema node without a type, const or enum fails instead of inventing a value", () => {
  assert.throws(() => sampleSchemaVariants({ description: "anything" }), /without type, const or enum/);
  // An identity field name does not make an untyped node sampleable.
  const untypedProject: JsonSchema = { type: "object", properties: { project: {} }, required: ["project"], additionalProperties: false };
  assert.throws(() => sampleSchemaVariants(untypedProject), /#\/project: a schema node without type/);
  assert.deepEqual(sampleSchemaVariants({ const: "edit" }), ["edit"]);
  assert.deepEqual(sampleSchemaVariants({ enum: ["sh", "bash"] }), ["sh", "bash"]);
});

test("unsupported constructs throw", () => {
  const unsupported: Array<[JsonSchema, RegExp]> = [
    [{ type: "string", pattern: "^[a-z]+$" }, /pattern samples are not supported/],
    [{ type: "string", format: "uri" } as unknown as JsonSchema, /unsupported schema construct "format"/],
    [{ allOf: [{ type: "string" }] } as unknown as JsonSchema, /unsupported schema construct "allOf"/],
    [{ not: { type: "string" } } as unknown as JsonSchema, /unsupported schema construct "not"/],
    [{ type: "array" }, /array without items/],
    [{ oneOf: [] }, /empty oneOf/],
    [{ type: "null" } as unknown as JsonSchema, /unsupported type "null"/],
    [{ type: "object", properties: {}, required: ["a"], additionalProperties: false }, /required a has no schema/],
  ];
  for (const [schema, message] of unsupported) assert.throws(() => sampleSchemaVariants(schema), message, JSON.stringify(schema));
});
