import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { SessionHandoffSchema } from "@webcodex/proto";
import { toolDefinition, toolFailure, waitForJobFollowUp } from "@webcodex/contracts";
import type { ToolDefinition } from "@webcodex/contracts";
import { handoffView, sessionCallFacts, validationVerdict } from "./session-facts.js";

const def = (name: string) => toolDefinition(name) as ToolDefinition;
const ok = (result: Record<string, unknown>) => ({ ok: true as const, result });

test("read_files counts the items it read and changes nothing", () => {
  const facts = sessionCallFacts(
    def("read_files"),
    ok({
      items: [
        { path: "a", content: "x", read_revision: "r_1" },
        { path: "b", content: "y", read_revision: "r_2" },
      ],
    }),
  );
  assert.deepEqual(facts, {
    outcome: "success",
    reasonCode: "",
    detailCode: "",
    pathsCount: 2,
    changedPathsCount: 0,
    jobId: "",
    jobState: "",
    paths: [
      { path: "a", readRevision: "r_1", changed: false },
      { path: "b", readRevision: "r_2", changed: false },
    ],
    commandSummary: "",
  });
});

test("an applied edit records each changed path with its new revision; a run records its command and exit code", () => {
  const edit = sessionCallFacts(
    def("edit_project_files"),
    ok({
      dry_run: false,
      changed: true,
      files: [
        { path: "a", kind: "edit", changed: true, read_revision: "r_9" },
        { path: "b", kind: "move", destination: "c", changed: true, read_revision: "r_8" },
      ],
    }),
  );
  assert.deepEqual(edit.paths, [
    { path: "a", readRevision: "r_9", changed: true },
    { path: "b", readRevision: "", changed: true },
    { path: "c", readRevision: "r_8", changed: true },
  ]);
  const run = sessionCallFacts(def("run_process"), ok({ execution_state: "completed", job_id: "j", exit_code: 2 }), { args: ["make", "test"] });
  assert.deepEqual([run.commandSummary, run.exitCode], ["make test", 2]);
  assert.equal(sessionCallFacts(def("run_shell"), ok({ execution_state: "completed", command_summary: "npm test", exit_code: 0 })).commandSummary, "npm test");
});

test("search counts distinct matched paths, not matches", () => {
  const result = {
    results: [
      {
        matches: [
          { path: "a", line: 1 },
          { path: "a", line: 2 },
        ],
      },
      { matches: [{ path: "b", line: 1 }] },
      { reason_code: "path_not_found" },
    ],
  };
  assert.equal(sessionCallFacts(def("search_project_texts"), ok(result)).pathsCount, 2);
});

test("an applied edit counts changed files; a dry run or a no-op changes none", () => {
  const applied = {
    changed: true,
    paths: ["a", "b"],
    files: [
      { path: "a", changed: true },
      { path: "b", changed: false },
    ],
  };
  assert.deepEqual(
    [sessionCallFacts(def("edit_project_files"), ok(applied)).pathsCount, sessionCallFacts(def("edit_project_files"), ok(applied)).changedPathsCount],
    [2, 1],
  );
  assert.equal(sessionCallFacts(def("edit_project_files"), ok({ ...applied, dry_run: true })).changedPathsCount, 0);
  assert.equal(sessionCallFacts(def("edit_project_files"), ok({ ...applied, changed: false })).changedPathsCount, 0);
});

test("execution: pending and running Jobs are pending, completed ones terminal, an unknown Job is unknown", () => {
  const pending = sessionCallFacts(def("run_shell"), ok({ execution_state: "pending", job_id: "job_1" }));
  assert.deepEqual([pending.outcome, pending.jobId, pending.jobState], ["pending", "job_1", "pending"]);
  const detached = sessionCallFacts(def("run_detached_process"), ok({ execution_state: "running", job_id: "job_2" }));
  assert.deepEqual([detached.outcome, detached.jobState], ["success", "pending"]);
  const done = sessionCallFacts(def("wait_for_job_terminal"), ok({ execution_state: "completed", job_id: "job_1", exit_code: 1 }));
  assert.deepEqual([done.outcome, done.jobId, done.jobState], ["success", "job_1", "terminal"]);
  const gone = sessionCallFacts(def("wait_for_job_terminal"), ok({ execution_state: "unknown", job_id: "job_9", reason_code: "job_not_found" }));
  assert.deepEqual([gone.outcome, gone.reasonCode, gone.jobId, gone.jobState], ["unknown", "job_not_found", "", ""]);
});

test("a failure records its reason, and an unknown effect stays unknown rather than failed", () => {
  const stale = sessionCallFacts(def("edit_project_files"), {
    ok: false,
    failure: toolFailure("stale_read_revision", "preflight", { detail_code: "changed_since_read" }),
  });
  assert.deepEqual([stale.outcome, stale.reasonCode, stale.detailCode, stale.changedPathsCount], ["failure", "stale_read_revision", "changed_since_read", 0]);
  const lost = sessionCallFacts(def("run_shell"), { ok: false, failure: toolFailure("dependency_unavailable", "dispatch", { outcome_unknown: true }) });
  assert.equal(lost.outcome, "unknown");
});

test("the handoff view converts int64s, keeps both identities and omits empty extras", () => {
  const view = handoffView(
    create(SessionHandoffSchema, {
      sessionRef: "~s1",
      session: {
        sessionId: "wc_sess_x",
        projectCanonicalId: "agent:local:demo",
        state: "open",
        title: "",
        createdUnixMs: 0n,
        lastActivityUnixMs: 1000n,
        closedUnixMs: 0n,
        callsRecorded: 3n,
      },
      callsTotal: 3n,
      callsFailed: 1n,
      callsByTool: [
        { tool: "read_files", calls: 2n, failed: 0n, lastUnixMs: 1000n },
        { tool: "run_shell", calls: 1n, failed: 1n, lastUnixMs: 900n },
      ],
      read: { calls: 2n, paths: 3n, failed: 0n },
      run: { calls: 1n, paths: 0n, failed: 1n },
      pendingJobs: [{ jobId: "job_1", tool: "run_shell", sinceUnixMs: 500n }],
      pendingJobsTotal: 1n,
      recentCalls: [{ seq: 3n, tool: "run_shell", outcome: "failure", reasonCode: "dependency_unavailable", atUnixMs: 900n }],
    }),
  );
  assert.deepEqual(view, {
    session_ref: "~s1",
    session_id: "wc_sess_x",
    project: "agent:local:demo",
    state: "open",
    created_at: "1970-01-01T00:00:00.000Z",
    last_activity_at: "1970-01-01T00:00:01.000Z",
    calls: { total: 3, failed: 1 },
    read: { calls: 2, paths: 3, failed: 0 },
    changed: { calls: 0, paths: 0, failed: 0 },
    run: { calls: 1, failed: 1 },
    pending_jobs: [
      { job_id: "job_1", tool: "run_shell", since: "1970-01-01T00:00:00.500Z", follow_up: waitForJobFollowUp("agent:local:demo", "job_1", "~s1") },
    ],
    tools: [
      { tool: "read_files", calls: 2 },
      { tool: "run_shell", calls: 1, failed: 1 },
    ],
    recent_calls: [{ seq: 3, tool: "run_shell", outcome: "failure", reason_code: "dependency_unavailable", at: "1970-01-01T00:00:00.900Z" }],
  });
});

test("the handoff view shows how recovery finished a call cut off by a Runner crash, and nothing for other calls", () => {
  const view = handoffView(
    create(SessionHandoffSchema, {
      sessionRef: "~s1",
      callsTotal: 2n,
      recentCalls: [
        { seq: 1n, tool: "edit_project_files", outcome: "success", atUnixMs: 100n },
        { seq: 2n, tool: "edit_project_files", outcome: "unknown", reasonCode: "runner_lost", atUnixMs: 200n, recovered: "rolled_back" },
      ],
    }),
  );
  assert.deepEqual(view["recent_calls"], [
    { seq: 1, tool: "edit_project_files", outcome: "success", at: "1970-01-01T00:00:00.100Z" },
    { seq: 2, tool: "edit_project_files", outcome: "unknown", reason_code: "runner_lost", recovered: "rolled_back", at: "1970-01-01T00:00:00.200Z" },
  ]);
});

test("the handoff view names the cell a call was made in, and nothing for a direct call", () => {
  const view = handoffView(
    create(SessionHandoffSchema, {
      sessionRef: "~s1",
      callsTotal: 2n,
      recentCalls: [
        { seq: 1n, tool: "read_files", outcome: "success", atUnixMs: 100n },
        { seq: 2n, tool: "read_files", outcome: "success", atUnixMs: 200n, parentCallId: "cell-1" },
      ],
    }),
  );
  assert.deepEqual(view["recent_calls"], [
    { seq: 1, tool: "read_files", outcome: "success", at: "1970-01-01T00:00:00.100Z" },
    { seq: 2, tool: "read_files", outcome: "success", parent_call_id: "cell-1", at: "1970-01-01T00:00:00.200Z" },
  ]);
});

test("a validation verdict records its status and summed counts, never messages or paths", () => {
  const def = toolDefinition("project_validate") as ToolDefinition;
  const result = {
    status: "failed",
    truncated: false,
    checks: [
      { check: "typecheck", provider: "node", command_summary: "tsc --noEmit", status: "failed", diagnostics: { errors: 2, warnings: 1 } },
      { check: "test", provider: "node", command_summary: "node --test", status: "failed", tests: { passed: 3, failed: 1, skipped: 2 } },
      { check: "test", provider: "go", command_summary: "go test -json ./...", status: "passed", tests: { passed: 4, failed: 0, skipped: 0 } },
    ],
    failures: [{ check: "typecheck", path: "src/secret.ts", line: 3, message: "Type 'string' is not assignable" }],
  };
  const facts = sessionCallFacts(def, { ok: true, result });
  assert.deepEqual(facts.validation, { status: "failed", testsPassed: 7, testsFailed: 1, testsSkipped: 2, errors: 2, warnings: 1 });
  assert.doesNotMatch(JSON.stringify(facts), /secret|assignable|tsc/u);
  assert.deepEqual(validationVerdict(result)?.providers, ["go", "node"]);
  // Anything that is not a StructuredValidation result has no verdict.
  assert.equal(validationVerdict({ status: "ok", checks: [], failures: [] }), undefined);
  assert.equal(validationVerdict({ execution_state: "completed", exit_code: 0 }), undefined);
  assert.equal(
    sessionCallFacts(toolDefinition("run_shell") as ToolDefinition, { ok: true, result: { execution_state: "completed", exit_code: 0 } }).validation,
    undefined,
  );
});

test("the handoff view lists paths with their latest revisions and commands with outcomes, and says when a list was cut", () => {
  const view = handoffView(
    create(SessionHandoffSchema, {
      sessionRef: "~s2",
      session: {
        sessionId: "wc_sess_y",
        projectCanonicalId: "agent:local:demo",
        state: "open",
        title: "",
        createdUnixMs: 0n,
        lastActivityUnixMs: 0n,
        closedUnixMs: 0n,
        callsRecorded: 2n,
      },
      paths: [
        { path: "src/a.ts", readRevision: "r_2", changed: true },
        { path: "README.md", readRevision: "r_1", changed: false },
      ],
      pathsTruncated: true,
      commands: [
        { tool: "run_shell", commandSummary: "npm test", outcome: "success", exitCode: 1 },
        // An outcome outside the vocabulary (a resolver of another build) is not passed on as if known.
        { tool: "run_shell", commandSummary: "make", outcome: "ok" },
      ],
    }),
  );
  assert.deepEqual(view["paths"], [
    { path: "src/a.ts", read_revision: "r_2", changed: true },
    { path: "README.md", read_revision: "r_1" },
  ]);
  assert.equal(view["paths_truncated"], true);
  assert.deepEqual(view["commands"], [
    { tool: "run_shell", command: "npm test", outcome: "success", exit_code: 1 },
    { tool: "run_shell", command: "make", outcome: "unknown" },
  ]);
  assert.equal(view["commands_truncated"], undefined);
});
