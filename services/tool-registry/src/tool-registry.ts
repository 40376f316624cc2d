/**
 * The tool-registry service: admission and discovery over the canonical catalog. Pure; the
 * catalog itself lives in @webcodex/contracts so the gateway normalizes with the same code.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { ToolRegistryService } from "@webcodex/proto";
import { admittedTools, normalizeToolCall, toolDefinitions } from "@webcodex/contracts";
import type { AdmissionContext, AdmissionProfile, HostProfile } from "@webcodex/contracts";
import { createHash } from "node:crypto";

export function admissionContext(admissionProfile: string, hostProfile: string): AdmissionContext {
  return {
    admissionProfile: (admissionProfile === "read_only" ? "read_only" : "full") satisfies AdmissionProfile,
    hostProfile: (hostProfile === "app" ? "app" : "generic") satisfies HostProfile,
  };
}

/** Changes whenever any definition's model-visible facts change; gateways key caches on it. */
export const catalogVersion = createHash("sha256")
  .update(JSON.stringify(toolDefinitions().map((d) => [d.name, d.description, d.inputSchema, d.direct, d.implemented, d.category])))
  .digest("hex")
  .slice(0, 16);

export function createToolRegistry(): ServiceImpl<typeof ToolRegistryService> {
  return {
    getAdmittedCatalog(req) {
      const tools = admittedTools(admissionContext(req.admissionProfile, req.hostProfile));
      return {
        catalogVersion,
        tools: tools.map((d) => ({
          name: d.name,
          category: d.category,
          description: d.description,
          inputSchemaJson: JSON.stringify(d.inputSchema),
          directReason: d.direct?.reason ?? "",
          directRank: d.direct?.rank ?? 0,
          effect: d.effect,
        })),
      };
    },
    normalizeCall(req) {
      const context = admissionContext(req.admissionProfile, req.hostProfile);
      const admitted = new Set(admittedTools(context).map((d) => d.name));
      let args: unknown;
      try {
        args = req.argumentsJson === "" ? {} : JSON.parse(req.argumentsJson);
      } catch {
        return { tool: req.tool, argumentsJson: "", inputNormalizationCode: "", inputNormalizationHint: "", rejectionJson: JSON.stringify({ reason_code: "invalid_value", failure_stage: "normalization", detail_code: "arguments_not_json", state_changed: false, outcome_unknown: false }) };
      }
      const result = normalizeToolCall(req.tool, args, { isAdmitted: (t) => admitted.has(t) });
      if (!result.ok) return { tool: req.tool, argumentsJson: "", inputNormalizationCode: "", inputNormalizationHint: "", rejectionJson: JSON.stringify(result.failure) };
      return {
        tool: result.tool,
        argumentsJson: JSON.stringify(result.arguments),
        inputNormalizationCode: result.normalization?.code ?? "",
        inputNormalizationHint: result.normalization?.hint ?? "",
        rejectionJson: "",
      };
    },
  };
}
