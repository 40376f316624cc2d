/**
 * A call's scope: the Project its `project` selector names, resolved and authorized for the
 * caller at the ref-resolver (the resolution stage). Runner tools and code cells both start here.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import { failureFromWire, PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import { dependencyFailure, timedStage } from "../call-context.js";
import type { CallContext, ProjectAddress } from "../call-context.js";

export type ProjectScope = { ok: true; project: ProjectAddress } | { ok: false; failure: ToolFailure };

/**
 * Resolves `selector` for the caller as the call's resolution stage and records the canonical
 * Project on the call (its audit row names it). A refusal is the resolver's own failure; an
 * unreachable resolver is dependency_unavailable with nothing run.
 */
export async function resolveCallProject(refResolver: Client<typeof RefResolverService>, selector: string, ctx: CallContext): Promise<ProjectScope> {
  let resolved;
  try {
    resolved = await timedStage(ctx.stages, PipelineStage.resolution, () =>
      refResolver.resolveProject({ selector, recordUse: true }, { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) }),
    );
  } catch (error) {
    return { ok: false, failure: dependencyFailure(error, PipelineStage.resolution, false) };
  }
  if (resolved.failure || !resolved.project)
    return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution) };
  ctx.projectCanonicalId = resolved.project.canonicalId;
  return { ok: true, project: { canonicalId: resolved.project.canonicalId, rootIdentity: resolved.project.rootIdentity } };
}
