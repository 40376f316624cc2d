/**
 * Admission and exposure: which canonical tools a caller may use, and how the current Host
 * discovers them. Exposure is presentation policy; it never grants authority.
 */
import { CODE_MODE_GUIDANCE, SKILLS_BOOTSTRAP_HINT } from "./bootstrap.js";
import { toolDefinitions, toolDefinition } from "./catalog.js";
import { ReasonCode } from "./failure.js";
import type { DirectPolicy, ToolCategory, ToolDefinition } from "./tool-definition.js";
import { policyAdmits } from "./tool-policy.js";
import type { ToolPolicy, ToolPolicySubject } from "./tool-policy.js";

/** Tenant admission profiles. read_only tenants see no tool that can change anything. */
export const ADMISSION_PROFILES = ["full", "read_only"] as const;
export type AdmissionProfile = (typeof ADMISSION_PROFILES)[number];
/**
 * Host profiles: "app" Hosts can mount MCP App presentation resources; "code_mode" Hosts get
 * run_code_cell Direct (ToolDefinition.directFor) and the Code Mode bootstrap guidance.
 */
export const HOST_PROFILES = ["generic", "app", "code_mode"] as const;
export type HostProfile = (typeof HOST_PROFILES)[number];

export function isAdmissionProfile(value: unknown): value is AdmissionProfile {
  return (ADMISSION_PROFILES as readonly unknown[]).includes(value);
}

export function isHostProfile(value: unknown): value is HostProfile {
  return (HOST_PROFILES as readonly unknown[]).includes(value);
}

export interface AdmissionContext {
  admissionProfile: AdmissionProfile;
  hostProfile: HostProfile;
  /** The operator's tool policy and who it is evaluated for; absent: no policy narrows admission. */
  policy?: { policy: ToolPolicy; subject: ToolPolicySubject };
}

/** Whether the operator's tool policy withholds `def` from this caller: to them it does not exist. */
export function isWithheld(def: ToolDefinition, context: AdmissionContext): boolean {
  return context.policy !== undefined && !policyAdmits(context.policy.policy, context.policy.subject, def);
}

/** The implemented tools the policy withholds from this caller (a call names them as unknown). */
export function withheldTools(context: AdmissionContext): ToolDefinition[] {
  return toolDefinitions().filter((d) => d.implemented && isWithheld(d, context));
}

export function isAdmitted(def: ToolDefinition, context: AdmissionContext): boolean {
  if (!def.implemented) return false;
  if (isWithheld(def, context)) return false;
  if (context.admissionProfile === "read_only" && def.effect !== "read_only" && def.effectByTarget !== true) return false;
  // Card helpers serve a mounted card: only App Hosts. The present_* tools themselves answer
  // any Host with their facts; only App Hosts see them in tools/list (listedTools).
  if (def.appOnly === true && context.hostProfile !== "app") return false;
  return true;
}

export function admittedTools(context: AdmissionContext): ToolDefinition[] {
  return toolDefinitions().filter((d) => isAdmitted(d, context));
}

/**
 * What MCP tools/list shows: Direct tools by rank, the app-only card helpers (admitted only
 * for App Hosts, marked `visibility: ["app"]` so the Host keeps them from the model), then the
 * two gateway entry points.
 */
export function listedTools(admitted: readonly ToolDefinition[], hostProfile: HostProfile = "generic"): ToolDefinition[] {
  // A card tool is listed where its card can be mounted; elsewhere it is reached by name.
  const direct = admitted
    .filter((d) => directPolicy(d, hostProfile) !== undefined && (d.appResource === undefined || hostProfile === "app"))
    .sort((a, b) => (directPolicy(a, hostProfile)?.rank ?? 0) - (directPolicy(b, hostProfile)?.rank ?? 0));
  const entries = admitted.filter((d) => d.gatewayEntry === true);
  const appOnly = admitted.filter((d) => d.appOnly === true);
  return [...direct, ...appOnly, ...entries];
}

/** A tool's Direct policy for a Host profile: its own, or the one its profile selects (directFor). */
export function directPolicy(def: ToolDefinition, hostProfile: HostProfile = "generic"): DirectPolicy | undefined {
  return def.direct ?? (def.directFor?.hostProfile === hostProfile ? def.directFor.policy : undefined);
}

/** What the model may discover (list_tools, read_tool_manifest): everything admitted except app-only card helpers. */
export function modelVisible(def: ToolDefinition): boolean {
  return def.appOnly !== true;
}

/** The MCP tool annotations (spec hints a Host may act on, e.g. to auto-approve read-only tools). */
export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** A tool's own annotations, from its effect and the catalog's hints (not for a forwarding tool). */
function ownAnnotations(def: ToolDefinition): ToolAnnotations {
  const readOnly = def.effect === "read_only";
  return {
    readOnlyHint: readOnly,
    destructiveHint: def.hints?.destructive ?? (def.effect === "workspace_write" || def.effect === "process_execution"),
    idempotentHint: def.hints?.idempotent ?? readOnly,
    openWorldHint: def.hints?.openWorld ?? def.effect === "process_execution",
  };
}

/**
 * The annotations of `def` as the catalog states its effect. A forwarding tool
 * (call_runtime_tool) gets the union over the tools it may run among `admitted`: read-only
 * only when every one of them is, destructive or open-world when any is. A tool whose effect
 * is its target's (mcp_tool) counts as read-only for a caller whose every other tool is
 * read-only: admission lets such a caller reach only targets the operator marks read-only.
 */
export function toolAnnotations(def: ToolDefinition, admitted: readonly ToolDefinition[] = toolDefinitions()): ToolAnnotations {
  if (def.forwards !== true) return ownAnnotations(def);
  const reachableDefs = admitted.filter((d) => d.implemented && gatewayRefusal(d.name) === undefined);
  const callerReadOnly = reachableDefs.every((d) => d.effect === "read_only" || d.effectByTarget === true);
  const reachable = reachableDefs.map((d) =>
    d.effectByTarget === true && callerReadOnly ? { ...ownAnnotations(d), readOnlyHint: true, destructiveHint: false } : ownAnnotations(d),
  );
  return {
    readOnlyHint: reachable.every((a) => a.readOnlyHint),
    destructiveHint: reachable.some((a) => a.destructiveHint),
    idempotentHint: reachable.every((a) => a.idempotentHint),
    openWorldHint: reachable.some((a) => a.openWorldHint),
  };
}

/** MCP's tool annotation defaults: what a Host assumes of a hint a descriptor does not state. */
export const MCP_ANNOTATION_DEFAULTS: Readonly<ToolAnnotations> = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };
const ANNOTATION_KEYS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const;

/** The MCP tools/list descriptor of one tool among an admitted selection: what a Host sees before any call. */
export function mcpToolDescriptor(def: ToolDefinition, admitted: readonly ToolDefinition[] = toolDefinitions()): Record<string, unknown> {
  const descriptor: Record<string, unknown> = { name: def.name, description: def.description, inputSchema: def.inputSchema };
  // Only hints that differ from MCP's defaults are sent: a Host reads an absent hint as its
  // default, so each tool states exactly what it is (and tools/list pays for nothing else).
  // The spec reads destructiveHint and idempotentHint only when readOnlyHint is false.
  const annotations = toolAnnotations(def, admitted);
  const stated: Partial<ToolAnnotations> = {};
  for (const key of ANNOTATION_KEYS) {
    if (annotations.readOnlyHint && (key === "destructiveHint" || key === "idempotentHint")) continue;
    if (annotations[key] !== MCP_ANNOTATION_DEFAULTS[key]) stated[key] = annotations[key];
  }
  if (Object.keys(stated).length > 0) descriptor["annotations"] = stated;
  // MCP Apps: the card resource a Host mounts (the legacy flat key too, for older Hosts), and
  // app-only helpers a Host keeps off the model's tool list.
  if (def.appResource !== undefined) descriptor["_meta"] = { ui: { resourceUri: def.appResource }, "ui/resourceUri": def.appResource };
  else if (def.appOnly === true) descriptor["_meta"] = { ui: { visibility: ["app"] } };
  return descriptor;
}

/**
 * The admitted tools a Host reaches only through call_runtime_tool, by name: what its
 * tools/list description names, so a model knows they exist without a discovery call.
 */
export function gatewayOnlyToolNames(admitted: readonly ToolDefinition[], hostProfile: HostProfile = "generic"): string[] {
  // Card helpers are the App's own and presentation tools are Direct: neither is named here.
  return admitted
    .filter(
      (d) =>
        toolRoute(d, hostProfile).primary === "call_runtime_tool" &&
        modelVisible(d) &&
        d.appResource === undefined &&
        directPolicy(d, hostProfile) === undefined,
    )
    .map((d) => d.name);
}

/** The MCP tools/list result for an admitted selection (the gateway serves it pre-built). */
export function toolsListResult(admitted: readonly ToolDefinition[], hostProfile: HostProfile = "generic"): { tools: Array<Record<string, unknown>> } {
  return { tools: listedTools(admitted, hostProfile).map((d) => mcpToolDescriptor(d, admitted)) };
}

/**
 * The sentence of the server instructions that names every tool reached through
 * call_runtime_tool, grouped by category: a model knows they exist without a discovery call,
 * and the names cost nothing in tools/list. Admission still decides per caller.
 */
export function gatewayToolsInstruction(defs: readonly ToolDefinition[], hostProfile: HostProfile = "generic"): string {
  const groups = new Map<string, string[]>();
  for (const name of gatewayOnlyToolNames(
    defs.filter((d) => d.implemented),
    hostProfile,
  )) {
    const def = defs.find((d) => d.name === name) as ToolDefinition;
    groups.set(def.category, [...(groups.get(def.category) ?? []), name]);
  }
  return `Through call_runtime_tool: ${[...groups].map(([category, names]) => `${category}: ${names.join(", ")}`).join("; ")}.`;
}

/**
 * The serialized tools/list budget: a Direct surface larger than this costs every Host turn.
 * Descriptors state only their non-default MCP annotations (docs/decisions/0036-tool-annotations.md).
 */
export const TOOLS_LIST_MAX_BYTES = 8 * 1024;

export type Route = { primary: "direct" | "call_runtime_tool"; fallback: "call_runtime_tool" | null };

/** How a tool is reached. Presentation tools and app-only helpers have no gateway fallback. */
export function toolRoute(def: ToolDefinition, hostProfile: HostProfile = "generic"): Route {
  if (directPolicy(def, hostProfile) !== undefined || def.gatewayEntry === true || def.appOnly === true) {
    return {
      primary: "direct",
      fallback:
        def.direct?.reason === "Presentation" || def.direct?.reason === "Continuation" || def.gatewayEntry === true || def.appOnly === true
          ? null
          : "call_runtime_tool",
    };
  }
  return { primary: "call_runtime_tool", fallback: null };
}

/** Sorted, non-overlapping category views of an already-admitted selection. */
export function groupToolNamesByCategory(admitted: readonly ToolDefinition[]): Partial<Record<ToolCategory, string[]>> {
  const groups: Partial<Record<ToolCategory, string[]>> = {};
  for (const def of admitted) (groups[def.category] ??= []).push(def.name);
  for (const names of Object.values(groups)) names.sort();
  return groups;
}

/** Why call_runtime_tool refuses to run a tool; admission of the tool itself is checked after. */
export interface GatewayRefusal {
  reason_code: ReasonCode;
  detail_code: string;
  message: string;
}

/**
 * Why call_runtime_tool may not run `tool`, or undefined when it may: an unknown (or withheld) name, one of
 * the two gateway entry points (called directly, never forwarded), or a Presentation or
 * Continuation descriptor, which the Host must call directly to mount its card.
 */
export function gatewayRefusal(tool: string, withheld?: ReadonlySet<string>): GatewayRefusal | undefined {
  // A tool the operator's policy withholds from this caller is, to them, a name that does not exist.
  const def = withheld?.has(tool) === true ? undefined : toolDefinition(tool);
  if (!def) return { reason_code: ReasonCode.unknownTool, detail_code: "unknown_tool", message: "No tool has this name; see list_tools." };
  if (def.gatewayEntry === true)
    return { reason_code: ReasonCode.invalidValue, detail_code: "gateway_entry_point", message: `Call ${def.name} directly, not through call_runtime_tool.` };
  if (def.appOnly === true) {
    return { reason_code: ReasonCode.presentationToolNotCallable, detail_code: "app_only", message: "Only a mounted card calls this tool." };
  }
  if (def.direct?.reason === "Presentation" || def.direct?.reason === "Continuation") {
    return {
      reason_code: ReasonCode.presentationToolNotCallable,
      detail_code: "not_gateway_callable",
      message: "Call this tool directly so the Host can present it.",
    };
  }
  return undefined;
}

/** The tool a call runs and its arguments, looking through call_runtime_tool (before validation). */
export function forwardedCall(tool: string, rawArgs: unknown): { tool: string; args: unknown } {
  if (tool !== "call_runtime_tool" || typeof rawArgs !== "object" || rawArgs === null) return { tool, args: rawArgs };
  const outer = rawArgs as Record<string, unknown>;
  return typeof outer["tool"] === "string" ? { tool: outer["tool"], args: outer["arguments"] } : { tool, args: rawArgs };
}

/**
 * The MCP server instructions for one admitted selection: the workflow it can follow and the
 * tools it reaches through call_runtime_tool. A read-only caller's instructions name no tool
 * it may not call.
 */
export function serverInstructions(admitted: readonly ToolDefinition[], hostProfile: HostProfile = "generic"): string {
  const has = (name: string) => admitted.some((d) => d.name === name);
  const work = [
    has("read_files") ? "Read with read_files (batch related ranges)" : undefined,
    has("search_project_texts") ? "search with search_project_texts (several queries per call)" : undefined,
    has("edit_project_files") ? "edit with edit_project_files using the read_revision you read" : undefined,
  ].filter((s) => s !== undefined);
  const readOnly = admitted.every((d) => d.effect === "read_only");
  return (
    "WebCodex gives you tools for project workspaces. Start with list_projects and pass its project_ref (~p1) as `project`. " +
    (work.length > 0 ? `${work.join(", ")}. ` : "") +
    (readOnly ? "Your access is read-only: no tool here changes a project. " : "") +
    "read_tool_manifest gives any tool's schema. " +
    "Failures carry reason_code and, where a retry is provable, a follow_up to run unchanged. " +
    (has("list_skills") ? `${SKILLS_BOOTSTRAP_HINT} ` : "") +
    gatewayToolsInstruction(admitted, hostProfile) +
    (hostProfile === "code_mode" && has("run_code_cell") ? ` ${CODE_MODE_GUIDANCE}` : "")
  );
}
