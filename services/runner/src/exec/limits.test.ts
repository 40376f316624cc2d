import assert from "node:assert/strict";
import { test } from "node:test";
import { clampRule } from "@webcodex/contracts";
import { DEFAULT_EXEC_LIMITS, effectiveLimits } from "./limits.js";

test("the Runner's wait_ms and timeout_ms defaults and ceilings are the tools' clamp rules, enforced here too", () => {
  const wait = clampRule("run_shell", "wait_ms");
  const timeout = clampRule("run_shell", "timeout_ms");
  assert.deepEqual(
    [DEFAULT_EXEC_LIMITS.waitMsDefault, DEFAULT_EXEC_LIMITS.waitMsCeiling, DEFAULT_EXEC_LIMITS.timeoutMsDefault, DEFAULT_EXEC_LIMITS.timeoutMsCeiling],
    [wait.default, wait.ceiling, timeout.default, timeout.ceiling],
  );
  assert.deepEqual(effectiveLimits(DEFAULT_EXEC_LIMITS, { wait_ms: wait.ceiling + 1, timeout_ms: timeout.ceiling + 1 }), {
    wait_ms: wait.ceiling,
    timeout_ms: timeout.ceiling,
  });
  assert.deepEqual(effectiveLimits(DEFAULT_EXEC_LIMITS, {}), { wait_ms: wait.default, timeout_ms: timeout.default });
});
