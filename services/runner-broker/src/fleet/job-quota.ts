/**
 * The per-tenant concurrent-Jobs quota. A call of a tool that can start a Job (the catalog's
 * `jobs: "start"`: run_*, project_validate, cargo_*, go_test) is refused before dispatch while the tenant already has `limit` live
 * Jobs across its Projects (the Job records' live states, as fleet status counts them):
 * `quota_exceeded` / `concurrent_jobs` with the limit and use, nothing run, and a follow-up
 * waiting for one of this Project's open Jobs when it has one. Other tools are never refused.
 */
import { parseCanonicalProjectId } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import type { JobStore } from "../jobs/job-store.js";
import { JOB_START_TOOLS } from "../jobs/job-desk.js";
import { tenantQuotaFailure } from "./tenant-quotas.js";

export interface ConcurrentJobsQuota {
  readonly limit: number;
  /** The refusal for this call, or undefined when it may run. */
  check(call: { tool: string; projectCanonicalId: string }): Promise<ToolFailure | undefined>;
}

/** Undefined when `limit` is 0 (unlimited) or there are no Job records to count. */
export function createConcurrentJobsQuota(o: {
  limit: number;
  jobs: Pick<JobStore, "counts" | "openProjectJobs"> | undefined;
}): ConcurrentJobsQuota | undefined {
  const { limit, jobs } = o;
  if (!(limit > 0) || !jobs) return undefined;
  return {
    limit,
    async check(call) {
      if (!JOB_START_TOOLS.has(call.tool)) return undefined;
      const p = parseCanonicalProjectId(call.projectCanonicalId);
      if (!p) return undefined;
      const use = (await jobs.counts({ clientId: p.clientId })).active;
      if (use < limit) return undefined;
      const [mine] = await jobs.openProjectJobs(call.projectCanonicalId, 1);
      return tenantQuotaFailure({ quota: "concurrent_jobs", limit, use }, { clientId: p.clientId, projectId: p.projectId }, undefined, mine?.jobId);
    },
  };
}
