import { test } from "node:test";
import assert from "node:assert/strict";
import { toolDefinitions } from "./catalog.js";
import { isJournaledTool, JOURNALED_TOOLS } from "./journaled-tools.js";
import type { AgentToolName, GatewayToolName, PresentationToolName, RefResolverToolName, RunnerToolName } from "./tool-names.js";

/**
 * Each union spelled out as an object keyed by it: tsc (make build) fails on a missing or extra
 * name, and the test compares the keys with the catalog rows the union is meant to select.
 */
const gatewayTools = {
  create_project: true,
  wait_for_project_ready: true,
  delete_project: true,
  list_tools: true,
  read_tool_manifest: true,
  mcp_tool: true,
  call_runtime_tool: true,
  run_code_cell: true,
  get_runtime_status: true,
  list_skills: true,
  read_skill: true,
  present_work_result: true,
} as const satisfies Record<GatewayToolName, true>;

const agentTools = {
  create_agent: true,
  rotate_agent_continuation_endpoint: true,
  create_agent_task: true,
  list_agent_tasks: true,
  read_agent_task: true,
  stop_agent_task: true,
  start_agent_task_attempt: true,
  heartbeat_agent_task_attempt: true,
  complete_agent_task_attempt: true,
  reconcile_agent_task_attempt: true,
  start_agent_task_endpoint_continuation: true,
  wait_for_agent_events: true,
} as const satisfies Record<AgentToolName, true>;

const names = (pick: (d: ReturnType<typeof toolDefinitions>[number]) => boolean) =>
  toolDefinitions()
    .filter(pick)
    .map((d) => d.name)
    .sort();

test("the gateway and agent tool-name unions are exactly the catalog's gateway-executed and agent tools", () => {
  assert.deepEqual(
    Object.keys(gatewayTools).sort(),
    names((d) => d.execution === "gateway"),
  );
  assert.deepEqual(
    Object.keys(agentTools).sort(),
    names((d) => d.category === "agents"),
  );
});

test("a name outside a union does not type-check as one of its members", () => {
  // @ts-expect-error read_files runs on the Runner, not on the gateway
  const notGateway: GatewayToolName = "read_files";
  // @ts-expect-error list_projects is a ref-resolver tool, not an agent tool
  const notAgent: AgentToolName = "list_projects";
  // @ts-expect-error create_agent runs on the ref-resolver, not on a Runner
  const notRunner: RunnerToolName = "create_agent";
  // @ts-expect-error list_tools is a gateway tool
  const notRefResolver: RefResolverToolName = "list_tools";
  // @ts-expect-error create_agent is not a presentation tool
  const notPresentation: PresentationToolName = "create_agent";
  assert.equal([notGateway, notAgent, notRunner, notRefResolver, notPresentation].length, 5);
});

test("the journaled tools are Runner tools that write the workspace", () => {
  for (const name of JOURNALED_TOOLS) {
    const def = toolDefinitions().find((d) => d.name === name);
    assert.equal(def?.execution, "runner", name);
    assert.notEqual(def?.effect, "read_only", name);
    assert.ok(isJournaledTool(name));
  }
  assert.equal(isJournaledTool("read_files"), false);
});
