/**
 * A call's scope: the Project its `project` selector names, resolved and authorized for the
 * caller at the ref-resolver (the resolution stage). Runner tools and code cells both start here.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import { failureFromWire, PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { Result } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import { dependencyFailure, timedStage } from "../call-context.js";
import type { CallContext, ProjectAddress } from "../call-context.js";

export type ProjectScope = Result<{ project: ProjectAddress }>;

/**
 * The gateway's cache of resolved Projects, per (principal, selector), for at most `ttlMs`
 * (set to the ref-resolver's own live-cache TTL), so a warm Project needs no resolver hop.
 * Only resolutions that succeeded are kept: a refusal is asked again every time. A change at
 * the resolver (a Project retired, hidden, its root replaced) reaches callers of this gateway
 * within ttlMs plus the resolver's own TTL; a stale entry cannot act on a successor
 * incarnation (the call carries the root identity the Runner checks).
 */
export interface ResolutionCache {
  get(key: string): ProjectAddress | undefined;
  set(key: string, project: ProjectAddress): void;
  clear(): void;
}

export function createResolutionCache(o: { ttlMs: number; maxEntries?: number; now?: () => number }): ResolutionCache {
  const now = o.now ?? Date.now;
  const maxEntries = o.maxEntries ?? 10_000;
  const entries = new Map<string, { project: ProjectAddress; until: number }>();
  return {
    get(key) {
      const e = entries.get(key);
      if (!e) return undefined;
      if (e.until > now()) return e.project;
      entries.delete(key);
      return undefined;
    },
    set(key, project) {
      if (o.ttlMs <= 0) return;
      entries.delete(key);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(key, { project, until: now() + o.ttlMs });
    },
    clear() {
      entries.clear();
    },
  };
}

const cacheKey = (ctx: CallContext, selector: string) => {
  const p = ctx.caller.principal;
  return `${p.clientId}\0${p.subject}\0${p.tenantAdmin === true ? 1 : 0}\0${selector}`;
};

/**
 * Resolves `selector` for the caller as the call's resolution stage and records the canonical
 * Project on the call (its audit row names it). A refusal is the resolver's own failure; an
 * unreachable resolver is dependency_unavailable with nothing run.
 */
export async function resolveCallProject(
  refResolver: Client<typeof RefResolverService>,
  selector: string,
  ctx: CallContext,
  cache?: ResolutionCache,
): Promise<ProjectScope> {
  const key = cache ? cacheKey(ctx, selector) : "";
  const hit = cache?.get(key);
  if (hit) {
    await timedStage(ctx.stages, PipelineStage.resolution, () => undefined);
    ctx.projectCanonicalId = hit.canonicalId;
    return { ok: true, project: hit };
  }
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
  const project = { canonicalId: resolved.project.canonicalId, rootIdentity: resolved.project.rootIdentity };
  cache?.set(key, project);
  return { ok: true, project };
}
