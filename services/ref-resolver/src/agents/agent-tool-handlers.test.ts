import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "@webcodex/contracts";
import { createAgentTasks } from "./agent-tasks.js";
import type { AgentTasksDeps } from "./agent-tasks.js";
import type { AgentToolHandlers } from "./agent-tool-handlers.js";

test("an agent handler map without one of the catalog's agent tools does not compile", () => {
  const all = {} as AgentToolHandlers;
  const { stop_agent_task: _removed, ...withoutStop } = all;
  // @ts-expect-error stop_agent_task has no handler
  const missing: AgentToolHandlers = withoutStop;
  // @ts-expect-error create_agent's handler takes create_agent's arguments (no task_id), not read_agent_task's
  const mistyped: AgentToolHandlers = { ...all, create_agent: all.read_agent_task };
  assert.equal([missing, mistyped].length, 2);
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
