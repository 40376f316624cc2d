/**
 * The Project lifecycle tools run in the gateway: create_project, wait_for_project_ready and
 * delete_project, each a conversation with the ref-resolver (ownership, refs) and the broker
 * (the Project's Runner).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import { canonicalProjectId, clampRule, PipelineStage, parseCanonicalProjectId, ReasonCode, toolFailure, failureFromWire } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { ToolInput } from "@webcodex/contracts";
import { dependencyFailure, now } from "../call-context.js";
import type { CallContext, Outcome } from "../call-context.js";
import type { RunnerStates } from "./runner-states.js";

export interface ProjectLifecycleDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  logger: Logger;
  runnerStates: RunnerStates;
}

/** The wait create_project and wait_for_project_ready take when none is given (their clamp rule owns it). */
const WAIT_DEFAULT_MS = clampRule("wait_for_project_ready", "wait_ms").default;

export function createProjectLifecycle(deps: ProjectLifecycleDeps) {
  /**
   * create_project: the ref-resolver records the owner and visibility of the new address, the
   * broker's provisioner starts its Runner (which clones the repository with the tenant's
   * credential); then the call waits up to wait_ms for the Project to be ready.
   */
  async function createProject(args: ToolInput<"create_project">, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const name = args.name;
    const source: { git?: { url: string; ref?: string }; empty?: Record<string, never> } = args.source;
    const declared = await deps.refResolver.declareProject({ projectId: name, name, visibility: args.visibility ?? "private" }, options);
    if (declared.failure) return { ok: false, failure: failureFromWire(declared.failure) };
    ctx.projectCanonicalId = canonicalProjectId(ctx.caller.principal.clientId, name);
    try {
      await deps.broker.ensureProjectRunner(
        {
          clientId: ctx.caller.principal.clientId,
          projectId: name,
          sourceGitUrl: source.git?.url ?? "",
          sourceGitRef: source.git?.ref ?? "",
          createWorkspace: true,
        },
        options,
      );
    } catch (error) {
      if (ConnectError.from(error).code === Code.FailedPrecondition) {
        return {
          ok: false,
          failure: toolFailure(ReasonCode.dependencyUnavailable, PipelineStage.dispatch, {
            detail_code: "no_provisioner",
            message: "This deployment cannot create projects (no Runner provisioner is configured); nothing was created.",
          }),
        };
      }
      return { ok: false, failure: dependencyFailure(error, PipelineStage.dispatch, true) };
    }
    return awaitProjectReady(name, args.wait_ms ?? WAIT_DEFAULT_MS, ctx);
  }

  /** wait_for_project_ready: the caller's own Project only. */
  function waitForProjectReady(args: ToolInput<"wait_for_project_ready">, ctx: CallContext): Promise<Outcome> {
    const address = parseCanonicalProjectId(args.project);
    if (!address || address.clientId !== ctx.caller.principal.clientId)
      return Promise.resolve({
        ok: false,
        failure: toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution, { message: "No such project for this caller; call list_projects." }),
      });
    return awaitProjectReady(address.projectId, args.wait_ms ?? WAIT_DEFAULT_MS, ctx);
  }

  /**
   * Ready: the caller can resolve the Project and its Runner takes calls. Failed: the
   * provisioner's structured reason. Otherwise pending once wait_ms has passed.
   */
  async function awaitProjectReady(projectId: string, waitMs: number, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    const clientId = ctx.caller.principal.clientId;
    const id = canonicalProjectId(clientId, projectId);
    const deadline = now() + waitMs;
    for (;;) {
      const provisioning = await deps.broker.getProjectProvisioning({ clientId, projectId }, options);
      if (provisioning.state === "failed" && provisioning.failure) {
        // Nothing is left behind: the Runner (a crash-looping pod, say) and its volume go.
        await deps.broker
          .removeProjectRunner({ clientId, projectId, keepWorkspace: false }, options)
          .catch((error: unknown) => deps.logger.warn("cleanup after a failed create_project failed", { error: ConnectError.from(error).message }));
        return { ok: false, failure: failureFromWire(provisioning.failure) };
      }
      if (provisioning.state === "unschedulable" && provisioning.failure) return { ok: false, failure: failureFromWire(provisioning.failure) };
      const issued = await deps.refResolver.issueProjectRef({ selector: id }, options);
      if (!issued.failure && issued.project) {
        const states = await deps.runnerStates([issued.project], ctx);
        if (states[id] === "ready") return { ok: true, result: { project_ref: issued.projectRef, project_id: id } };
      } else if (provisioning.state === "unknown" || provisioning.state === "ready") {
        return {
          ok: false,
          failure: toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution, { message: "No such project for this caller; call list_projects." }),
        };
      }
      const left = deadline - now();
      if (left <= 0) return { ok: true, result: { project_id: id, project_state: "pending" } };
      await new Promise((r) => setTimeout(r, Math.min(100, left)));
    }
  }

  /** delete_project: its owner or a tenant admin stops its Runner, then retires it (refs fail closed). */
  async function deleteProject(args: ToolInput<"delete_project">, ctx: CallContext): Promise<Outcome> {
    const options = { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) };
    // A tenant admin may delete any of the tenant's Projects, a member's private one included.
    const resolved = await deps.refResolver.resolveProject({ selector: args.project, manage: true }, options);
    if (resolved.failure || !resolved.project)
      return { ok: false, failure: resolved.failure ? failureFromWire(resolved.failure) : toolFailure(ReasonCode.projectNotFound, PipelineStage.resolution) };
    const project = resolved.project;
    ctx.projectCanonicalId = project.canonicalId;
    if (project.ownerSubject !== ctx.caller.principal.subject && !ctx.caller.principal.tenantAdmin) {
      return {
        ok: false,
        failure: toolFailure(ReasonCode.notProjectOwner, PipelineStage.authorization, { message: "Only the project's owner or a tenant admin may delete it." }),
      };
    }
    const keep = args.keep_workspace === true;
    try {
      await deps.broker.removeProjectRunner({ clientId: project.clientId, projectId: project.projectId, keepWorkspace: keep }, options);
    } catch (error) {
      if (ConnectError.from(error).code !== Code.FailedPrecondition) return { ok: false, failure: dependencyFailure(error, PipelineStage.dispatch, true) };
    }
    await deps.refResolver.retireProject({ clientId: project.clientId, projectId: project.projectId }, options);
    return { ok: true, result: { project_id: project.canonicalId, ...(keep ? { workspace_kept: true } : {}) } };
  }

  return { createProject, waitForProjectReady, deleteProject };
}
