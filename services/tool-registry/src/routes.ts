import type { ConnectRouter } from "@connectrpc/connect";
import { ToolRegistryService } from "@webcodex/proto";
import { createToolRegistry } from "./tool-registry.js";

export function routes(router: ConnectRouter): void {
  router.service(ToolRegistryService, createToolRegistry());
}
