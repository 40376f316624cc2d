/**
 * The runner-broker service: Runner registration, routing a call to the Runner of its
 * Project, and capability admission before dispatch (a missing capability is a structured
 * rejection, never a half-run).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client, ServiceImpl } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { FailureStage, ReasonCode, RunnerCapabilities, runnerCapabilityWire, toolDefinition, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";
import { failureToWire, principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { RunnerRegistry } from "./runner-registry.js";

export interface RunnerBrokerDeps {
  registry: RunnerRegistry;
  refResolver: Client<typeof RefResolverService>;
  /** Client of the RunnerService at `endpointUrl` (cached per URL by the broker). */
  runnerClient: (endpointUrl: string) => Client<typeof RunnerService>;
  heartbeatIntervalMs: number;
  logger: Logger;
  /** Deadline for one Runner call. */
  dispatchTimeoutMs?: number;
}

const failure = (f: ToolFailure) => ({ failure: failureToWire(f) });

export function createRunnerBroker(deps: RunnerBrokerDeps): ServiceImpl<typeof RunnerBrokerService> {
  const clients = new Map<string, Client<typeof RunnerService>>();
  const runnerClient = (url: string) => {
    let c = clients.get(url);
    if (!c) {
      c = deps.runnerClient(url);
      clients.set(url, c);
    }
    return c;
  };

  return {
    async registerRunner(req) {
      if (!req.runnerId || !req.clientId || !req.projectId || !req.rootIdentity) throw new ConnectError("runner_id, client_id, project_id and root_identity are required", Code.InvalidArgument);
      // The Runner's Project becomes known under its client id; a new root opens a new incarnation.
      const registered = await deps.refResolver.registerProject(
        { clientId: req.clientId, projectId: req.projectId, rootIdentity: req.rootIdentity, name: req.projectId },
        { headers: principalHeaders({ clientId: req.clientId, subject: `runner:${req.runnerId}` }) },
      );
      await deps.registry.register({
        runnerId: req.runnerId,
        clientId: req.clientId,
        projectId: req.projectId,
        canonicalId: registered.project?.canonicalId ?? `agent:${req.clientId}:${req.projectId}`,
        rootIdentity: req.rootIdentity,
        protocolGeneration: req.protocolGeneration,
        build: req.build,
        capabilities: [...req.capabilities],
        endpointUrl: req.endpointUrl,
        registeredAtMs: Date.now(),
      });
      deps.logger.info("runner registered", { runner_id: req.runnerId, project: registered.project?.canonicalId, capabilities: req.capabilities.length });
      return { heartbeatIntervalMs: deps.heartbeatIntervalMs };
    },

    async heartbeat(req) {
      return { known: await deps.registry.heartbeat(req.runnerId) };
    },

    async dispatch(req) {
      const runner = await deps.registry.forProject(req.projectCanonicalId);
      if (!runner || runner.rootIdentity !== req.rootIdentity) {
        return failure(toolFailure(ReasonCode.runnerUnavailable, FailureStage.dispatch, {
          detail_code: runner ? "runner_serves_other_incarnation" : "no_live_runner",
          message: "No Runner is serving this project right now; nothing was run.",
        }));
      }
      const def = toolDefinition(req.tool);
      if (!def) throw new ConnectError("unknown tool", Code.InvalidArgument);
      const args = JSON.parse(req.argumentsJson) as Record<string, unknown>;
      const have = RunnerCapabilities.fromWire(runner.capabilities);
      const missing = (def.requiredCapabilities?.(args) ?? []).filter((c) => !have.has(c));
      if (missing.length > 0) {
        return failure(toolFailure(ReasonCode.capabilityMissing, FailureStage.dispatch, {
          detail_code: runnerCapabilityWire(missing[0]!),
          evidence: { missing_capabilities: missing.map(runnerCapabilityWire), runner_build: runner.build },
          message: "The project's Runner does not implement this request; nothing was run.",
        }));
      }
      try {
        const res = await runnerClient(runner.endpointUrl).execute(
          { callId: req.callId, tool: req.tool, argumentsJson: req.argumentsJson, rootIdentity: req.rootIdentity },
          { timeoutMs: deps.dispatchTimeoutMs ?? 660_000 },
        );
        return { resultJson: res.resultJson, ...(res.failure ? { failure: res.failure } : {}) };
      } catch (error) {
        const ce = ConnectError.from(error);
        // Refused before sending proves nothing ran; a break mid-call proves nothing either way.
        const notStarted = ce.code === Code.Unavailable && /ECONNREFUSED|connect/i.test(ce.rawMessage);
        const mayHaveEffect = def.effect !== "read_only";
        deps.logger.warn("runner call failed", { runner_id: runner.runnerId, code: Code[ce.code], tool: req.tool });
        return failure(toolFailure(notStarted ? ReasonCode.runnerUnavailable : ReasonCode.runnerLost, FailureStage.dispatch, {
          detail_code: notStarted ? "runner_unreachable" : "runner_connection_lost",
          outcome_unknown: !notStarted && mayHaveEffect,
          message: notStarted ? "The project's Runner is not reachable; nothing was run." : "The connection to the Runner broke during the call.",
        }));
      }
    },

    async getFleetStatus(req) {
      const all = await deps.registry.list();
      const runners = all.filter((r) => !req.clientId || r.clientId === req.clientId);
      return {
        runners: runners.map((r) => ({
          runnerId: r.runnerId, clientId: r.clientId, projectId: r.projectId, connectionState: r.connectionState,
          protocolGeneration: r.protocolGeneration, build: r.build, capabilities: r.capabilities, lastHeartbeatUnixMs: BigInt(r.lastHeartbeatMs),
        })),
      };
    },
  };
}
