import type { ConnectRouter } from "@connectrpc/connect";
import { ToolRegistryService } from "@webcodex/proto";
import type { ToolPolicy } from "@webcodex/contracts";
import { createToolRegistry } from "./tool-registry.js";

/** The registry's routes; `policy` is the operator's tool policy, if any. */
export function toolRegistryRoutes(policy?: ToolPolicy): (router: ConnectRouter) => void {
  return (router) => {
    router.service(ToolRegistryService, createToolRegistry({ policy }));
  };
}

export const routes = toolRegistryRoutes();
