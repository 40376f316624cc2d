/**
 * The Job RPCs the gateway's cards use: RecordJobContinuation (a Job's continuation record read
 * or advanced, with the Job's current state) and ListProjectJobs (a Project's open Jobs).
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { parseCanonicalProjectId, PipelineStage, ReasonCode, toolDefinition, toolFailure, failureToWire } from "@webcodex/contracts";
import type { ToolDefinition } from "@webcodex/contracts";
import { principalFromHeaders } from "@webcodex/platform";
import type { ContinuationAction, JobContinuationRecord } from "../jobs/job-continuations.js";
import type { BrokerContext } from "../broker-context.js";
import type { RunnerCalls } from "../routing/runner-calls.js";

export function createJobRpcs(
  ctx: BrokerContext,
  calls: Pick<RunnerCalls, "desk" | "dispatchToHolder">,
): Pick<ServiceImpl<typeof RunnerBrokerService>, "recordJobContinuation" | "listProjectJobs"> {
  const { deps } = ctx;
  const { desk, dispatchToHolder } = calls;

  return {
    async recordJobContinuation(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const project = parseCanonicalProjectId(req.projectCanonicalId);
      if (!project || project.clientId !== principal.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
      const notFound = {
        jobJson: "",
        applied: false,
        failure: failureToWire(
          toolFailure(ReasonCode.jobNotFound, PipelineStage.resolution, {
            detail_code: "no_job_record",
            evidence: { field: "/job_id" },
            message: "No Job with this id is running or recorded in this project (a run that finished within its wait has no Job).",
          }),
        ),
      };
      if (!desk || !deps.jobs || !deps.continuations) return notFound;
      const key = { projectCanonicalId: req.projectCanonicalId, jobId: req.jobId };
      const rec = await deps.jobs.get(key);
      if (!rec || rec.clientId !== principal.clientId) return notFound;
      let applied = true;
      let record: JobContinuationRecord | undefined;
      if (req.action === "read") record = await deps.continuations.get(key);
      else if (["present", "claim", "accepted", "rejected", "uncertain"].includes(req.action))
        ({ applied, record } = await deps.continuations.apply(key, principal.clientId, req.action as ContinuationAction));
      else throw new ConnectError("unknown continuation action", Code.InvalidArgument);
      const observed = await desk.observe(req.projectCanonicalId, { job_ids: [req.jobId] }, ctx.signal, (jobIds) =>
        dispatchToHolder(
          {
            callId: randomUUID(),
            tool: "observe_jobs",
            argumentsJson: JSON.stringify({ job_ids: jobIds }),
            rootIdentity: req.rootIdentity,
            projectCanonicalId: req.projectCanonicalId,
          },
          toolDefinition("observe_jobs") as ToolDefinition,
          ctx.signal,
        ),
      );
      const job = observed.failure
        ? { job_id: req.jobId, state: "unknown" }
        : ((JSON.parse(observed.resultJson) as { jobs?: unknown[] }).jobs?.[0] ?? { job_id: req.jobId, state: "unknown" });
      return {
        jobJson: JSON.stringify(job),
        applied,
        ...(record
          ? {
              continuation: {
                dispatch: record.dispatch,
                presentedAtUnixMs: BigInt(record.presentedAtMs),
                dispatchAtUnixMs: BigInt(record.dispatchAtMs ?? 0),
                freshTurnAtUnixMs: BigInt(record.freshTurnAtMs ?? 0),
                consumedAtUnixMs: BigInt(record.consumedAtMs ?? 0),
              },
            }
          : {}),
      };
    },

    async listProjectJobs(req, ctx) {
      const principal = principalFromHeaders(ctx.requestHeader);
      const project = parseCanonicalProjectId(req.projectCanonicalId);
      if (!project || project.clientId !== principal.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
      if (!deps.jobs) return { jobs: [], truncated: false };
      const limit = 20;
      const open = await deps.jobs.openProjectJobs(req.projectCanonicalId, limit + 1);
      return {
        jobs: open.slice(0, limit).map((j) => ({ jobId: j.jobId, state: j.state, tool: j.tool, createdAtUnixMs: BigInt(j.createdAtMs) })),
        truncated: open.length > limit,
      };
    },
  };
}
