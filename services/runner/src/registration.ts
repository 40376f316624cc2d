/**
 * Keeps this Runner registered with the broker: register, heartbeat every interval the broker
 * asks for, register again when the broker no longer knows it, back off while it is down.
 * Each answer carries the Project lease state: the fence this Runner holds (renewed by
 * compare-and-set on every heartbeat) and the Project's highest fence, which raises the
 * shared FenceGuard so a Runner that lost its lease refuses stale mutating calls.
 */
import type { Client } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { RUNNER_PROTOCOL_GENERATION, RunnerCapabilities } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";
import { RUNNER_TOKEN_HEADER } from "@webcodex/platform";
import type { FenceGuard } from "./runner-service.js";
import type { RecoveredTransaction } from "./workspace/index.js";

export interface RegistrationOptions {
  broker: Client<typeof RunnerBrokerService>;
  runnerId: string;
  clientId: string;
  projectId: string;
  rootIdentity: string;
  build: string;
  /**
   * What the Runner advertises. A promise (Runner.capabilities, complete once the Runner's
   * toolchain probes answered) is awaited before the first registration, so the broker never
   * routes by a list the probes have yet to complete.
   */
  capabilities: readonly RunnerCapabilityId[] | Promise<readonly RunnerCapabilityId[]>;
  endpointUrl: string;
  logger: Logger;
  /** Shared with the RunnerService: raised from every lease answer. */
  fence?: FenceGuard;
  /** How the Runner contains its Jobs (get_runtime_status shows it). */
  containment?: { mode: string; jobsSeparateUid: boolean; sandboxed?: boolean; sandboxProblem?: string };
  /** Runner credential for the broker (WEBCODEX_RUNNER_TOKEN); separate from Host credentials. */
  runnerToken?: string;
  /**
   * The write transactions this Runner's start-up recovery finished (Runner.recovery): each
   * registration reports them, so the broker can show them and record their outcomes.
   */
  recovered?: Promise<readonly RecoveredTransaction[]>;
}

export interface LeaseView {
  held: boolean;
  /** The held lease's fence; 0 when not held. */
  fence: number;
}

export interface RegistrationLoop {
  /** Resolves after the first successful registration. */
  readonly registered: Promise<void>;
  /** This Runner's view of its Project lease after the last broker answer. */
  lease(): LeaseView;
  stop(): void;
}

export function startRegistration(o: RegistrationOptions): RegistrationLoop {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let markRegistered: () => void = () => undefined;
  const registered = new Promise<void>((r) => (markRegistered = r));
  let interval = 1_000;
  let known = false;
  let failures = 0;
  let lease: LeaseView = { held: false, fence: 0 };
  // The lease TTL the broker grants (from registration); a held lease is valid for direct
  // calls until the time the request that renewed it was sent plus this, less a margin for
  // clock rate drift: the broker set its expiry after that send, so it cannot lapse earlier.
  let leaseTtlMs = 0;
  const callOptions = o.runnerToken ? { headers: { [RUNNER_TOKEN_HEADER]: o.runnerToken } } : {};

  const onLease = (held: boolean, fence: bigint, projectFence: bigint, sentAtMs: number) => {
    o.fence?.observe(Number(projectFence));
    if (held) o.fence?.observe(Number(fence));
    o.fence?.holdLease(held ? Number(fence) : 0, held ? sentAtMs + Math.floor(leaseTtlMs * 0.9) : 0);
    const next = { held, fence: held ? Number(fence) : 0 };
    if (next.held !== lease.held || next.fence !== lease.fence) {
      o.logger.info(next.held ? "project lease held" : "project lease not held", {
        runner_id: o.runnerId,
        fence: next.fence,
        project_fence: Number(projectFence),
      });
    }
    lease = next;
  };

  const register = async () => {
    const recovered = (await o.recovered) ?? [];
    const capabilities = await o.capabilities;
    const sentAtMs = Date.now();
    const res = await o.broker.registerRunner(
      {
        runnerId: o.runnerId,
        clientId: o.clientId,
        projectId: o.projectId,
        rootIdentity: o.rootIdentity,
        protocolGeneration: RUNNER_PROTOCOL_GENERATION,
        build: o.build,
        capabilities: new RunnerCapabilities(capabilities).toWire(),
        endpointUrl: o.endpointUrl,
        ...(o.containment === undefined
          ? {}
          : {
              containment: o.containment.mode,
              separateJobUid: o.containment.jobsSeparateUid,
              ...(o.containment.sandboxed === undefined
                ? {}
                : { sandbox: o.containment.sandboxed ? "bwrap" : `none: ${o.containment.sandboxProblem ?? "unavailable"}` }),
            }),
        recoveredWrites: recovered.map((t) => ({ callId: t.call_id ?? "", tool: t.tool, outcome: t.outcome })),
      },
      callOptions,
    );
    interval = res.heartbeatIntervalMs || interval;
    leaseTtlMs = res.leaseTtlMs;
    known = true;
    onLease(res.leaseHeld, res.fence, res.projectFence, sentAtMs);
    markRegistered();
    o.logger.info("registered with broker", { runner_id: o.runnerId, heartbeat_interval_ms: interval, lease_held: res.leaseHeld });
  };

  const heartbeat = async () => {
    const sentAtMs = Date.now();
    const res = await o.broker.heartbeat({ runnerId: o.runnerId, fence: BigInt(lease.fence) }, callOptions);
    known = res.known;
    if (known) onLease(res.leaseHeld, res.fence, res.projectFence, sentAtMs);
  };

  const tick = async () => {
    if (stopped) return;
    try {
      if (!known) await register();
      else await heartbeat();
      if (!known) await register();
      failures = 0;
    } catch (error) {
      failures += 1;
      known = false;
      // Unreachable broker: the lease will lapse on its TTL, so stop claiming it. Direct calls
      // on its route keep being served until the lease's local validity ends (nothing can grant
      // it to another Runner before then).
      lease = { held: false, fence: 0 };
      if (failures === 1 || failures % 20 === 0) o.logger.warn("broker unreachable; retrying", { error });
    }
    if (!stopped) {
      timer = setTimeout(() => void tick(), failures > 0 ? Math.min(250 * 2 ** Math.min(failures, 4), interval) : interval);
      timer.unref();
    }
  };
  void tick();
  return {
    registered,
    lease: () => ({ ...lease }),
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
