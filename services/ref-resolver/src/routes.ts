import type { ConnectRouter } from "@connectrpc/connect";
import { RefResolverService } from "@webcodex/proto";
import type { Database } from "@webcodex/platform";
import { createRefResolver } from "./ref-resolver.js";

export function routes(deps: { db: Database; liveCacheTtlMs?: number }): (router: ConnectRouter) => void {
  const impl = createRefResolver(deps);
  return (router) => router.service(RefResolverService, impl);
}
