/**
 * The webcodex CLI with the gateway's test hooks installed: tests run it in place of
 * tools/cli/bin/webcodex.js, with the same arguments (`cli: hookedCliPath` for startDevServer
 * and startTestStack). The hooks reach the gateway only through this launcher; no setting of a
 * service enables them. A *.test-support file: built beside the tests, pruned from images.
 *
 * Each hook is off unless its variable is set in this process's environment:
 * - WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD=<dir>: while `<dir>/hold` exists, each workspace call
 *   made for an Agent Attempt (attempt_ref) that the gateway admitted writes
 *   `<dir>/held-<call id>` and waits before its dispatch until `hold` is removed (or the call is
 *   cancelled), so a test can land a takeover in that window deterministically.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exitCodeFor, run } from "@webcodex/cli";
import type { AttemptDispatchHold, GatewayTestHooks } from "@webcodex/gateway";

function attemptDispatchHold(dir: string): AttemptDispatchHold {
  const hold = join(dir, "hold");
  return async (callId, signal) => {
    if (!existsSync(hold)) return;
    writeFileSync(join(dir, `held-${callId}`), "");
    while (existsSync(hold) && !signal.aborted) await sleep(10, undefined, { signal }).catch(() => undefined);
  };
}

const holdDir = process.env["WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD"];
const hooks: GatewayTestHooks = holdDir ? { attemptDispatchHold: attemptDispatchHold(holdDir) } : {};

run(process.argv.slice(2), hooks).catch((error: unknown) => {
  process.stderr.write(`webcodex: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(exitCodeFor(error));
});
