/**
 * Agents, Tasks, fenced Attempts and per-Agent event logs: the durable side of the agent
 * tools. Each tool takes its canonical arguments (validated by the gateway against the tool's
 * registered schema, and typed from it) and returns its canonical result, or throws a
 * ToolFailureError.
 *
 * Who sees what (all within one tenant, i.e. one client id; the principal is compared whole):
 * - an Agent is owned by the principal that created it; any principal of its tenant may name
 *   it as a Task's assignee, only its owner can start Attempts for it or read its events;
 * - a Task is visible to its creator and to the owner of its assignee Agent;
 * - an Attempt, its tuple and its attempt_ref belong to the principal that started it.
 * Anything else (another tenant, another principal) fails exactly like an id never issued.
 *
 * Fences: a new Attempt takes a fence from the Task's counter ratcheted from the Task's
 * recorded high-water mark, and records it as the new mark in the same transaction (a
 * trigger makes the Attempt's fence equal that mark). Every later check compares the caller's
 * fence to the mark: an old tuple or old attempt_ref fails closed with fence_stale.
 *
 * Where things are: the rows, failures and defaults in agent-rows.ts; access, idempotency and
 * the Attempt checks in agent-access.ts; event log appends and wakes in agent-task-events.ts;
 * the handlers by tool group in agent-handlers-agents.ts, agent-handlers-tasks.ts and
 * agent-handlers-attempts.ts. This file puts them together and dispatches a call by name.
 */
import { isToolFailureError, PipelineStage, ReasonCode, toolFailure, validateToolArguments } from "@webcodex/contracts";
import type { AgentToolName, Result } from "@webcodex/contracts";
import type { Database, Principal } from "@webcodex/platform";
import type { ProjectStore } from "../projects/project-store.js";
import type { AgentEventBus } from "./event-bus.js";
import type { TaskFenceCounter } from "./fence-counter.js";
import type { AgentToolHandlers, AgentToolResult, WireAgentToolHandler } from "./agent-tool-handlers.js";
import { createAgentAccess } from "./agent-access.js";
import { createAgentTaskEvents } from "./agent-task-events.js";
import { agentHandlers } from "./agent-handlers-agents.js";
import { attemptHandlers } from "./agent-handlers-attempts.js";
import { taskHandlers } from "./agent-handlers-tasks.js";

export interface AgentTasksDeps {
  db: Database;
  projects: ProjectStore;
  fences: TaskFenceCounter;
  bus: AgentEventBus;
}

export function createAgentTasks(deps: AgentTasksDeps) {
  const { db, bus } = deps;
  const access = createAgentAccess();
  const handlerDeps = { ...deps, access, events: createAgentTaskEvents(db, bus) };
  const tools: AgentToolHandlers = { ...agentHandlers(handlerDeps), ...taskHandlers(handlerDeps), ...attemptHandlers(handlerDeps) };
  const { checkAttemptRef } = access;

  return {
    tools,
    /**
     * Runs one agent tool; a domain failure comes back as `{failure}`. The arguments are checked
     * against the tool's input schema first (the gateway did so already; this service is also
     * reachable on its own), so the handlers' typed reads hold for every caller.
     */
    async call(principal: Principal, tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<Result<{ value: AgentToolResult }>> {
      const fn = Object.hasOwn(tools, tool) ? (tools[tool as AgentToolName] as WireAgentToolHandler) : undefined;
      if (!fn) return { ok: false, failure: toolFailure(ReasonCode.unknownTool, PipelineStage.dispatch, { detail_code: "not_an_agent_tool" }) };
      const violation = validateToolArguments(tool, args);
      if (violation) {
        return {
          ok: false,
          failure: toolFailure(violation.reason_code, PipelineStage.normalization, {
            detail_code: violation.detail_code,
            evidence: { field: violation.field },
          }),
        };
      }
      try {
        return { ok: true, value: await fn(principal, args, signal) };
      } catch (error) {
        if (isToolFailureError(error)) return { ok: false, failure: error.failure };
        throw error;
      }
    },
    /** attempt_ref on a workspace call: the Attempt must hold its fence now, on a Task of this Project. */
    async admitAttemptRef(
      principal: Principal,
      ref: string,
      projectCanonicalId: string,
    ): Promise<Result<{ taskId: string; attemptId: string; fence: number }>> {
      try {
        const { task, attempt } = await checkAttemptRef(db, principal, ref, false);
        if (task.project_canonical_id !== projectCanonicalId) {
          return {
            ok: false,
            failure: toolFailure(ReasonCode.invalidValue, PipelineStage.authorization, {
              detail_code: "attempt_other_project",
              evidence: { field: "attempt_ref" },
              message: "This attempt's task is in another project.",
            }),
          };
        }
        return { ok: true, taskId: task.task_id, attemptId: attempt.attempt_id, fence: Number(attempt.attempt_fence) };
      } catch (error) {
        if (isToolFailureError(error)) return { ok: false, failure: error.failure };
        throw error;
      }
    },
  };
}

export type AgentTasks = ReturnType<typeof createAgentTasks>;
