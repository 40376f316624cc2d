/**
 * The fleet and provisioning RPCs: GetFleetStatus (one counting path for both modes),
 * GetProjectRunnerStates, and a Project's Runner started, its provisioning state read, or the
 * Runner removed, each for the caller's own workspace only.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { canonicalProjectId, failureToWire } from "@webcodex/contracts";
import { principalFromHeaders } from "@webcodex/platform";
import type { ProjectWorkspace } from "../provisioning/provisioner.js";
import { fleetRows, observeFleet, summarizeFleet } from "../fleet/fleet-status.js";
import type { BrokerContext } from "../broker-context.js";
import { unschedulableFailure } from "../routing/route.js";
import type { Routing } from "../routing/route.js";

export function createFleetRpcs(
  ctx: BrokerContext,
  routing: Pick<Routing, "projectRunnerState">,
): Pick<
  ServiceImpl<typeof RunnerBrokerService>,
  "getFleetStatus" | "getProjectRunnerStates" | "ensureProjectRunner" | "getProjectProvisioning" | "removeProjectRunner"
> {
  const { deps, provisioningSeconds, provisioningStarted, leases, limiter } = ctx;
  const { projectRunnerState } = routing;

  const ownWorkspace = (ctx: HandlerContext, w: ProjectWorkspace) => {
    const principal = principalFromHeaders(ctx.requestHeader);
    if (principal.clientId !== w.clientId) throw new ConnectError("project not visible to this client", Code.PermissionDenied);
    if (!w.projectId) throw new ConnectError("project_id is required", Code.InvalidArgument);
  };

  return {
    async getFleetStatus(req) {
      const observation = await observeFleet({
        registry: deps.registry,
        leases,
        limiter,
        ...(deps.jobs ? { jobs: deps.jobs } : {}),
        ...(req.clientId ? { clientId: req.clientId } : {}),
      });
      const s = summarizeFleet(observation);
      const summary = {
        runnersTotal: s.runnersTotal,
        runnersConnected: s.runnersConnected,
        runnersLost: s.runnersLost,
        runnersStandby: s.runnersStandby,
        projectsTotal: s.projectsTotal,
        projectsRoutable: s.projectsRoutable,
        jobs: {
          active: s.jobs.active,
          running: s.jobs.running,
          queued: s.jobs.queued,
          recovering: s.jobs.recovering,
          lostAfterReconcile: s.jobs.lostAfterReconcile,
        },
        serverProtocolGeneration: s.serverProtocolGeneration,
        protocolGenerations: s.protocolGenerations,
        builds: s.builds,
        protocolAligned: s.protocolAligned,
        buildAligned: s.buildAligned,
        baselineFaults: s.baselineFaults,
        connectionStates: s.connectionStates,
        projectConcurrencyLimit: s.projectConcurrencyLimit,
        inFlight: s.inFlight,
        containmentModes: s.containmentModes,
        separateJobUidRunners: s.separateJobUidRunners,
        recoveredWrites: s.recoveredWrites,
      };
      // Sparse status branches here, before any row is built.
      if (req.summaryOnly) return { summary };
      return {
        summary,
        runners: fleetRows(observation).map((r) => ({
          runnerId: r.runnerId,
          clientId: r.clientId,
          projectId: r.projectId,
          connectionState: r.connectionState,
          protocolGeneration: r.protocolGeneration,
          build: r.build,
          capabilities: r.capabilities,
          lastHeartbeatUnixMs: BigInt(r.lastHeartbeatMs),
          projectCanonicalId: r.canonicalId,
          leaseHeld: r.leaseHeld,
          fence: BigInt(r.fence),
          baselineComplete: r.baselineComplete,
          inFlight: r.inFlight,
          containment: r.containment ?? "",
          separateJobUid: r.separateJobUid === true,
          sandbox: r.sandbox ?? "",
          recoveredWrites: r.recoveredWrites ?? 0,
        })),
      };
    },

    async getProjectRunnerStates(req) {
      const states: Record<string, string> = {};
      await Promise.all(
        req.projects.map(async (p) => {
          states[p.projectCanonicalId] = await projectRunnerState(p.projectCanonicalId, p.rootIdentity);
        }),
      );
      return { states };
    },

    async ensureProjectRunner(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      if (!deps.provisioner) throw new ConnectError("no Runner provisioner is configured", Code.FailedPrecondition);
      const source = req.sourceGitUrl
        ? { git: { url: req.sourceGitUrl, ...(req.sourceGitRef ? { ref: req.sourceGitRef } : {}) } }
        : req.createWorkspace
          ? {}
          : undefined;
      const requestedMs = Date.now();
      const r = await deps.provisioner.ensureRunner(w, source ? { source } : {});
      if (r.action !== "exists" && provisioningSeconds) provisioningStarted.set(canonicalProjectId(w.clientId, w.projectId), requestedMs);
      return { action: r.action, runnerName: r.name };
    },

    async getProjectProvisioning(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      const state = deps.provisioner?.provisioningState ? await deps.provisioner.provisioningState(w) : { state: "unknown" as const };
      if (state.state === "failed") return { state: state.state, failure: failureToWire(state.failure) };
      if (state.state === "unschedulable")
        return { state: state.state, failure: failureToWire(unschedulableFailure(state.condition, canonicalProjectId(w.clientId, w.projectId))) };
      return { state: state.state };
    },

    async removeProjectRunner(req, ctx) {
      const w = { clientId: req.clientId, projectId: req.projectId };
      ownWorkspace(ctx, w);
      if (!deps.provisioner) throw new ConnectError("no Runner provisioner is configured", Code.FailedPrecondition);
      const removed = await deps.provisioner.removeRunner(w, { keepWorkspace: req.keepWorkspace });
      // Its Runner is gone for good: no longer listed, counted or routed to.
      await deps.registry.forgetProject(canonicalProjectId(w.clientId, w.projectId));
      return { removed };
    },
  };
}
