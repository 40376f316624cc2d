import type { ConnectRouter } from "@connectrpc/connect";
import { RunnerBrokerService } from "@webcodex/proto";
import { createRunnerBroker } from "./broker.js";
import type { RunnerBrokerDeps } from "./broker.js";

export function routes(deps: RunnerBrokerDeps): (router: ConnectRouter) => void {
  const impl = createRunnerBroker(deps);
  return (router) => router.service(RunnerBrokerService, impl);
}
