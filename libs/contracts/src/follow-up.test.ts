import { test } from "node:test";
import assert from "node:assert/strict";
import * as followUpModule from "./follow-up.js";
import { buildFollowUp, followUpBuilders, followUpTarget } from "./follow-up.js";
import type { FollowUp } from "./follow-up.js";
import { toolDefinition } from "./catalog.js";
import { toolRoute } from "./admission.js";
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
      const target = followUpTarget(f);
      const def = toolDefinition(target.tool);
      assert.ok(def, `${name} targets a registered tool (${target.tool})`);
      assert.ok(def.implemented, `${name} targets an implemented tool`);
      assert.ok(f.follow_up_kind === "mechanically_followable" || f.follow_up_kind === "fallback_recovery", name);
      assert.deepEqual(Object.keys(f).sort(), ["arguments", "follow_up_kind", "tool"], `${name}: the one shared shape`);
      // The call as returned is callable by name from tools/list: a Direct target bare, a Gateway target wrapped.
      if (toolRoute(def).primary === "direct") {
        assert.equal(f.tool, def.name, `${name}: a Direct target is called by its own name`);
      } else {
        assert.equal(f.tool, "call_runtime_tool", `${name}: a Gateway target is wrapped`);
        assert.deepEqual(Object.keys(f.arguments).sort(), ["arguments", "tool"], `${name}: the canonical wrapper`);
        assert.equal(validateToolArguments("call_runtime_tool", structuredClone(f.arguments)), undefined, `${name}: the wrapper validates`);
      }
      assert.equal(validateToolArguments(target.tool, structuredClone(target.arguments)), undefined, `${name}(${JSON.stringify(sample)}) validates`);
    }
  }
});

test("a follow-up whose arguments do not validate is a programming error", () => {
  assert.throws(() => buildFollowUp("mechanically_followable", "wait_for_job_terminal", { job_id: "x" }), /does not validate/);
  assert.throws(() => buildFollowUp("fallback_recovery", "read_files", { project: "~p1", files: [{ path: "a", extra: 1 }] }), /does not validate/);
});

test("a pending run's wait edge is the call_runtime_tool wrapper; a re-read of a file is a bare Direct read_files", () => {
  assert.deepEqual(followUpBuilders.waitForJobFollowUp.build("~p1", "job_1"), {
    follow_up_kind: "mechanically_followable",
    tool: "call_runtime_tool",
    arguments: { tool: "wait_for_job_terminal", arguments: { project: "~p1", job_id: "job_1" } },
  });
  assert.deepEqual(followUpBuilders.rereadFollowUp.build("~p1", "a.ts"), {
    follow_up_kind: "fallback_recovery",
    tool: "read_files",
    arguments: { project: "~p1", files: [{ path: "a.ts" }] },
  });
});
