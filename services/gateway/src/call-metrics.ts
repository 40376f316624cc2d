/**
 * Tool-call metrics: calls by tool and outcome, failures by reason_code, latency per tool and
 * per pipeline stage (the platform registry's instruments, named once here).
 */
import { CallOutcome } from "@webcodex/contracts";
import type { SettledCallOutcome, StageTimings } from "@webcodex/contracts";
import type { Metrics } from "@webcodex/platform";

export interface CallObservation {
  tool: string;
  outcome: SettledCallOutcome;
  /** The failure's reason_code. */
  reasonCode?: string;
  durationSeconds: number;
  /** Stage (or sub-stage) → microseconds (the ActionAudit stage_durations_us). */
  stagesUs?: Readonly<StageTimings>;
}

export interface CallMetrics {
  observeCall(call: CallObservation): void;
}

/**
 * Tool-call metrics for the gateway: calls by tool and outcome, failures by reason_code,
 * latency per tool and per pipeline stage.
 */
export function createCallMetrics(metrics: Metrics): CallMetrics {
  const calls = metrics.counter("webcodex_tool_calls_total", "Tool calls by tool and outcome");
  const failures = metrics.counter("webcodex_tool_call_failures_total", "Failed tool calls by tool and reason_code");
  const latency = metrics.histogram("webcodex_tool_call_seconds", "Tool call latency");
  const stages = metrics.histogram("webcodex_tool_call_stage_seconds", "Tool call latency per pipeline stage");
  return {
    observeCall(call) {
      calls.inc({ tool: call.tool, outcome: call.outcome });
      if (call.outcome === CallOutcome.failure) failures.inc({ tool: call.tool, reason_code: call.reasonCode || "unknown" });
      latency.observe(call.durationSeconds, { tool: call.tool });
      for (const [stage, us] of Object.entries(call.stagesUs ?? {})) stages.observe(us / 1e6, { stage });
    },
  };
}
