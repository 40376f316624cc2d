/** The runner_state of listed Projects, from one broker call. */
import { ConnectError } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { CallContext, ProjectAddress } from "../call-context.js";

export type RunnerStates = (projects: ReadonlyArray<ProjectAddress>, ctx: CallContext) => Promise<Record<string, string>>;

/**
 * list_projects' runner_state for all listed Projects in one broker call. The listing does
 * not fail when the broker cannot answer: every state is then "unknown", not "none".
 */
export function createRunnerStates(deps: { broker: Client<typeof RunnerBrokerService>; logger: Logger }): RunnerStates {
  return async (projects, ctx) => {
    if (projects.length === 0) return {};
    try {
      const res = await deps.broker.getProjectRunnerStates(
        { projects: projects.map((p) => ({ projectCanonicalId: p.canonicalId, rootIdentity: p.rootIdentity })) },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
      return res.states;
    } catch (error) {
      deps.logger.warn("runner states unavailable for list_projects", { error: ConnectError.from(error).message });
      return {};
    }
  };
}
