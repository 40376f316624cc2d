/**
 * The tool-registry service: admission and discovery over the canonical catalog. Pure; the
 * catalog itself lives in @webcodex/contracts so the gateway normalizes with the same code.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ToolRegistryService } from "@webcodex/proto";
import { admittedTools, directPolicy, isAdmissionProfile, isHostProfile, toolDefinitions, withheldTools } from "@webcodex/contracts";
import type { AdmissionContext, ToolPolicy } from "@webcodex/contracts";
import { createHash } from "node:crypto";

/**
 * The admission context a request names, or undefined when it names a profile that does not
 * exist: an unrecognised (or empty) profile admits nothing, never a default.
 */
export function admissionContext(
  admissionProfile: string,
  hostProfile: string,
  policy?: { policy: ToolPolicy; tenant: string; oauthClient: string },
): AdmissionContext | undefined {
  if (!isAdmissionProfile(admissionProfile) || !isHostProfile(hostProfile)) return undefined;
  if (!policy) return { admissionProfile, hostProfile };
  // An empty client id is "no OAuth client", never a client named "".
  const subject = { tenant: policy.tenant, ...(policy.oauthClient !== "" ? { oauthClient: policy.oauthClient } : {}) };
  return { admissionProfile, hostProfile, policy: { policy: policy.policy, subject } };
}

/** Changes whenever any definition's model-visible facts change; gateways key caches on it. */
export const catalogVersion = createHash("sha256")
  .update(JSON.stringify(toolDefinitions().map((d) => [d.name, d.description, d.inputSchema, d.direct, d.directFor, d.implemented, d.category])))
  .digest("hex")
  .slice(0, 16);

/** `policy`: the operator's tool policy (config.ts loads and checks it at start-up). */
export function createToolRegistry(options: { policy?: ToolPolicy | undefined } = {}): ServiceImpl<typeof ToolRegistryService> {
  const policy = options.policy;
  return {
    getAdmittedCatalog(req) {
      // With a policy, a request that names no tenant cannot be evaluated: refused, never unfiltered.
      if (policy && req.tenant === "") throw new ConnectError("a tool policy is configured: the request must name the tenant", Code.InvalidArgument);
      const context = admissionContext(
        req.admissionProfile,
        req.hostProfile,
        policy ? { policy, tenant: req.tenant, oauthClient: req.oauthClient } : undefined,
      );
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
        withheldTools: withheldTools(context).map((d) => d.name),
      };
    },
  };
}
