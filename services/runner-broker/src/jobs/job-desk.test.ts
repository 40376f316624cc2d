import { test } from "node:test";
import assert from "node:assert/strict";
import { JOB_OBSERVE_TOOLS, JOB_START_TOOLS } from "./job-desk.js";

test("the job desk keeps records for every tool that can start a Job and answers the two observers", () => {
  assert.deepEqual([...JOB_START_TOOLS].sort(), [
    "cargo_check",
    "cargo_test",
    "go_test",
    "project_validate",
    "run_detached_process",
    "run_process",
    "run_script",
    "run_shell",
  ]);
  assert.deepEqual([...JOB_OBSERVE_TOOLS].sort(), ["observe_jobs", "wait_for_job_terminal"]);
});
