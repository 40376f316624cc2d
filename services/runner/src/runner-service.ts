/**
 * The RunnerService: executes canonical tool calls in one workspace. Each handler names the
 * wire capabilities it implements; the Runner advertises exactly those and nothing else.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { RunnerService } from "@webcodex/proto";
import { FailureStage, isToolFailureError, ReasonCode, RUNNER_PROTOCOL_GENERATION, RunnerCapabilities, toolFailure } from "@webcodex/contracts";
import type { RunnerCapabilityId } from "@webcodex/contracts";
import { failureToWire } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";

export type ToolHandler = (args: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;

export interface RunnerHandlers {
  /** Canonical tool name → handler. */
  tools: Record<string, ToolHandler>;
  /** What this binary implements; advertised as is. */
  capabilities: readonly RunnerCapabilityId[];
}

export interface RunnerServiceDeps {
  runnerId: string;
  build: string;
  rootIdentity: () => Promise<string>;
  handlers: RunnerHandlers;
  logger: Logger;
}

export function createRunnerService(deps: RunnerServiceDeps): ServiceImpl<typeof RunnerService> {
  const capabilities = new RunnerCapabilities(deps.handlers.capabilities).toWire();
  return {
    async execute(req, ctx) {
      const handler = deps.handlers.tools[req.tool];
      if (!handler) return { resultJson: "", failure: failureToWire(toolFailure(ReasonCode.capabilityMissing, FailureStage.dispatch, { detail_code: "tool_not_implemented" })) };
      // The broker routes by Project; a call for another root is refused before anything runs.
      if (req.rootIdentity && req.rootIdentity !== (await deps.rootIdentity())) {
        return { resultJson: "", failure: failureToWire(toolFailure(ReasonCode.runnerUnavailable, FailureStage.dispatch, { detail_code: "root_identity_mismatch" })) };
      }
      try {
        const args = JSON.parse(req.argumentsJson) as Record<string, unknown>;
        const result = await handler(args, ctx.signal);
        return { resultJson: JSON.stringify(result) };
      } catch (error) {
        if (isToolFailureError(error)) return { resultJson: "", failure: failureToWire(error.failure) };
        deps.logger.error("tool handler failed", { tool: req.tool, call_id: req.callId, error });
        return { resultJson: "", failure: failureToWire(toolFailure(ReasonCode.internal, FailureStage.execution, { detail_code: "runner_internal_error", outcome_unknown: true })) };
      }
    },
    async describe() {
      return { runnerId: deps.runnerId, rootIdentity: await deps.rootIdentity(), protocolGeneration: RUNNER_PROTOCOL_GENERATION, build: deps.build, capabilities };
    },
  };
}
