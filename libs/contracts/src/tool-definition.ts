/**
 * ToolDefinition: the one owner of every static fact about a tool. Everything else
 * (tools/list, read_tool_manifest, list_tools, admission, audit effect class, docs) is
 * derived from `toolDefinitions()`; no second name/risk table exists anywhere.
 */
import type { JsonSchema } from "./json-schema.js";
import type { RunnerCapabilityId } from "./capabilities.js";

/** Complete, non-overlapping domain taxonomy: each tool has exactly one. */
export const ToolCategory = {
  discovery: "discovery",
  files: "files",
  execution: "execution",
  jobs: "jobs",
  validation: "validation",
  git: "git",
  sessions: "sessions",
  agents: "agents",
  presentation: "presentation",
  status: "status",
  skills: "skills",
} as const;
export type ToolCategory = (typeof ToolCategory)[keyof typeof ToolCategory];

/** What a successful call can change. Drives admission (read-only tenants) and audit durability. */
export const EffectClass = {
  readOnly: "read_only",
  workspaceWrite: "workspace_write",
  processExecution: "process_execution",
  durableState: "durable_state",
  presentation: "presentation",
} as const;
export type EffectClass = (typeof EffectClass)[keyof typeof EffectClass];

export type Risk = "low" | "medium" | "high";

/** Whose authority a call needs after its selector resolves. */
export type Authority = "principal" | "project_read" | "project_write" | "project_execute" | "session";

/** Which component executes the business operation. */
export type ExecutionForm = "gateway" | "ref_resolver" | "broker" | "runner";

/** Why a tool has a dedicated Direct descriptor. Absence means Gateway exposure. */
export type DirectReason = "CoreWorkflow" | "HostIntegration" | "Presentation" | "Continuation";

export interface DirectPolicy {
  readonly rank: number;
  readonly reason: DirectReason;
}

/**
 * A resource ceiling the runtime clamps instead of rejecting. `path` is a dotted path into
 * the arguments; `*` walks every array element.
 */
export interface ClampRule {
  readonly path: string;
  readonly ceiling: number;
  readonly minimum?: number;
  /** The value used when the argument is absent (stated in the description; the Runner, broker and services read it). */
  readonly default?: number;
}

export interface ToolDefinition {
  readonly name: string;
  readonly category: ToolCategory;
  /** Selection prose: limits and recovery, never routing. Hard ceiling 1536 characters. */
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly effect: EffectClass;
  /**
   * The MCP annotations beyond what `effect` implies (toolAnnotations derives the rest):
   * `destructive` when a successful call can remove or overwrite what was there (default: the
   * workspace_write and process_execution effects), `idempotent` when repeating the same call
   * has no further effect (default: read_only), `openWorld` when it reaches beyond WebCodex's
   * own state, e.g. a git remote or the network (default: process_execution).
   */
  readonly hints?: { readonly destructive?: boolean; readonly idempotent?: boolean; readonly openWorld?: boolean };
  /**
   * call_runtime_tool: its own `effect` only admits it; what a call changes is the effect of
   * the tool it runs, so its annotations are the union over the tools it may forward.
   */
  readonly forwards?: true;
  readonly risk: Risk;
  readonly authority: Authority;
  readonly execution: ExecutionForm;
  /** Present only for Direct tools. */
  readonly direct?: DirectPolicy;
  /**
   * Direct only for Hosts whose profile selects it (e.g. Code Mode): listed by this policy
   * for that Host profile, reached through call_runtime_tool by every other Host.
   */
  readonly directFor?: { readonly hostProfile: string; readonly policy: DirectPolicy };
  /** The two discovery entry points listed beside Direct tools (read_tool_manifest, call_runtime_tool). */
  readonly gatewayEntry?: boolean;
  /** False until the behaviour is built: such a tool is not admitted, never stubbed. */
  readonly implemented: boolean;
  readonly clamps?: readonly ClampRule[];
  /**
   * Other limits of the tool, by name (ceilings it refuses above, bounds of what it returns):
   * written here once; descriptions render them (`{{name}}`, `{{name:MiB}}`, `{{name:KiB}}`)
   * and the services that enforce them read them through `toolLimit`.
   */
  readonly limits?: Readonly<Record<string, number>>;
  /**
   * Top-level fields a success result may carry, as the model sees it (after projection;
   * job_attention, input_normalization and follow_up are added by the gateway to any tool).
   * Documented in docs/results.md and checked against real results by the contract suite.
   */
  readonly resultFields?: readonly string[];
  /**
   * Late model projection of a canonical success (sparse success); identity when absent.
   * Pure: it must not write into `canonical` (it may be frozen).
   */
  readonly projectSuccess?: (canonical: Readonly<Record<string, unknown>>) => Record<string, unknown>;
  /**
   * The MCP text content of a success, when it is not the JSON of structuredContent: a compact
   * rendering of the same facts (list-shaped results), so the answer does not carry them twice.
   */
  readonly textContent?: (result: Readonly<Record<string, unknown>>) => string;
  /**
   * The MCP App resource (`ui://…`, `text/html;profile=mcp-app`) an App-enabled Host mounts
   * for this tool's result: its descriptor carries `_meta.ui.resourceUri` there.
   */
  readonly appResource?: string;
  /**
   * `_meta.ui.visibility: ["app"]`: only the mounted card calls it. Admitted only for App Hosts,
   * never in the model's discovery (list_tools, read_tool_manifest), refused by call_runtime_tool.
   */
  readonly appOnly?: boolean;
  /**
   * The tool's part in detached Jobs, which the broker's job desk keeps records of: "start"
   * when its answer can start a Job, "observe" when it is answered from the Job records.
   */
  readonly jobs?: "start" | "observe";
  /**
   * The effect depends on the target the call names (mcp_tool): admitted to read-only callers
   * and the read scope, and the gateway then admits only targets the operator marks read-only
   * for them. `effect` is the class of the other targets (audit durability, Code Mode).
   */
  readonly effectByTarget?: boolean;
  /** Runner capabilities the given canonical arguments need; checked before dispatch. */
  readonly requiredCapabilities?: (args: Record<string, unknown>) => readonly RunnerCapabilityId[];
}

export const DESCRIPTION_MAX_CHARS = 1536;
