/**
 * Admission and exposure: which canonical tools a caller may use, and how the current Host
 * discovers them. Exposure is presentation policy; it never grants authority.
 */
import { toolDefinitions, toolDefinition } from "./catalog.js";
import type { ToolCategory, ToolDefinition } from "./tool-definition.js";

/** Tenant admission profiles. read_only tenants see no tool that can change anything. */
export const ADMISSION_PROFILES = ["full", "read_only"] as const;
export type AdmissionProfile = (typeof ADMISSION_PROFILES)[number];
/** Host profiles: "app" Hosts can mount MCP App presentation resources. */
export const HOST_PROFILES = ["generic", "app"] as const;
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
}

export function isAdmitted(def: ToolDefinition, context: AdmissionContext): boolean {
  if (!def.implemented) return false;
  if (context.admissionProfile === "read_only" && def.effect !== "read_only") return false;
  if (def.category === "presentation" && context.hostProfile !== "app") return false;
  return true;
}

export function admittedTools(context: AdmissionContext): ToolDefinition[] {
  return toolDefinitions().filter((d) => isAdmitted(d, context));
}

/** What MCP tools/list shows: Direct tools by rank, then the two gateway entry points. */
export function listedTools(admitted: readonly ToolDefinition[]): ToolDefinition[] {
  const direct = admitted.filter((d) => d.direct !== undefined).sort((a, b) => (a.direct?.rank ?? 0) - (b.direct?.rank ?? 0));
  const entries = admitted.filter((d) => d.gatewayEntry === true);
  return [...direct, ...entries];
}

/** The MCP tools/list descriptor of one tool: what a Host sees before any call. */
export function mcpToolDescriptor(def: ToolDefinition): Record<string, unknown> {
  const descriptor: Record<string, unknown> = { name: def.name, description: def.description, inputSchema: def.inputSchema };
  if (def.effect === "read_only") descriptor["annotations"] = { readOnlyHint: true };
  return descriptor;
}

/** The MCP tools/list result for an admitted selection (the gateway serves it pre-built). */
export function toolsListResult(admitted: readonly ToolDefinition[]): { tools: Array<Record<string, unknown>> } {
  return { tools: listedTools(admitted).map(mcpToolDescriptor) };
}

/** The serialized tools/list budget: a Direct surface larger than this costs every Host turn. */
export const TOOLS_LIST_MAX_BYTES = 8 * 1024;

export type Route = { primary: "direct" | "call_runtime_tool"; fallback: "call_runtime_tool" | null };

/** How a tool is reached. Presentation tools have no gateway fallback. */
export function toolRoute(def: ToolDefinition): Route {
  if (def.direct !== undefined || def.gatewayEntry === true) {
    return { primary: "direct", fallback: def.direct?.reason === "Presentation" || def.direct?.reason === "Continuation" || def.gatewayEntry === true ? null : "call_runtime_tool" };
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

/** Whether call_runtime_tool may run `tool`: Presentation/Continuation descriptors must be called directly. */
export function callableThroughGateway(tool: string): boolean {
  const def = toolDefinition(tool);
  return def !== undefined && def.gatewayEntry !== true && def.direct?.reason !== "Presentation" && def.direct?.reason !== "Continuation";
}
