/**
 * Runner credentials, in their own header, never a Host bearer token. Each Runner holds a
 * credential bound to its one workspace: `HMAC(key, client_id, project_id)`, where the key
 * (WEBCODEX_RUNNER_TOKEN) is held by the broker alone and never reaches a Runner pod. The
 * broker checks RegisterRunner against the workspace the Runner claims and Heartbeat against
 * the workspace it registered, and sends a Runner its own credential on calls to it. So a
 * credential stolen from a Runner (by the tenant code it runs) registers nothing but the
 * workspace its holder already controls.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { RUNNER_TOKEN_HEADER } from "@webcodex/platform";

export { RUNNER_TOKEN_HEADER };

const digest = (s: string) => createHash("sha256").update(s).digest();

/** The workspace a credential is bound to. */
export interface CredentialScope {
  clientId: string;
  projectId: string;
}

/** The credential of the Runner serving `scope`, derived from the broker's key. */
export function runnerCredential(key: string, scope: CredentialScope): string {
  return `wcr1.${createHmac("sha256", key).update(`webcodex-runner-v1\0${scope.clientId}\0${scope.projectId}`).digest("base64url")}`;
}

/**
 * A checker for the credential of the Runner serving a scope; a no-op when no key is
 * configured (a single-machine setup where Runners are the broker's own children).
 */
export function runnerCredentialCheck(key: string | undefined): (headers: Headers, scope: CredentialScope) => void {
  if (!key) return () => undefined;
  return (headers, scope) => {
    const got = headers.get(RUNNER_TOKEN_HEADER);
    if (!got) throw new ConnectError("runner credential required", Code.Unauthenticated);
    if (!timingSafeEqual(digest(got), digest(runnerCredential(key, scope)))) throw new ConnectError("invalid runner credential", Code.Unauthenticated);
  };
}

/** Headers for a call to the Runner serving `scope`. */
export function runnerCredentialHeaders(key: string | undefined, scope: CredentialScope): Record<string, string> {
  return key ? { [RUNNER_TOKEN_HEADER]: runnerCredential(key, scope) } : {};
}
