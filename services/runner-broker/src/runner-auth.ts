/**
 * Runner credentials: a fleet token (WEBCODEX_RUNNER_TOKEN) in its own header, never a
 * Host bearer token. Checked on RegisterRunner and Heartbeat when configured, and sent on
 * the broker's calls to Runners.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";

import { RUNNER_TOKEN_HEADER } from "@webcodex/platform";

export { RUNNER_TOKEN_HEADER };

const digest = (s: string) => createHash("sha256").update(s).digest();

/** A checker for `token`; a no-op when no token is configured. */
export function runnerTokenCheck(token: string | undefined): (headers: Headers) => void {
  if (!token) return () => undefined;
  const expected = digest(token);
  return (headers) => {
    const got = headers.get(RUNNER_TOKEN_HEADER);
    if (!got) throw new ConnectError("runner token required", Code.Unauthenticated);
    if (!timingSafeEqual(digest(got), expected)) throw new ConnectError("invalid runner token", Code.Unauthenticated);
  };
}

export function runnerTokenHeaders(token: string | undefined): Record<string, string> {
  return token ? { [RUNNER_TOKEN_HEADER]: token } : {};
}
