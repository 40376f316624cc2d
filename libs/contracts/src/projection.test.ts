import { test } from "node:test";
import assert from "node:assert/strict";
import { compactBatch, compactEdit, compactRun, compactShell, compactValidation } from "./compaction.js";
import { projectSuccess } from "./projection.js";
import { toolDefinitions } from "./catalog.js";
import { waitForJobFollowUp } from "./follow-up.js";
import { normalizationHints } from "./normalize.js";

type Json = Record<string, unknown>;

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

const shellSuccess = (): Json => ({
  execution_state: "completed",
  job_id: "job_1",
  state: "completed",
  exit_code: 0,
  signal: null,
  timed_out: false,
  command_summary: "ls",
  cwd: ".",
  shell: "sh",
  output: "a\n",
  stdout: "a\n",
  stderr: "",
  stdout_bytes: 2,
  stderr_bytes: 0,
  duration_ms: 3,
  started_at: "t",
  effective: { timeout_ms: 1000, wait_ms: 100 },
  truncated: false,
});
const readBatch = (): Json => ({
  items: [
    { success: true, error: null, path: "a", content: "x", read_revision: "r1", truncated: false },
    { success: true, error: null, path: "b", binary: true, size_bytes: 3, read_revision: "r2" },
  ],
});
const searchBatch = (): Json => ({ results: [{ success: true, error: null, matches: [{ path: "a", line: 1, text: "x" }], total: 1, truncated: false }] });
const appliedEdit = (): Json => ({
  dry_run: false,
  execution_state: "completed",
  changed: true,
  paths: ["a"],
  applied_count: 1,
  change_summary: { files_changed: 1 },
  files: [{ path: "a", kind: "edit", changed: true, read_revision: "r2" }],
});

/** Canonical results of every shape a projection treats specially, plus pending and failure-like runs. */
const fixtures: Record<string, () => Json> = {
  shellSuccess,
  shellFailed: () => ({ ...shellSuccess(), exit_code: 2 }),
  pending: () => ({ execution_state: "pending", job_id: "job_1", effective: { timeout_ms: 1000, wait_ms: 100 } }),
  readBatch,
  searchBatch,
  appliedEdit,
  dryRunEdit: () => ({ dry_run: true, changed: true, paths: ["a"], change_summary: {}, files: [] }),
};

const extras = {
  normalization: { code: "clamped_to_ceiling" as const, hint: normalizationHints.clamped_to_ceiling, effective: { timeout_ms: 600_000 } },
  followUp: waitForJobFollowUp("~p1", "job_1"),
};

test("projections are pure: a deep-frozen canonical result projects through every tool's projection unchanged", () => {
  for (const def of toolDefinitions()) {
    for (const [name, make] of Object.entries(fixtures)) {
      const canonical = deepFreeze(make());
      const before = structuredClone(canonical);
      const projected = projectSuccess(def, canonical, extras);
      assert.deepEqual(canonical, before, `${def.name}/${name}: canonical unchanged`);
      assert.notEqual(projected, canonical, `${def.name}/${name}: a new object`);
      assert.deepEqual(projected["input_normalization"], extras.normalization);
      assert.deepEqual(projected["follow_up"], extras.followUp);
      // The projection is the caller's own: writing to it never reaches the canonical result.
      projected["extra"] = 1;
      assert.ok(!("extra" in canonical));
    }
  }
});

test("a complete all-success batch omits per-item success and error", () => {
  assert.deepEqual(compactBatch(readBatch(), "items"), {
    items: [
      { path: "a", content: "x", read_revision: "r1", truncated: false },
      { path: "b", binary: true, size_bytes: 3, read_revision: "r2" },
    ],
  });
  assert.deepEqual(compactBatch(searchBatch(), "results"), { results: [{ matches: [{ path: "a", line: 1, text: "x" }], total: 1, truncated: false }] });
});

test("a partial batch keeps full envelopes", () => {
  const input = {
    items: [
      { success: true, error: null, path: "a" },
      { success: false, path: "b", error: { reason_code: "path_not_found" } },
    ],
  };
  assert.deepEqual(compactBatch(input, "items"), input);
});

test("a batch with a truncated, uncertain or search-fallback item keeps every full envelope", () => {
  const ok = { success: true, error: null, path: "a", content: "x", truncated: false };
  const incomplete: Json[] = [
    { ...ok, path: "b", truncated: true, next_start_line: 9 },
    { ...ok, path: "b", truncated: null },
    { ...ok, path: "b", line_truncated: true },
    { ...ok, path: "b", outcome_unknown: true },
  ];
  for (const item of incomplete) {
    const input = { items: [ok, item] };
    assert.deepEqual(compactBatch(input, "items"), input, JSON.stringify(item));
  }
  const searches: Json[] = [
    { success: true, error: null, matches: [], total: 5000, truncated: false, total_is_lower_bound: true },
    { success: true, error: null, matches: [], total: 1, truncated: false, search_errors: true },
    { success: true, error: null, matches: [{ path: "a", line: 1, text: "x", text_truncated: true }], total: 1, truncated: false },
  ];
  for (const q of searches) assert.deepEqual(compactBatch({ results: [q] }, "results"), { results: [q] }, JSON.stringify(q));
});

test("an applied edit states each fact once: files hold paths and revisions, no top-level paths/changed, no bookkeeping", () => {
  assert.deepEqual(compactEdit(appliedEdit()), { files: [{ path: "a", read_revision: "r2" }] });
  const dry = { dry_run: true, files: [] };
  assert.deepEqual(compactEdit(dry), dry);
  const unsure = { ...appliedEdit(), execution_state: "unknown" };
  assert.deepEqual(compactEdit(unsure), unsure, "only a completed state is bookkeeping; anything else keeps every fact");
});

test("an edit's files: a move under its destination, a delete only in the counts, an unchanged file says changed:false", () => {
  const projected = compactEdit({
    ...appliedEdit(),
    paths: ["a", "b", "c", "d", "e"],
    change_summary: { files_changed: 3, edits_applied: 1, replacements: 3, created: 0, deleted: 1, moved: 1 },
    files: [
      { path: "a", kind: "edit", changed: true, read_revision: "r2", replacements: 3 },
      { path: "b", kind: "move", destination: "c", changed: true, read_revision: "r3", replacements: 0 },
      { path: "d", kind: "delete", changed: true, replacements: 0 },
      { path: "e", kind: "edit", changed: false, read_revision: "r4", replacements: 0 },
    ],
  });
  assert.deepEqual(projected, {
    change_summary: { edits_applied: 1, replacements: 3, deleted: 1 },
    files: [
      { path: "a", read_revision: "r2" },
      { path: "c", read_revision: "r3" },
      { path: "e", read_revision: "r4", changed: false },
    ],
  });
  const dry = compactEdit({
    dry_run: true,
    changed: true,
    paths: ["a"],
    change_summary: { files_changed: 1, edits_applied: 1, replacements: 2, created: 0, deleted: 0, moved: 0 },
    files: [{ path: "a", kind: "edit", changed: true, replacements: 2, edits: [{ edit_index: 0, match_count: 2, match_ranges: [] }] }],
  });
  assert.deepEqual(dry, {
    dry_run: true,
    change_summary: { edits_applied: 1, replacements: 2 },
    files: [{ path: "a", edits: [{ edit_index: 0, match_count: 2, match_ranges: [] }] }],
  });
});

test("a proven synchronous exit-zero shell success drops bookkeeping; failures, timeouts and pending stay rich", () => {
  assert.deepEqual(compactShell(shellSuccess()), { command_summary: "ls", cwd: ".", shell: "sh", output: "a\n", truncated: false });
  for (const rich of [
    { ...shellSuccess(), exit_code: 2 },
    { ...shellSuccess(), timed_out: true, exit_code: null, signal: "SIGKILL" },
    { execution_state: "pending", job_id: "job_1" },
  ]) {
    const projected = compactShell(rich);
    for (const k of ["execution_state", "job_id", "exit_code", "signal", "timed_out", "output", "duration_ms"])
      assertSameFact(rich, projected, k, JSON.stringify(rich));
  }
});

test("a rich run result carries its output once and one state field; effective limits only when they decided the outcome", () => {
  const failed = compactShell({ ...shellSuccess(), exit_code: 2, stderr: "boom\n", output: "a\nboom\n" });
  assert.equal(failed["output"], "a\nboom\n");
  assert.ok(!("stdout" in failed) && !("stderr" in failed), "the combined output holds the same bytes");
  assert.ok(!("state" in failed) && failed["execution_state"] === "completed", "one state field");
  assert.ok(!("effective" in failed), "limits that did not matter are not echoed");
  const timedOut = compactShell({ ...shellSuccess(), state: "timed_out", timed_out: true, exit_code: null, signal: "SIGKILL" });
  assert.deepEqual(timedOut["effective"], { timeout_ms: 1000 }, "the timeout that ended it");
  assert.ok(!("state" in timedOut));
  const cancelled = compactRun({ ...shellSuccess(), state: "cancelled", exit_code: null, signal: "SIGTERM" });
  assert.equal(cancelled["execution_state"], "cancelled");
  const proc = compactRun({
    execution_state: "completed",
    job_id: "j",
    state: "completed",
    exit_code: 1,
    signal: null,
    timed_out: false,
    stdout: "o",
    stderr: "e",
    effective: { timeout_ms: 1, wait_ms: 2 },
  });
  assert.deepEqual(
    [proc["stdout"], proc["stderr"], "state" in proc, "effective" in proc],
    ["o", "e", false, false],
    "run_process has no combined output: both streams stay",
  );
  const pending = compactRun({ execution_state: "pending", job_id: "j", effective: { timeout_ms: 1, wait_ms: 2 } });
  assert.deepEqual(pending, { execution_state: "pending", job_id: "j" });
});

test("a shell success with an unobserved end, a follow-up or recovery is not compacted", () => {
  for (const extra of [{ outcome_unknown: true }, { follow_up: waitForJobFollowUp("~p1", "job_1") }, { recovery: { kind: "x" } }]) {
    const r = { ...shellSuccess(), ...extra };
    const projected = compactShell(r);
    for (const k of ["execution_state", "job_id", "exit_code", "signal", "timed_out", "duration_ms", "started_at", "output", ...Object.keys(extra)])
      assertSameFact(r, projected, k, JSON.stringify(extra));
  }
});

test("a clean shell success keeps truncation/loss facts, outcome_unknown=false and unknown sidecars", () => {
  const r = compactShell({
    ...shellSuccess(),
    truncated: true,
    omitted_bytes: { stdout: 10, stderr: 0, output: 10 },
    outcome_unknown: false,
    expectations: { met: true },
  });
  assert.equal(r["truncated"], true);
  assert.deepEqual(r["omitted_bytes"], { stdout: 10, stderr: 0, output: 10 });
  assert.equal(r["outcome_unknown"], false);
  assert.deepEqual(r["expectations"], { met: true });
  assert.ok(!("job_id" in r) && !("duration_ms" in r));
});

/** Each value a fact can take: proven false, proven true, unknown (null) and unknown (absent). */
const factValues = [false, true, null, undefined] as const;

function withFact(obj: Json, key: string, value: (typeof factValues)[number]): Json {
  const out = { ...obj };
  if (value === undefined) delete out[key];
  else out[key] = value;
  return out;
}

function assertSameFact(canonical: Json, projected: Json, key: string, where: string): void {
  assert.equal(key in projected, key in canonical, `${where}: ${key} presence`);
  assert.equal(projected[key], canonical[key], `${where}: ${key} value`);
}

test("truncated false/true/null/absent and outcome_unknown stay distinct through every projection", () => {
  for (const def of toolDefinitions()) {
    for (const [name, make] of Object.entries(fixtures)) {
      for (const key of ["truncated", "outcome_unknown"]) {
        for (const value of factValues) {
          // At the top level.
          const top = withFact(make(), key, value);
          assertSameFact(top, projectSuccess(def, deepFreeze(top)), key, `${def.name}/${name}/top ${key}=${String(value)}`);
          // On each item of a batch.
          for (const listKey of ["items", "results"]) {
            const base = make();
            if (!Array.isArray(base[listKey])) continue;
            const canonical = { ...base, [listKey]: (base[listKey] as Json[]).map((i) => withFact(i, key, value)) };
            const projected = projectSuccess(def, deepFreeze(canonical));
            (canonical[listKey] as Json[]).forEach((item, i) => {
              assertSameFact(item, (projected[listKey] as Json[])[i] as Json, key, `${def.name}/${name}/${listKey}[${i}] ${key}=${String(value)}`);
            });
          }
        }
      }
    }
  }
});

test("a validation answer reached within the wait drops Job bookkeeping; timeouts, crashes, pending and uncertainty stay rich", () => {
  // The validation process's own answer carries no exit code (its status is the verdict).
  const life = {
    execution_state: "completed",
    job_id: "job_1",
    state: "completed",
    duration_ms: 900,
    started_at: "2026-01-01T00:00:00.000Z",
    effective: { timeout_ms: 120000, wait_ms: 10000 },
  };
  const verdict = {
    status: "failed",
    checks: [
      {
        check: "test",
        provider: "go",
        command_summary: "go test -json ./...",
        status: "failed",
        tests: { passed: 1, failed: 1, skipped: 0 },
        duration_ms: 800,
      },
    ],
    failures: [{ check: "test", test: "TestAdd", path: "calc_test.go", line: 7, message: "boom" }],
    truncated: false,
  };
  assert.deepEqual(compactValidation({ ...life, ...verdict }), {
    ...verdict,
    checks: [{ check: "test", provider: "go", command_summary: "go test -json ./...", status: "failed", tests: { passed: 1, failed: 1, skipped: 0 } }],
  });
  const timedOut = {
    ...life,
    state: "timed_out",
    exit_code: null,
    timed_out: true,
    signal: "SIGTERM",
    status: "error",
    detail: "timed_out",
    checks: [],
    failures: [],
    truncated: false,
  };
  assert.deepEqual(compactValidation(timedOut), timedOut);
  const pending = { execution_state: "pending", job_id: "job_1", effective: { timeout_ms: 120000, wait_ms: 0 } };
  assert.deepEqual(compactValidation(pending), pending);
  const uncertain = { ...life, ...verdict, outcome_unknown: true };
  assert.deepEqual(compactValidation(uncertain), uncertain);
  const crashed = {
    ...life,
    exit_code: 70,
    signal: null,
    timed_out: false,
    status: "error",
    detail: "validator_crashed",
    checks: [],
    failures: [],
    truncated: false,
  };
  assert.deepEqual(compactValidation(crashed), crashed);
  const nothing = { status: "error", detail: "nothing_detected", checks: [], failures: [], truncated: false, notes: ["no validator"] };
  assert.deepEqual(compactValidation({ ...life, ...nothing }), nothing, "nothing detected is not reported like a failed run");
  const usage = { ...verdict, status: "error", checks: [{ ...verdict.checks[0], status: "error", detail: "go_package_pattern_invalid" }] };
  assert.equal(compactValidation({ ...life, ...usage })["job_id"], undefined);
});
