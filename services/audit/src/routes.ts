import type { ConnectRouter } from "@connectrpc/connect";
import { AuditService } from "@webcodex/proto";
import type { Database } from "@webcodex/platform";
import { createAudit } from "./audit.js";

export function routes(deps: { db: Database }): (router: ConnectRouter) => void {
  const impl = createAudit(deps);
  return (router) => router.service(AuditService, impl);
}
