/** The broker side of `make bench fleet`: one fleet reconciler against the fake API at argv[2]; reports to its parent over IPC. */
import { readFileSync } from "node:fs";
import { createFleetReconciler } from "@webcodex/runner-broker";
import { fakeKubeConfig } from "@webcodex/runner-broker/testing/fake-kube-api";
import { createLogger } from "@webcodex/platform";
import { FLEET_PROJECTS, fleetProject, fleetTemplate } from "./fleet.js";

const status = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? NaN) / 1024;
const send = (m: unknown) => process.send?.(m);

async function main() {
  const url = process.argv[2] ?? "";
  const kubeConfig = await fakeKubeConfig({ url });
  const projects = Array.from({ length: FLEET_PROJECTS }, (_, i) => fleetProject(i));
  const fleet = await createFleetReconciler({
    kubeConfig,
    template: fleetTemplate(),
    anchorName: "wcx-runner-anchor",
    projects: async () => projects,
    idleTimeoutMs: 30 * 60_000,
    resyncMs: 3_600_000,
    debounceMs: 100,
    logger: createLogger({ service: "bench-fleet", level: "silent" }),
  });
  const t0 = performance.now();
  await fleet.start();
  const firstSyncMs = performance.now() - t0;
  const first = await fleet.reconcile();
  const actionsFirstSync = first.created + first.deletedOrphans + first.stoppedIdle + first.rotated + first.replacedFailed;
  const resyncMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await fleet.resync();
    resyncMs.push(performance.now() - t);
  }
  // Watch throughput: the parent flips every pod's readiness twice; time until all events arrived.
  const before = fleet.stats().watchEvents;
  const burst = await new Promise<number>((resolve) => {
    process.once("message", (m: { type: string; events: number }) => resolve(m.events));
    send({ type: "synced" });
  });
  const tb = performance.now();
  while (fleet.stats().watchEvents - before < burst && performance.now() - tb < 60_000) await new Promise((r) => setTimeout(r, 5));
  const watchEventsPerSec = ((fleet.stats().watchEvents - before) / Math.max(1, performance.now() - tb)) * 1000;
  // Steady state: API calls over 3 s with passes triggered by the watch only.
  const calls0 = fleet.stats().apiCalls;
  const ts = performance.now();
  await new Promise((r) => setTimeout(r, 3_000));
  const steadyCalls = fleet.stats().apiCalls - calls0;
  const apiCallsPerMin = (steadyCalls / ((performance.now() - ts) / 60_000)) | 0;
  const report = { firstSyncMs, resyncMs, watchEventsPerSec, apiCallsPerMin, rssMiB: status("VmRSS"), peakRssMiB: status("VmHWM"), actionsFirstSync };
  await fleet.stop();
  send({ type: "report", report });
}

main().catch((e: unknown) => {
  process.stderr.write(`fleet bench child failed: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
