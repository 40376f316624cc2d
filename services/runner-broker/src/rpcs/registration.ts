/**
 * RegisterRunner and Heartbeat: a Runner's credential checked against the workspace it claims,
 * its Project registered with the ref-resolver, and the Project lease it holds (granted,
 * renewed, or taken over from a holder that is provably gone), with the Project's fence.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { canonicalProjectId, RunnerCapabilities, runnerCapabilityWire } from "@webcodex/contracts";
import { principalHeaders, provenNotSent } from "@webcodex/platform";
import { FenceUnavailableError } from "../leases/lease-store.js";
import type { BrokerContext } from "../broker-context.js";
import type { RunnerCalls } from "../routing/runner-calls.js";

/** How long registration waits for a reused address to say which Runner answers there. */
const REPLACED_HOLDER_CHECK_MS = 2_000;

export function createRegistrationRpcs(
  ctx: BrokerContext,
  calls: Pick<RunnerCalls, "desk">,
): Pick<ServiceImpl<typeof RunnerBrokerService>, "registerRunner" | "heartbeat"> {
  const { deps, runnerClient, provisioningSeconds, provisioningStarted, leases, leaseTtlMs, authorizeRunner, toRunner, confirmedSinceMs } = ctx;
  const { desk } = calls;

  /** Grants or keeps the Project lease for a Runner; a fence store outage leaves it unleased. */
  const claimLease = async (scope: string, runnerId: string, strict: boolean) => {
    try {
      const a = await leases.acquire(scope, runnerId, leaseTtlMs);
      if (a.held && a.fresh) deps.logger.info("project lease granted", { runner_id: runnerId, project: scope, fence: a.lease.fence });
      return a.held ? { held: true, fence: a.lease.fence } : { held: false, fence: 0 };
    } catch (error) {
      if (!(error instanceof FenceUnavailableError)) throw error;
      deps.logger.warn("project lease not granted: fence store unavailable", { runner_id: runnerId, project: scope, error });
      if (strict) throw new ConnectError("fence store unavailable", Code.Unavailable, undefined, undefined, error);
      return { held: false, fence: 0 };
    }
  };

  /**
   * A Runner registering while another holds its Project's lease takes the Project with the
   * next fence now, instead of after the lease lapses, when the holder is provably gone: it was
   * replaced at its own address (a restarted process or pod: the address answers as the
   * registering Runner; two processes cannot listen on one address), or it was not seen alive
   * since this broker started (or is lost) and its address refuses connections (nothing
   * listens there). A holder that answers as itself, or does not answer in time, keeps its lease.
   */
  const releaseReplacedHolder = async (canonicalId: string, runnerId: string, endpointUrl: string): Promise<void> => {
    const lease = await leases.current(canonicalId).catch(() => undefined);
    if (!lease || lease.owner === runnerId) return;
    const holder = await deps.registry.get(lease.owner);
    if (!holder || holder.canonicalId !== canonicalId) return;
    // A refused address proves a holder gone only if this broker never saw it alive (a record
    // from before a restart) or it is lost: a live holder may be between listening and registering.
    const unseen = holder.lastHeartbeatMs < confirmedSinceMs || holder.connectionState === "lost";
    if (!unseen && holder.endpointUrl !== endpointUrl) return;
    const answer = await (async () => runnerClient(holder.endpointUrl).describe({}, { timeoutMs: REPLACED_HOLDER_CHECK_MS, headers: toRunner(holder) }))()
      .then((a) => ({ runnerId: a.runnerId, refused: false }))
      .catch((error: unknown) => ({ runnerId: undefined, refused: provenNotSent(error) }));
    const why =
      answer.refused && unseen
        ? "its address refuses connections"
        : holder.endpointUrl === endpointUrl && answer.runnerId === runnerId
          ? "replaced at its address"
          : "";
    if (!why) return;
    const released = await leases.release(canonicalId, lease.owner, lease.fence).catch(() => false);
    if (released) deps.logger.info(`project lease released: its Runner is gone (${why})`, { project: canonicalId, replaced: lease.owner, by: runnerId });
  };

  const projectFence = async (scope: string, held: number) => Math.max(held, await leases.highestFence(scope));

  return {
    async registerRunner(req, ctx) {
      if (!req.runnerId || !req.clientId || !req.projectId || !req.rootIdentity)
        throw new ConnectError("runner_id, client_id, project_id and root_identity are required", Code.InvalidArgument);
      // The credential must be the one of the workspace the Runner claims to serve.
      authorizeRunner(ctx.requestHeader, req);
      // The Runner's Project becomes known under its client id; a new root opens a new incarnation.
      const registered = await deps.refResolver.registerProject(
        { clientId: req.clientId, projectId: req.projectId, rootIdentity: req.rootIdentity, name: req.projectId, recoveredWrites: req.recoveredWrites },
        { headers: principalHeaders({ clientId: req.clientId, subject: `runner:${req.runnerId}` }) },
      );
      const canonicalId = registered.project?.canonicalId ?? canonicalProjectId(req.clientId, req.projectId);
      const startedMs = provisioningStarted.get(canonicalProjectId(req.clientId, req.projectId));
      if (startedMs !== undefined) {
        provisioningStarted.delete(canonicalProjectId(req.clientId, req.projectId));
        provisioningSeconds?.observe((Date.now() - startedMs) / 1000);
      }
      await deps.registry.register({
        runnerId: req.runnerId,
        clientId: req.clientId,
        projectId: req.projectId,
        canonicalId,
        rootIdentity: req.rootIdentity,
        protocolGeneration: req.protocolGeneration,
        build: req.build,
        capabilities: [...req.capabilities],
        endpointUrl: req.endpointUrl,
        registeredAtMs: Date.now(),
        ...(req.containment === "" ? {} : { containment: req.containment, separateJobUid: req.separateJobUid }),
        ...(req.sandbox === "" ? {} : { sandbox: req.sandbox }),
        ...(req.recoveredWrites.length === 0 ? {} : { recoveredWrites: req.recoveredWrites.length }),
      });
      await releaseReplacedHolder(canonicalId, req.runnerId, req.endpointUrl);
      const lease = await claimLease(canonicalId, req.runnerId, true);
      // A Runner registering again (restarted, or forgotten by the broker) is asked about the
      // Jobs it owned: the ones it no longer has are lost_after_reconcile at once.
      if (desk) {
        const self = await deps.registry.get(req.runnerId);
        if (self) void desk.sync(self);
      }
      const missingBaseline = RunnerCapabilities.fromWire(req.capabilities).missingBaseline();
      deps.logger.info("runner registered", {
        runner_id: req.runnerId,
        project: canonicalId,
        protocol_generation: req.protocolGeneration,
        build: req.build,
        capabilities: req.capabilities.length,
        lease_held: lease.held,
        fence: lease.fence,
        ...(missingBaseline.length > 0 ? { missing_baseline: missingBaseline.map(runnerCapabilityWire) } : {}),
      });
      return {
        heartbeatIntervalMs: deps.heartbeatIntervalMs,
        leaseHeld: lease.held,
        fence: BigInt(lease.fence),
        projectFence: BigInt(await projectFence(canonicalId, lease.fence)),
        leaseTtlMs: leaseTtlMs,
        projectCanonicalId: canonicalId,
      };
    },

    async heartbeat(req, ctx) {
      const registered = await deps.registry.get(req.runnerId);
      if (!registered) return { known: false };
      authorizeRunner(ctx.requestHeader, registered);
      if (!(await deps.registry.heartbeat(req.runnerId))) return { known: false };
      const runner = await deps.registry.get(req.runnerId);
      if (!runner) return { known: false };
      const scope = runner.canonicalId;
      const claimed = Number(req.fence);
      // Renew by compare-and-set on (runner, fence); otherwise try to take the lease (a
      // standby whose holder was lost, or a holder whose lease lapsed or was wiped).
      const lease =
        claimed > 0 && (await leases.renew(scope, req.runnerId, claimed, leaseTtlMs))
          ? { held: true, fence: claimed }
          : await claimLease(scope, req.runnerId, false);
      // Jobs keep their live lease only while this Runner confirms it still runs them.
      if (desk) void desk.sync(runner);
      return { known: true, leaseHeld: lease.held, fence: BigInt(lease.fence), projectFence: BigInt(await projectFence(scope, lease.fence)) };
    },
  };
}
