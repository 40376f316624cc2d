import { RefResolverService } from "@webcodex/proto";
import { servedWithFastPath } from "@webcodex/platform";
import { createRefResolver } from "./ref-resolver.js";
import type { RefResolverDeps } from "./ref-resolver.js";

/**
 * What the ref-resolver serves: its Connect routes, and the same service on the unary fast path
 * (binary Connect over HTTP/2 answered in one write: the gateway's calls, a woken wait's answer
 * among them).
 */
export function serving(deps: RefResolverDeps): ReturnType<typeof servedWithFastPath> {
  return servedWithFastPath(RefResolverService, createRefResolver(deps));
}
