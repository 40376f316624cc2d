import type { ConnectRouter } from "@connectrpc/connect";
import { AuditService } from "@webcodex/proto";
import { createAudit } from "./audit.js";
import type { AuditDeps } from "./audit.js";

export function routes(deps: AuditDeps): (router: ConnectRouter) => void {
  const impl = createAudit(deps);
  return (router) => router.service(AuditService, impl);
}
