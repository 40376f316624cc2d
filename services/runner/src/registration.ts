/**
 * Keeps this Runner registered with the broker: register, heartbeat every interval the broker
 * asks for, register again when the broker no longer knows it, back off while it is down.
 */
import type { Client } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { RUNNER_PROTOCOL_GENERATION, RunnerCapabilities } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import type { Logger } from "@webcodex/platform";

export interface RegistrationOptions {
  broker: Client<typeof RunnerBrokerService>;
  runnerId: string;
  clientId: string;
  projectId: string;
  rootIdentity: string;
  build: string;
  capabilities: readonly RunnerCapabilityId[];
  endpointUrl: string;
  logger: Logger;
}

export interface RegistrationLoop {
  /** Resolves after the first successful registration. */
  readonly registered: Promise<void>;
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

  const register = async () => {
    const res = await o.broker.registerRunner({
      runnerId: o.runnerId, clientId: o.clientId, projectId: o.projectId, rootIdentity: o.rootIdentity,
      protocolGeneration: RUNNER_PROTOCOL_GENERATION, build: o.build, capabilities: new RunnerCapabilities(o.capabilities).toWire(), endpointUrl: o.endpointUrl,
    });
    interval = res.heartbeatIntervalMs || interval;
    known = true;
    markRegistered();
    o.logger.info("registered with broker", { runner_id: o.runnerId, heartbeat_interval_ms: interval });
  };

  const tick = async () => {
    if (stopped) return;
    try {
      if (!known) await register();
      else known = (await o.broker.heartbeat({ runnerId: o.runnerId })).known;
      if (!known) await register();
      failures = 0;
    } catch (error) {
      failures += 1;
      known = false;
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
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
