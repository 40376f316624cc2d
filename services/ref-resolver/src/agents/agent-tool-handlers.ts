/**
 * The shape of the agent tools' handlers: one per agent tool of the catalog, keyed by its name
 * and taking its arguments typed from its input schema, so an agent tool added to the catalog,
 * or a handler removed, does not compile.
 */
import type { AgentToolName, ToolInput } from "@webcodex/contracts";
import type { Database, Principal } from "@webcodex/platform";
import type { ProjectStore } from "../projects/project-store.js";
import type { AgentAccess } from "./agent-access.js";
import type { AgentTaskEvents } from "./agent-task-events.js";
import type { AgentEventBus } from "./event-bus.js";
import type { TaskFenceCounter } from "./fence-counter.js";

/** What an agent tool returns: its canonical result, and the Project it acted on when it has one. */
export type AgentToolResult = { result: Record<string, unknown>; projectCanonicalId?: string };

/**
 * A handler for every agent tool of the catalog, taking that tool's arguments typed from its
 * input schema. (The function type is written out here: behind a generic alias tsc would compare
 * two tools' handlers by the alias's measured variance, not their arguments.)
 */
export type AgentToolHandlers = { [N in AgentToolName]: (principal: Principal, args: ToolInput<N>, signal?: AbortSignal) => Promise<AgentToolResult> };

/** A handler called with a call's arguments as they came over the wire (validated by the gateway). */
export type WireAgentToolHandler = (principal: Principal, args: Record<string, unknown>, signal?: AbortSignal) => Promise<AgentToolResult>;

/** What the agent tools' handlers share: the store's database, Projects, fences, event bus, access checks and event logs. */
export interface AgentHandlerDeps {
  db: Database;
  projects: ProjectStore;
  fences: TaskFenceCounter;
  bus: AgentEventBus;
  access: AgentAccess;
  events: AgentTaskEvents;
}
