/**
 * The tool-name unions a service keys its handler map by, each derived from the catalog's own
 * fields: a tool added to the catalog with that execution or category is a key the map must
 * have, so a service without a handler for it does not compile.
 */
import type { ToolNameWhere } from "./catalog.js";

/** The name of a tool a Project's Runner executes. */
export type RunnerToolName = ToolNameWhere<{ readonly execution: "runner" }>;
/** The name of a tool the gateway executes itself. */
export type GatewayToolName = ToolNameWhere<{ readonly execution: "gateway" }>;
/** The name of a tool the ref-resolver executes. */
export type RefResolverToolName = ToolNameWhere<{ readonly execution: "ref_resolver" }>;
/** The name of an agent tool (Agents, Tasks, Attempts, events): the ref-resolver's agent store runs each. */
export type AgentToolName = ToolNameWhere<{ readonly category: "agents" }>;
/** The name of a presentation tool (cards and their helpers): the gateway's presentation composes each. */
export type PresentationToolName = ToolNameWhere<{ readonly category: "presentation" }>;
