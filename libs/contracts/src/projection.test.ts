import { test } from "node:test";
import assert from "node:assert/strict";
import { compactBatch, compactEdit, compactShell } from "./projection.js";

test("a complete all-success batch omits per-item success and error", () => {
  const r = compactBatch({ items: [{ success: true, error: null, path: "a", content: "x" }] }, "items");
  assert.deepEqual(r, { items: [{ path: "a", content: "x" }] });
});

test("a partial batch keeps full envelopes", () => {
  const input = { items: [{ success: true, error: null, path: "a" }, { success: false, path: "b", error: { reason_code: "path_not_found" } }] };
  assert.deepEqual(compactBatch(input, "items"), input);
});

test("an applied edit omits dry_run=false, execution state and applied counts; a dry run keeps them", () => {
  const applied = compactEdit({ dry_run: false, execution_state: "completed", applied_count: 1, changed: true, paths: ["a"], change_summary: {}, files: [] });
  assert.deepEqual(Object.keys(applied).sort(), ["change_summary", "changed", "files", "paths"]);
  const dry = { dry_run: true, files: [] };
  assert.deepEqual(compactEdit(dry), dry);
});

test("a proven synchronous exit-zero shell success drops bookkeeping; failures stay rich", () => {
  const base = { execution_state: "completed", job_id: "job_1", exit_code: 0, signal: null, timed_out: false, command_summary: "ls", cwd: ".", shell: "sh", output: "a\n", stdout: "a\n", stderr: "", duration_ms: 3, started_at: "t", truncated: false };
  assert.deepEqual(compactShell(base), { command_summary: "ls", cwd: ".", shell: "sh", output: "a\n" });
  const failed = { ...base, exit_code: 2 };
  assert.deepEqual(compactShell(failed), failed);
  const pending = { execution_state: "pending", job_id: "job_1" };
  assert.deepEqual(compactShell(pending), pending);
});
