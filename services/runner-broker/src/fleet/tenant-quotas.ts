/**
 * Per-tenant quotas on the Runner fleet, typed: live Runners, Projects (workspaces), Project
 * creations per hour, and concurrent Jobs (job-quota.ts). A refusal is `quota_exceeded` with the quota's name, its limit and the
 * tenant's use; nothing was created or started. The checks take the tenant's current counts
 * from the provisioner that owns them (pods or processes, workspace claims or directories).
 */
import { canonicalProjectId, PipelineStage, ReasonCode, toolFailure, waitForJobFollowUp, waitForProjectFollowUp } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";

export type TenantQuotaName = "live_runners" | "projects" | "project_creations_per_hour" | "concurrent_jobs";

export interface TenantQuotaLimits {
  /** Live Runners per tenant; absent or 0: unlimited. */
  liveRunners?: number;
  /** Projects (workspaces) per tenant; absent or 0: unlimited. */
  projects?: number;
  /** Project creations per tenant in any 60-minute window; absent or 0: unlimited. */
  creationsPerHour?: number;
  /** Jobs running at once per tenant (all its Projects); absent or 0: unlimited. */
  concurrentJobs?: number;
}

export interface QuotaUse {
  quota: TenantQuotaName;
  limit: number;
  use: number;
}

const HOUR_MS = 3_600_000;

/**
 * The refusal a caller sees: the quota, its limit and use; a follow-up where a wait can clear it
 * (for concurrent Jobs, `waitJobId` names an open Job of this Project to wait for).
 */
export function tenantQuotaFailure(over: QuotaUse, w: ProjectWorkspace, retryAfterMs?: number, waitJobId?: string): ToolFailure {
  const id = canonicalProjectId(w.clientId, w.projectId);
  const evidence = { quota: over.quota, limit: over.limit, use: over.use, ...(retryAfterMs !== undefined ? { retry_after_ms: retryAfterMs } : {}) };
  switch (over.quota) {
    case "live_runners":
      return toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
        detail_code: "live_runners",
        evidence,
        message: `Your tenant runs ${over.use} of its ${over.limit} live Runners; nothing was run. A Runner stops after its idle timeout, then this project can start.`,
        follow_up: waitForProjectFollowUp(id),
      });
    case "projects":
      return toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
        detail_code: "projects",
        evidence,
        message: `Your tenant has ${over.use} of its ${over.limit} projects; nothing was created. Delete a project (delete_project) to make room.`,
      });
    case "project_creations_per_hour":
      return toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
        detail_code: "project_creations_per_hour",
        evidence,
        message: `Your tenant created ${over.use} of its ${over.limit} projects allowed per hour; nothing was created. Retry after the time in the evidence.`,
      });
    case "concurrent_jobs":
      return toolFailure(ReasonCode.quotaExceeded, PipelineStage.dispatch, {
        detail_code: "concurrent_jobs",
        evidence,
        message: `Your tenant has ${over.use} of its ${over.limit} Jobs running; nothing was run. Retry once one of them has ended${waitJobId !== undefined ? " (the follow-up waits for this project's)" : ""}.`,
        ...(waitJobId !== undefined ? { follow_up: waitForJobFollowUp(id, waitJobId) } : {}),
      });
  }
}

export interface TenantQuotas {
  readonly limits: Readonly<TenantQuotaLimits>;
  /** Before a Runner starts: the tenant's live Runners (not counting this Project's). */
  checkStart(liveOfTenant: number): QuotaUse | undefined;
  /** Before a Project is created: its projects and creations in the last hour; the wait until one leaves the window. */
  checkCreate(w: ProjectWorkspace, projectsOfTenant: number): { over: QuotaUse; retryAfterMs?: number } | undefined;
  /** Counts a creation against the hourly window. */
  recordCreate(w: ProjectWorkspace): void;
}

export function createTenantQuotas(limits: TenantQuotaLimits, now: () => number = Date.now): TenantQuotas {
  /** client id → creation times within the last hour (oldest first). */
  const creations = new Map<string, number[]>();
  const recent = (clientId: string) => {
    const t = now();
    const list = (creations.get(clientId) ?? []).filter((at) => t - at < HOUR_MS);
    if (list.length > 0) creations.set(clientId, list);
    else creations.delete(clientId);
    return list;
  };
  const set = (n: number | undefined) => (n !== undefined && n > 0 ? n : undefined);
  return {
    limits,
    checkStart(live) {
      const limit = set(limits.liveRunners);
      return limit !== undefined && live >= limit ? { quota: "live_runners", limit, use: live } : undefined;
    },
    checkCreate(w, projects) {
      const maxProjects = set(limits.projects);
      if (maxProjects !== undefined && projects >= maxProjects) return { over: { quota: "projects", limit: maxProjects, use: projects } };
      const perHour = set(limits.creationsPerHour);
      if (perHour === undefined) return undefined;
      const list = recent(w.clientId);
      if (list.length < perHour) return undefined;
      return {
        over: { quota: "project_creations_per_hour", limit: perHour, use: list.length },
        retryAfterMs: Math.max(0, (list[list.length - perHour] ?? now()) + HOUR_MS - now()),
      };
    },
    recordCreate(w) {
      const list = recent(w.clientId);
      list.push(now());
      creations.set(w.clientId, list);
    },
  };
}
