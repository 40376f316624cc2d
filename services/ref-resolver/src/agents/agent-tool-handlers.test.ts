import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "@webcodex/contracts";
import { createAgentTasks } from "./agent-tasks.js";
import type { AgentTasksDeps } from "./agent-tasks.js";
import type { AgentToolHandlers } from "./agent-tool-handlers.js";
import type { AttemptHandlers } from "./agent-handlers-attempts.js";

test("an agent handler map without one of the catalog's agent tools does not compile", () => {
  const all = {} as AgentToolHandlers;
  const { stop_agent_task: _removed, ...withoutStop } = all;
  // @ts-expect-error stop_agent_task has no handler
  const missing: AgentToolHandlers = withoutStop;
  // @ts-expect-error create_agent's handler takes create_agent's arguments (no task_id), not read_agent_task's
  const mistyped: AgentToolHandlers = { ...all, create_agent: all.read_agent_task };
  assert.equal([missing, mistyped].length, 2);
});

test("an agent handler reads its arguments as the catalog's typed fields", () => {
  const read: AgentToolHandlers["read_agent_task"] = async (_principal, args) => ({ result: { task_id: args.task_id } });
  // @ts-expect-error create_agent takes no task_id
  const unknownField: AgentToolHandlers["create_agent"] = async (_principal, args) => ({ result: { task_id: args.task_id } });
  // @ts-expect-error wait_ms is optional: a number | undefined is not a number
  const optional: AgentToolHandlers["wait_for_agent_events"] = async (_principal, args) => ({ result: { wait_ms: args.wait_ms.toFixed() } });
  // @ts-expect-error a handler group without one of its tools does not compile
  const group: AttemptHandlers = { ...({} as Omit<AttemptHandlers, "reconcile_agent_task_attempt">) };
  assert.equal([read, unknownField, optional, group].length, 4);
});

test("the agent store has a handler for exactly the catalog's agent tools", () => {
  const { tools } = createAgentTasks({} as AgentTasksDeps);
  const agentTools = toolDefinitions()
    .filter((d) => d.category === "agents")
    .map((d) => d.name);
  assert.deepEqual(Object.keys(tools).sort(), agentTools.sort());
});

test("a name that is not an agent tool is refused, also one an object inherits", async () => {
  const agents = createAgentTasks({} as AgentTasksDeps);
  const principal = { clientId: "acme", subject: "alice" } as Parameters<typeof agents.call>[0];
  for (const tool of ["list_projects", "toString", "constructor"]) {
    const r = await agents.call(principal, tool, {});
    assert.equal(r.ok, false, tool);
    if (!r.ok) assert.equal(r.failure.detail_code, "not_an_agent_tool");
  }
});

test("arguments that do not fit the tool's input schema are refused before its handler runs", async () => {
  // No database: a handler that ran would throw on it.
  const agents = createAgentTasks({} as AgentTasksDeps);
  const principal = { clientId: "acme", subject: "alice" } as Parameters<typeof agents.call>[0];
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    ["read_agent_task", {}, "missing_field", "/task_id"],
    ["read_agent_task", { task_id: 7 }, "invalid_value", "/task_id"],
    ["create_agent", { name: "a", extra: true }, "unknown_field", "/extra"],
  ];
  for (const [tool, args, reason, field] of cases) {
    const r = await agents.call(principal, tool, args);
    assert.equal(r.ok, false, JSON.stringify(args));
    if (!r.ok) assert.deepEqual([r.failure.reason_code, r.failure.evidence?.["field"]], [reason, field], JSON.stringify(args));
  }
});
