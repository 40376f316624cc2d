import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "@webcodex/contracts";
import { createGatewayTools, RUN_BEFORE_DISPATCH } from "./gateway-tools.js";
import type { GatewayToolHandlers, GatewayToolsDeps } from "./gateway-tools.js";
import { createRefResolverTools } from "./ref-resolver-tools.js";
import type { RefResolverToolHandlers, RefResolverToolsDeps } from "./ref-resolver-tools.js";
import type { PresentationHandlers } from "../presentation.js";

const executedBy = (execution: string) =>
  toolDefinitions()
    .filter((d) => d.execution === execution)
    .map((d) => d.name);

test("a gateway handler map without one of the catalog's gateway tools does not compile", () => {
  const all = {} as GatewayToolHandlers;
  const { delete_project: _removed, ...withoutDelete } = all;
  // @ts-expect-error delete_project has no handler
  const missing: GatewayToolHandlers = withoutDelete;
  // @ts-expect-error list_tools' handler takes list_tools' arguments (no tool), not read_tool_manifest's
  const mistyped: GatewayToolHandlers = { ...all, list_tools: all.read_tool_manifest };
  assert.deepEqual([missing, mistyped].length, 2);
});

test("a ref-resolver handler map without one of the catalog's ref-resolver tools does not compile", () => {
  const all = {} as RefResolverToolHandlers;
  const { close_session: _removed, ...withoutClose } = all;
  // @ts-expect-error close_session has no handler
  const missing: RefResolverToolHandlers = withoutClose;
  assert.ok(missing);
});

test("every gateway tool is run by the gateway's dispatch or by a module before it", () => {
  const { handled } = createGatewayTools({} as GatewayToolsDeps);
  assert.deepEqual([...handled, ...RUN_BEFORE_DISPATCH].sort(), executedBy("gateway").sort());
});

test("every ref-resolver tool has a handler, is an agent tool forwarded whole, or is a presentation tool", () => {
  const { handled } = createRefResolverTools({} as RefResolverToolsDeps);
  const rest = toolDefinitions().filter((d) => d.execution === "ref_resolver" && !handled.includes(d.name));
  assert.deepEqual(
    rest.filter((d) => d.category !== "agents" && d.category !== "presentation").map((d) => d.name),
    [],
  );
  assert.deepEqual(handled.sort(), ["close_session", "create_session", "list_projects", "read_session_handoff", "update_project"]);
});

test("a presentation handler map without one of the catalog's presentation tools does not compile", () => {
  const all = {} as PresentationHandlers;
  const { present_goal_plan: _removed, ...withoutGoalPlan } = all;
  // @ts-expect-error present_goal_plan has no handler
  const missing: PresentationHandlers = withoutGoalPlan;
  assert.ok(missing);
});
