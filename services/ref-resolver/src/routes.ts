import type { ConnectRouter } from "@connectrpc/connect";
import { RefResolverService } from "@webcodex/proto";
import { createRefResolver } from "./ref-resolver.js";
import type { RefResolverDeps } from "./ref-resolver.js";

export function routes(deps: RefResolverDeps): (router: ConnectRouter) => void {
  const impl = createRefResolver(deps);
  return (router) => router.service(RefResolverService, impl);
}
