import { test } from "node:test";
import assert from "node:assert/strict";
import { LIVE_JOB_STATES, OBSERVED_LIVE_JOB_STATES, RUNNER_JOB_STATES, TERMINAL_JOB_STATES, isTerminalJobState, jobRecordTerminal } from "./job-states.js";

test("every Runner process state maps to one record state: completed succeeds only with exit code 0", () => {
  const mapped = Object.fromEntries(RUNNER_JOB_STATES.map((s) => [s, jobRecordTerminal(s, 0)]));
  assert.deepEqual(mapped, { running: undefined, completed: "succeeded", timed_out: "timed_out", cancelled: "cancelled", failed_to_start: "failed" });
  assert.equal(jobRecordTerminal("completed", 1), "failed");
  assert.equal(jobRecordTerminal("completed", undefined), "failed");
  assert.equal(jobRecordTerminal("completed", "0"), "failed");
  assert.equal(jobRecordTerminal("nonsense", 0), undefined);
  for (const s of RUNNER_JOB_STATES) {
    const t = jobRecordTerminal(s, 0);
    if (t !== undefined) assert.ok((TERMINAL_JOB_STATES as readonly string[]).includes(t));
  }
});

test("live and terminal are disjoint, and every state a gateway reads is one or the other", () => {
  for (const s of LIVE_JOB_STATES) assert.equal(isTerminalJobState(s), false, s);
  for (const s of TERMINAL_JOB_STATES) assert.equal(isTerminalJobState(s), true, s);
  for (const s of ["pending", "unknown", "running"]) assert.equal(isTerminalJobState(s), false, s);
  assert.equal(isTerminalJobState("completed"), true);
  assert.equal(isTerminalJobState(undefined), false);
  assert.equal(OBSERVED_LIVE_JOB_STATES.size, LIVE_JOB_STATES.length + 2);
});
