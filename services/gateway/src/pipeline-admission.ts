/**
 * A call's admission: the caller's catalog (scope first, then the registry's admitted and
 * withheld names), and the unwrapping of call_runtime_tool so the inner call is normalized,
 * authorized and audited as itself.
 */
import { PipelineStage, forwardedCall, gatewayRefusal, normalizeToolCall, toolFailure } from "@webcodex/contracts";
import type { HostProfile, NormalizeContext, ToolFailure } from "@webcodex/contracts";
import type { Caller } from "./auth.js";
import { checkToolScope } from "./auth/scopes.js";
import { dependencyFailure } from "./call-context.js";
import type { AdmittedCatalog, CatalogCache } from "./catalog-cache.js";

/**
 * The admission of a call: the catalog it was admitted against, or the failure that refused
 * it; either way the tool and arguments it is audited under (call_runtime_tool unwrapped).
 */
export type Admission = { ok: true; catalog: AdmittedCatalog; tool: string; args: unknown } | { ok: false; failure: ToolFailure; tool: string; args: unknown };

export function createAdmission(deps: { catalogs: CatalogCache; hostProfile: HostProfile }) {
  /** What normalization may know of the caller's catalog: admitted names, and names the tool policy withholds. */
  const normalizeContext = (catalog: AdmittedCatalog): NormalizeContext => ({
    isAdmitted: (n) => catalog.admitted.has(n),
    isWithheld: (n) => catalog.withheld?.has(n) === true,
  });

  /**
   * Admission: the caller's catalog, and the unwrapping of call_runtime_tool so the inner call
   * is normalized, authorized and audited as itself. A refusal names the tool it refused (the
   * inner one when call_runtime_tool forwarded a known tool).
   */
  async function admit(caller: Caller, tool: string, rawArgs: unknown): Promise<Admission> {
    // Defence in depth: the HTTP layer answers these with 403 before the pipeline runs.
    const missingScope = checkToolScope(caller, tool, rawArgs);
    if (missingScope) return { ok: false, failure: missingScope, ...forwardedCall(tool, rawArgs) };
    let catalog: AdmittedCatalog;
    try {
      catalog = await deps.catalogs.get(caller, caller.hostProfile ?? deps.hostProfile);
    } catch (error) {
      // Audited as the tool call_runtime_tool would have run, as every other refusal here.
      return { ok: false, failure: dependencyFailure(error, PipelineStage.admission, false), ...forwardedCall(tool, rawArgs) };
    }
    if (tool !== "call_runtime_tool" || !catalog.admitted.has(tool)) return { ok: true, catalog, tool, args: rawArgs };
    const outer = normalizeToolCall(tool, rawArgs, normalizeContext(catalog));
    if (!outer.ok) return { ok: false, failure: outer.failure, tool, args: rawArgs };
    const inner = outer.arguments["tool"] as string;
    const innerArgs = outer.arguments["arguments"];
    const refusal = gatewayRefusal(inner, catalog.withheld);
    if (refusal) {
      const failure = toolFailure(refusal.reason_code, PipelineStage.admission, {
        detail_code: refusal.detail_code,
        evidence: { field: "/tool" },
        message: refusal.message,
      });
      return { ok: false, failure, tool: inner, args: innerArgs };
    }
    return { ok: true, catalog, tool: inner, args: innerArgs };
  }

  return { admit, normalizeContext };
}
