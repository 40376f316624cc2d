/**
 * The runner-broker service: Runner registration (protocol generation, build, capabilities,
 * Runner credentials), the Project lease each Runner holds (fenced, renewed by heartbeats),
 * routing a call to the lease holder with the lease's fence, admission before dispatch
 * (capability prerequisites, per-Project concurrency: a refusal is structured and nothing
 * runs), fleet status from one counting path, and provisioning Runners on demand.
 *
 * Each part is its own file: the shared configuration and state (broker-context.ts), routing
 * (routing/route.ts), one call on a Runner with admission and the Job desk
 * (routing/runner-calls.ts), and the RPCs by concern (rpcs/).
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { RunnerBrokerService } from "@webcodex/proto";
import { createBrokerContext } from "./broker-context.js";
import type { RunnerBrokerDeps } from "./broker-context.js";
import { createRouting } from "./routing/route.js";
import { createRunnerCalls } from "./routing/runner-calls.js";
import { createRegistrationRpcs } from "./rpcs/registration.js";
import { createCallRpcs } from "./rpcs/call-rpcs.js";
import { createJobRpcs } from "./rpcs/job-rpcs.js";
import { createFleetRpcs } from "./rpcs/fleet-rpcs.js";

export { DEFAULT_ADMISSION_WAIT_MS, DEFAULT_PROJECT_CONCURRENCY, DEFAULT_ROUTE_TTL_MS, DEFAULT_TRANSPARENT_START_WAIT_MS } from "./broker-context.js";
export type { RunnerBrokerDeps } from "./broker-context.js";

export function createRunnerBroker(deps: RunnerBrokerDeps): ServiceImpl<typeof RunnerBrokerService> {
  const ctx = createBrokerContext(deps);
  const routing = createRouting(ctx);
  const calls = createRunnerCalls(ctx, routing);
  return {
    ...createRegistrationRpcs(ctx, calls),
    ...createCallRpcs(ctx, routing, calls),
    ...createJobRpcs(ctx, calls),
    ...createFleetRpcs(ctx, routing),
  };
}
