import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "@webcodex/contracts";
import { checkToolScope, hasScope, requiredScope, stepUpScopes, WebcodexScope } from "./scopes.js";
import type { Caller } from "../auth.js";

const caller = (scopes: string[]): Caller => ({ principal: { clientId: "acme", subject: "s" }, admissionProfile: "full", scopes });

test("every catalog tool needs read when read-only and write otherwise (derived from effect); a tool whose effect is its target's checks write per target", () => {
  for (const def of toolDefinitions()) {
    assert.equal(requiredScope(def.name, {}), def.effect === "read_only" || def.effectByTarget === true ? WebcodexScope.read : WebcodexScope.write, def.name);
  }
});

test("call_runtime_tool needs the scope of the tool it runs", () => {
  assert.equal(requiredScope("call_runtime_tool", { tool: "run_process", arguments: {} }), WebcodexScope.write);
  assert.equal(requiredScope("call_runtime_tool", { tool: "observe_jobs", arguments: {} }), WebcodexScope.read);
  assert.equal(requiredScope("call_runtime_tool", {}), WebcodexScope.read);
});

test("unknown tools need read and fail later in normalization", () => {
  assert.equal(requiredScope("no_such_tool", {}), WebcodexScope.read);
  assert.equal(requiredScope(undefined, undefined), WebcodexScope.read);
});

test("write implies read, read does not imply write", () => {
  assert.equal(hasScope([WebcodexScope.write], WebcodexScope.read), true);
  assert.equal(hasScope([WebcodexScope.read], WebcodexScope.write), false);
  assert.equal(hasScope(["openid"], WebcodexScope.read), false);
});

test("a step-up challenge keeps the scopes already held", () => {
  assert.deepEqual(stepUpScopes([WebcodexScope.read, "openid"], WebcodexScope.write), [WebcodexScope.read, WebcodexScope.write]);
  assert.deepEqual(stepUpScopes([], WebcodexScope.read), [WebcodexScope.read]);
});

test("checkToolScope returns a structured insufficient_scope failure at admission", () => {
  assert.equal(checkToolScope(caller([WebcodexScope.write]), "run_shell", {}), undefined);
  const failure = checkToolScope(caller([WebcodexScope.read]), "run_shell", {});
  assert.equal(failure?.reason_code, "insufficient_scope");
  assert.equal(failure?.failure_stage, "admission");
  assert.equal(failure?.state_changed, false);
  assert.deepEqual(failure?.evidence, { required_scope: WebcodexScope.write });
});
