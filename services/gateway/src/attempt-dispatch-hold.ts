/**
 * A test hook that holds a workspace call made for an Agent Attempt (attempt_ref) between the
 * gateway's admission and its dispatch to the Runner, so a test can reproduce a takeover that
 * lands in that window deterministically. Off unless WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD names
 * a directory; then, while `<dir>/hold` exists, each such admitted call writes
 * `<dir>/held-<call id>` and waits until `hold` is removed (or the call is cancelled).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export type AttemptDispatchHold = (callId: string, signal: AbortSignal) => Promise<void>;

export const ATTEMPT_DISPATCH_HOLD_ENV = "WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD";

export function attemptDispatchHoldFromEnv(env: Record<string, string | undefined>): AttemptDispatchHold | undefined {
  const dir = env[ATTEMPT_DISPATCH_HOLD_ENV];
  if (!dir) return undefined;
  const hold = join(dir, "hold");
  return async (callId, signal) => {
    if (!existsSync(hold)) return;
    writeFileSync(join(dir, `held-${callId}`), "");
    while (existsSync(hold) && !signal.aborted) await sleep(10, undefined, { signal }).catch(() => undefined);
  };
}
