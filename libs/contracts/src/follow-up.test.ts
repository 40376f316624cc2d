import { test } from "node:test";
import assert from "node:assert/strict";
import * as followUpModule from "./follow-up.js";
import { buildFollowUp, followUpBuilders } from "./follow-up.js";
import type { FollowUp } from "./follow-up.js";
import { toolDefinition } from "./catalog.js";
import { validateToolArguments } from "./schema-validator.js";

const entries = Object.entries(followUpBuilders) as Array<[string, { build: (...args: unknown[]) => FollowUp; samples: readonly unknown[][] }]>;

test("every follow-up builder the module exports is registered in followUpBuilders", () => {
  const exported = Object.entries(followUpModule)
    .filter(([name, value]) => typeof value === "function" && name.endsWith("FollowUp") && name !== "buildFollowUp")
    .map(([name]) => name)
    .sort();
  assert.deepEqual(Object.keys(followUpBuilders).sort(), exported);
  for (const [name, entry] of entries) assert.equal(entry.build, (followUpModule as Record<string, unknown>)[name], `${name} is the exported function`);
});

test("every registered follow-up builds from each sample and validates unchanged against its target tool's schema", () => {
  for (const [name, entry] of entries) {
    assert.ok(entry.samples.length > 0, `${name} has samples`);
    for (const sample of entry.samples) {
      const f = entry.build(...sample);
      const def = toolDefinition(f.tool);
      assert.ok(def, `${name} targets a registered tool (${f.tool})`);
      assert.ok(def.implemented, `${name} targets an implemented tool`);
      assert.ok(f.follow_up_kind === "mechanically_followable" || f.follow_up_kind === "fallback_recovery", name);
      assert.deepEqual(Object.keys(f).sort(), ["arguments", "follow_up_kind", "tool"], `${name}: the one shared shape`);
      assert.equal(validateToolArguments(f.tool, structuredClone(f.arguments)), undefined, `${name}(${JSON.stringify(sample)}) validates`);
    }
  }
});

test("a follow-up whose arguments do not validate is a programming error", () => {
  assert.throws(() => buildFollowUp("mechanically_followable", "wait_for_job_terminal", { job_id: "x" }), /does not validate/);
  assert.throws(() => buildFollowUp("fallback_recovery", "read_files", { project: "~p1", files: [{ path: "a", extra: 1 }] }), /does not validate/);
});
