import assert from "node:assert/strict";
import { it } from "node:test";
import type { Client } from "@connectrpc/connect";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { createLogger } from "@webcodex/platform";
import type { RunnerBrokerService } from "@webcodex/proto";
import { startRegistration } from "./registration.js";

it("registers only once the Runner's capabilities are complete, and with all of them", async () => {
  const registrations: string[][] = [];
  const broker = {
    registerRunner: async (req: { capabilities: string[] }) => {
      registrations.push(req.capabilities);
      return { heartbeatIntervalMs: 60_000, leaseHeld: false, fence: 0n, projectFence: 0n };
    },
    heartbeat: async () => ({ known: true, leaseHeld: false, fence: 0n, projectFence: 0n }),
  } as unknown as Client<typeof RunnerBrokerService>;
  let complete: (ids: readonly RunnerCapabilityId[]) => void = () => undefined;
  const capabilities = new Promise<readonly RunnerCapabilityId[]>((resolve) => (complete = resolve));
  const loop = startRegistration({
    broker,
    runnerId: "r",
    clientId: "c",
    projectId: "p",
    rootIdentity: "root-1",
    build: "test",
    capabilities,
    endpointUrl: "http://runner",
    logger: createLogger({ service: "test", level: "silent" }),
  });
  try {
    // eslint-disable-next-line no-restricted-syntax -- a window in which no registration may happen while the probes run
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(registrations, [], "no registration while the probes run");
    complete(["readFiles", "validationNode"]);
    await loop.registered;
    assert.deepEqual(registrations, [["read_files_v1", "validation_node_v1"]]);
  } finally {
    loop.stop();
  }
});
