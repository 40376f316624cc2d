/**
 * The ref-resolver service: durable identities and principal-scoped refs. The caller comes
 * from request headers (set by the gateway or a service), never from the request body.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { RefResolverService } from "@webcodex/proto";
import { failureToWire, principalFromHeaders, runMigrations } from "@webcodex/platform";
import type { Database } from "@webcodex/platform";
import { createProjectStore } from "./projects/project-store.js";
import type { ProjectRecord } from "./projects/project-store.js";
import { refResolverMigrations } from "./migrations.js";

export const REF_RESOLVER_SCHEMA = "refs";

export async function migrateRefResolver(db: Database): Promise<string[]> {
  return runMigrations(db, REF_RESOLVER_SCHEMA, refResolverMigrations);
}

const toProto = (p: ProjectRecord) => ({
  canonicalId: p.canonicalId,
  clientId: p.clientId,
  projectId: p.projectId,
  rootIdentity: p.rootIdentity,
  incarnation: BigInt(p.incarnation),
  name: p.name,
});

export function createRefResolver(deps: { db: Database; liveCacheTtlMs?: number }): ServiceImpl<typeof RefResolverService> {
  const projects = createProjectStore(deps.db, deps.liveCacheTtlMs !== undefined ? { liveCacheTtlMs: deps.liveCacheTtlMs } : {});
  return {
    async registerProject(req) {
      const { project, newIncarnation } = await projects.register({ clientId: req.clientId, projectId: req.projectId, rootIdentity: req.rootIdentity, name: req.name || req.projectId });
      return { project: toProto(project), newIncarnation };
    },
    async listProjects(_req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const entries = await projects.list(principal);
      return { projects: entries.map((e) => ({ project: toProto(e.project), projectRef: e.ref })) };
    },
    async resolveProject(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const resolution = await projects.resolve(principal, req.selector);
      return resolution.ok ? { project: toProto(resolution.project) } : { failure: failureToWire(resolution.failure) };
    },
  };
}
