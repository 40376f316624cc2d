import { test } from "node:test";
import assert from "node:assert/strict";
import { array, bool, int, object, oneOf, str, stringMap } from "./json-schema.js";
import type { JsonSchema, Schema, Static } from "./json-schema.js";
import { toolDefinitions } from "./catalog.js";
import type { ToolInput, ToolName } from "./catalog.js";
import type { RunnerToolName } from "./tool-names.js";
import { normalizeToolCall } from "./normalize.js";
import type { CanonicalToolInput } from "./normalize.js";
import { runnerArguments } from "./runner-arguments.js";
import type { GatewayArgument, RunnerArguments } from "./runner-arguments.js";
import { sampleToolArgs } from "./sample-args.js";

// Type-level checks: tsc (make build) fails when a derived type is not exactly the expected one.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <T extends true>(): T | undefined => undefined;

test("the builders' static types follow their schemas", () => {
  const s = str();
  const choice = str(undefined, { enum: ["a", "b"], default: "a" });
  const literal = str(undefined, { const: "edit" });
  const count = int("n", { minimum: 1 });
  const record = object({ name: str(), tags: array(str()), nested: object({ flag: bool() }, ["flag"]), env: stringMap() }, ["name"]);
  const union = oneOf({ type: "object", oneOf: [object({ a: int() }, ["a"]), object({ b: str() }, ["b"])] });
  expectType<Equal<Static<typeof s>, string>>();
  expectType<Equal<Static<typeof choice>, "a" | "b">>();
  expectType<Equal<Static<typeof literal>, "edit">>();
  expectType<Equal<Static<typeof count>, number>>();
  expectType<Equal<Static<typeof record>, { name: string; tags?: string[]; nested?: { flag: boolean }; env?: Record<string, string> }>>();
  expectType<Equal<Static<typeof union>, { a: number } | { b: string }>>();
  // A schema not made by the builders says nothing: unknown.
  expectType<Equal<Static<JsonSchema>, unknown>>();
  // A required name that is not a property does not compile.
  // @ts-expect-error "nmae" is not among the properties
  object({ name: str() }, ["nmae"]);
  // A value of the wrong type is not a Static of the schema.
  // @ts-expect-error a number is not a string
  const wrong: Static<typeof record> = { name: 1 };
  assert.equal(wrong.name, 1);
  // Schema<"a"> is a Schema<string> (covariant), and every Schema is a JsonSchema.
  const narrow: Schema<string> = choice;
  const plain: JsonSchema = narrow;
  assert.equal(plain.type, "string");
});

test("the builders emit the same JSON Schema as before they carried types", () => {
  assert.deepEqual(JSON.stringify(object({})), '{"type":"object","properties":{},"additionalProperties":false}');
  assert.deepEqual(
    JSON.stringify(object({ a: str("A."), b: int(undefined, { minimum: 0 }) }, ["a"], "Both.")),
    '{"type":"object","properties":{"a":{"type":"string","description":"A."},"b":{"type":"integer","minimum":0}},"additionalProperties":false,"required":["a"],"description":"Both."}',
  );
  assert.deepEqual(JSON.stringify(str(undefined, { enum: ["x", "y"], default: "x" })), '{"type":"string","enum":["x","y"],"default":"x"}');
  assert.deepEqual(JSON.stringify(array(bool(), "Flags.", { minItems: 1 })), '{"type":"array","items":{"type":"boolean"},"description":"Flags.","minItems":1}');
  const given: JsonSchema = { type: "object", required: ["k"], oneOf: [object({ k: str() }, ["k"])] };
  assert.equal(oneOf({ ...given, oneOf: given.oneOf ?? [] }).required, given.required);
  const required = ["a"] as const;
  const built = object({ a: str() }, required);
  assert.deepEqual(built.required, ["a"]);
  assert.notEqual(built.required, required, "the schema owns its required list");
});

test("ToolInput is the catalog schema's type; RunnerArguments is what the Runner gets", () => {
  expectType<Equal<ToolInput<"read_workspace_changes">, { project: string; session_id?: string }>>();
  expectType<Equal<RunnerArguments<"read_workspace_changes">, {}>>();
  expectType<Equal<ToolInput<"observe_jobs">, { project: string; job_ids: string[]; session_id?: string }>>();
  expectType<Equal<RunnerArguments<"wait_for_job_terminal">, { job_id: string; wait_ms?: number }>>();
  expectType<Equal<NonNullable<ToolInput<"run_shell">["shell"]>, "sh" | "bash">>();
  expectType<Equal<ToolInput<"edit_project_files">["changes"][number]["kind"], "edit" | "create" | "delete" | "move">>();
  // args is required (the manifest says so); a call may still send its alias argv, folded into args by normalization.
  expectType<Equal<ToolInput<"run_process">["args"], string[]>>();
  expectType<Equal<CanonicalToolInput<"run_process">["args"], string[]>>();
  expectType<Equal<keyof RunnerArguments<"run_process">, "args" | "cwd" | "env" | "stdin" | "timeout_ms" | "wait_ms">>();
  expectType<Equal<keyof RunnerArguments<"import_host_files">, "files">>();
  // @ts-expect-error not a catalog tool
  type Unknown = ToolInput<"no_such_tool">;
  // @ts-expect-error read_session_handoff is not a Runner tool
  type NotRunner = RunnerArguments<"read_session_handoff">;
  const names: readonly ToolName[] = ["read_files", "list_projects"];
  const runnerNames: readonly RunnerToolName[] = ["read_files", "run_shell"];
  assert.ok(names.length + runnerNames.length > 0);
});

test("the Runner gets each Runner tool's canonical arguments less exactly the gateway's fields", () => {
  const gatewayArguments: readonly GatewayArgument[] = ["project", "session_id", "attempt_ref"];
  const runnerTools = toolDefinitions().filter((d) => d.execution === "runner");
  assert.ok(runnerTools.length >= 19, "every Runner tool is checked");
  for (const def of runnerTools) {
    const declared = Object.keys(def.inputSchema.properties ?? {});
    const raw: Record<string, unknown> = { ...sampleToolArgs(def.name) };
    for (const name of gatewayArguments) if (declared.includes(name)) raw[name] = name === "project" ? "~p1" : `${name}-value`;
    const canonical = normalizeToolCall(def.name, raw, { isAdmitted: (t) => t === def.name });
    assert.ok(canonical.ok, `${def.name}: ${JSON.stringify(canonical)}`);
    const dispatched = runnerArguments(canonical.arguments);
    for (const name of gatewayArguments) assert.ok(!(name in dispatched), `${def.name}: ${name} is the gateway's`);
    for (const [key, value] of Object.entries(canonical.arguments)) {
      if (gatewayArguments.some((name) => name === key)) continue;
      assert.deepEqual(dispatched[key], value, `${def.name}: ${key} reaches the Runner`);
      assert.ok(declared.includes(key), `${def.name}: ${key} is declared by its schema`);
    }
  }
  const run = normalizeToolCall("run_process", { project: "~p1", argv: ["ls"], session_id: "~s1" }, { isAdmitted: (t) => t === "run_process" });
  assert.ok(run.ok);
  assert.deepEqual(runnerArguments(run.arguments), { args: ["ls"] });
});
