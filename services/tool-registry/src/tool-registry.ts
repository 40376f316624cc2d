/**
 * The tool-registry service: admission and discovery over the canonical catalog. Pure; the
 * catalog itself lives in @webcodex/contracts so the gateway normalizes with the same code.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ToolRegistryService } from "@webcodex/proto";
import { admittedTools, directPolicy, isAdmissionProfile, isHostProfile, toolDefinitions } from "@webcodex/contracts";
import type { AdmissionContext } from "@webcodex/contracts";
import { createHash } from "node:crypto";

/**
 * The admission context a request names, or undefined when it names a profile that does not
 * exist: an unrecognised (or empty) profile admits nothing, never a default.
 */
export function admissionContext(admissionProfile: string, hostProfile: string): AdmissionContext | undefined {
  if (!isAdmissionProfile(admissionProfile) || !isHostProfile(hostProfile)) return undefined;
  return { admissionProfile, hostProfile };
}

/** Changes whenever any definition's model-visible facts change; gateways key caches on it. */
export const catalogVersion = createHash("sha256")
  .update(JSON.stringify(toolDefinitions().map((d) => [d.name, d.description, d.inputSchema, d.direct, d.directFor, d.implemented, d.category])))
  .digest("hex")
  .slice(0, 16);

export function createToolRegistry(): ServiceImpl<typeof ToolRegistryService> {
  return {
    getAdmittedCatalog(req) {
      const context = admissionContext(req.admissionProfile, req.hostProfile);
      // Fail closed: a gateway asking for a profile this registry does not know is misconfigured.
      if (!context) throw new ConnectError("unknown admission or host profile", Code.InvalidArgument);
      return {
        catalogVersion,
        tools: admittedTools(context).map((d) => ({
          name: d.name,
          category: d.category,
          description: d.description,
          inputSchemaJson: JSON.stringify(d.inputSchema),
          directReason: directPolicy(d, context.hostProfile)?.reason ?? "",
          directRank: directPolicy(d, context.hostProfile)?.rank ?? 0,
          effect: d.effect,
        })),
      };
    },
  };
}
