/** `webcodex_runners{state}`: the Runner fleet by connection state, sampled from the registry. */
import type { Logger, Metrics } from "@webcodex/platform";
import type { RunnerRegistry } from "../runner-registry.js";

/** Every state is always reported (0 when none), so a dashboard sees a fleet go to zero. */
const STATES = ["connected", "lost"] as const;

/** Samples the registry into the gauge now and every `intervalMs`; a failed sample warns and keeps the last values. */
export function startRunnerGauge(
  registry: Pick<RunnerRegistry, "list">,
  metrics: Metrics,
  intervalMs: number,
  logger: Logger,
): { sample(): Promise<void>; stop(): void } {
  const runners = metrics.gauge("webcodex_runners", "Registered Runners by connection state");
  const sample = () =>
    registry.list().then(
      (all) => {
        for (const state of STATES) runners.set(all.filter((r) => r.connectionState === state).length, { state });
      },
      (error: unknown) => logger.warn("runner counts for metrics failed", { error }),
    );
  void sample();
  const timer = setInterval(() => void sample(), intervalMs);
  timer.unref();
  return { sample, stop: () => clearInterval(timer) };
}
