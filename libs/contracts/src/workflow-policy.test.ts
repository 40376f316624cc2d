import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_MODEL_WORKFLOW_POLICY, modelWorkflowPolicyFrom } from "./workflow-policy.js";
import { toolDefinitions } from "./catalog.js";

test("ModelWorkflowPolicy defaults to on-demand goals and unknown unattended continuation; bad values fail fast", () => {
  assert.deepEqual(modelWorkflowPolicyFrom(undefined, ""), { goalSelection: "on_demand", hostInteraction: { unattendedContinuation: "unknown" } });
  assert.deepEqual(DEFAULT_MODEL_WORKFLOW_POLICY, modelWorkflowPolicyFrom(undefined, undefined));
  assert.deepEqual(modelWorkflowPolicyFrom("recommended", "validated"), {
    goalSelection: "recommended",
    hostInteraction: { unattendedContinuation: "validated" },
  });
  assert.throws(() => modelWorkflowPolicyFrom("always", undefined), /WEBCODEX_GOAL_SELECTION must be one of on_demand, recommended/);
  assert.throws(() => modelWorkflowPolicyFrom(undefined, "yes"), /WEBCODEX_UNATTENDED_CONTINUATION/);
});

test("the policy is not a tool fact: no tool definition mentions it", () => {
  const text = JSON.stringify(toolDefinitions().map((d) => [d.name, d.description, d.inputSchema, d.direct]));
  assert.ok(!/on_demand|unattended|goal_selection/.test(text));
});
