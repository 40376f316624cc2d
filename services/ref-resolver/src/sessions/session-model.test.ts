import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  buildHandoffRecap,
  HANDOFF_BOUNDS,
  newSessionId,
  parseSessionSelector,
  recoveredWriteProblem,
  sessionCallProblem,
  titleProblem,
} from "./session-model.js";
import type { SessionCallInput } from "./session-model.js";

const call = (over: Partial<SessionCallInput> = {}): SessionCallInput => ({
  callId: "c1",
  tool: "read_files",
  effect: "read_only",
  outcome: "success",
  reasonCode: "",
  detailCode: "",
  pathsCount: 2,
  changedPathsCount: 0,
  jobId: "",
  jobState: "",
  durationMs: 5,
  ...over,
});

describe("session selectors", () => {
  it("accept a session_ref or a canonical wc_sess_* id, exactly", () => {
    const id = newSessionId();
    assert.match(id, /^wc_sess_[0-9a-f]{32}$/);
    assert.deepEqual(parseSessionSelector(id), { kind: "id", sessionId: id });
    assert.deepEqual(parseSessionSelector("~s7"), { kind: "ref", code: "7" });
    for (const bad of ["~p7", "~s0", "s7", `${id} `, id.toUpperCase(), "wc_sess_", "wc_sess_xyz"]) assert.equal(parseSessionSelector(bad), undefined, bad);
  });

  it("new session ids never repeat", () => {
    const ids = new Set(Array.from({ length: 1000 }, newSessionId));
    assert.equal(ids.size, 1000);
  });
});

describe("session titles", () => {
  it("are short single-line labels", () => {
    assert.equal(titleProblem(""), undefined);
    assert.equal(titleProblem("x".repeat(200)), undefined);
    assert.equal(titleProblem("x".repeat(201)), "title_too_long");
    assert.equal(titleProblem("a\nb"), "title_control_characters");
  });
});

describe("session call records", () => {
  it("accept bounded facts", () => {
    assert.equal(sessionCallProblem(call()), undefined);
    assert.equal(
      sessionCallProblem(call({ outcome: "pending", effect: "process_execution", tool: "run_shell", jobId: "job-1", jobState: "pending" })),
      undefined,
    );
    assert.equal(sessionCallProblem(call({ outcome: "failure", reasonCode: "stale_read_revision", detailCode: "observed_3" })), undefined);
    assert.equal(sessionCallProblem(call({ parentCallId: "3f1c2e9a-cell" })), undefined);
    assert.equal(sessionCallProblem(call({ parentCallId: "" })), undefined);
  });

  it("reject anything that is not a bounded fact", () => {
    assert.match(sessionCallProblem(call({ tool: "Read Files" })) ?? "", /tool/);
    assert.match(sessionCallProblem(call({ effect: "anything" })) ?? "", /effect/);
    assert.match(sessionCallProblem(call({ outcome: "maybe" })) ?? "", /outcome/);
    // The outcomes are the platform's CallOutcome: the Session-only spellings of old are not accepted.
    assert.match(sessionCallProblem(call({ outcome: "ok" })) ?? "", /outcome must be one of success, failure, pending, unknown/);
    assert.match(sessionCallProblem(call({ outcome: "failed" })) ?? "", /outcome/);
    assert.match(sessionCallProblem(call({ reasonCode: "No such file: /etc/passwd", outcome: "failure" })) ?? "", /reason_code/);
    assert.match(sessionCallProblem(call({ reasonCode: "internal" })) ?? "", /successful/);
    assert.match(sessionCallProblem(call({ pathsCount: -1 })) ?? "", /paths_count/);
    assert.match(sessionCallProblem(call({ pathsCount: 1.5 })) ?? "", /paths_count/);
    assert.match(sessionCallProblem(call({ jobId: "j1" })) ?? "", /job_id and job_state/);
    assert.match(sessionCallProblem(call({ jobId: "j1", jobState: "running" })) ?? "", /job_state/);
    assert.match(sessionCallProblem(call({ callId: "" })) ?? "", /call_id/);
    assert.match(sessionCallProblem(call({ parentCallId: "a b" })) ?? "", /parent_call_id/);
    assert.match(sessionCallProblem(call({ parentCallId: "x".repeat(129) })) ?? "", /parent_call_id/);
    assert.match(sessionCallProblem(call({ callId: "c1", parentCallId: "c1" })) ?? "", /own parent/);
  });
});

describe("recovered writes a Runner reports", () => {
  it("are recorded only with a call id, a tool name and rolled_back or completed", () => {
    assert.equal(recoveredWriteProblem({ callId: "call-1", tool: "edit_project_files", outcome: "rolled_back" }), undefined);
    assert.equal(recoveredWriteProblem({ callId: "call-1", tool: "import_host_files", outcome: "completed" }), undefined);
    assert.match(recoveredWriteProblem({ callId: "", tool: "edit_project_files", outcome: "completed" }) ?? "", /call_id/);
    assert.match(recoveredWriteProblem({ callId: "a b", tool: "edit_project_files", outcome: "completed" }) ?? "", /call_id/);
    assert.match(recoveredWriteProblem({ callId: "c", tool: "Edit", outcome: "completed" }) ?? "", /tool/);
    assert.match(recoveredWriteProblem({ callId: "c", tool: "edit_project_files", outcome: "partial" }) ?? "", /outcome/);
  });
});

describe("handoff recap", () => {
  const row = (
    tool: string,
    effect: string,
    calls: number,
    extra: Partial<{ failed: number; unknown: number; paths: number; changedPaths: number; lastMs: number }> = {},
  ) => ({
    tool,
    effect,
    calls,
    failed: 0,
    unknown: 0,
    paths: 0,
    changedPaths: 0,
    lastMs: 1,
    ...extra,
  });

  it("groups what was read, changed and run, and lists tools most used first", () => {
    const recap = buildHandoffRecap(
      [
        row("read_files", "read_only", 3, { paths: 7, lastMs: 10 }),
        row("edit_project_files", "workspace_write", 1, { changedPaths: 2, failed: 1 }),
        row("run_shell", "process_execution", 2, { unknown: 1 }),
      ],
      { rows: [{ jobId: "j1", tool: "run_shell", sinceMs: 5 }], total: 1 },
      [
        { seq: 6, tool: "run_shell", outcome: "pending", reasonCode: "", atMs: 6 },
        { seq: 5, tool: "read_files", outcome: "success", reasonCode: "", atMs: 5 },
      ],
      10,
    );
    assert.equal(recap.callsTotal, 6);
    assert.equal(recap.callsFailed, 1);
    assert.equal(recap.callsOutcomeUnknown, 1);
    assert.deepEqual(
      recap.callsByTool.map((t) => t.tool),
      ["read_files", "run_shell", "edit_project_files"],
    );
    assert.deepEqual(recap.read, { calls: 3, paths: 7, failed: 0 });
    assert.deepEqual(recap.changed, { calls: 1, paths: 2, failed: 1 });
    assert.deepEqual(recap.run, { calls: 2, paths: 0, failed: 0 });
    assert.deepEqual(
      recap.pendingJobs.map((j) => j.jobId),
      ["j1"],
    );
    assert.deepEqual(
      recap.recentCalls.map((c) => c.seq),
      [5, 6],
      "recent calls read oldest first",
    );
    assert.equal(recap.truncated, false);
  });

  it("cuts every list to its bound and says so", () => {
    const tools = Array.from({ length: HANDOFF_BOUNDS.tools + 5 }, (_, i) => row(`tool_${i}`, "read_only", 1));
    const pending = Array.from({ length: HANDOFF_BOUNDS.pendingJobs }, (_, i) => ({ jobId: `j${i}`, tool: "run_shell", sinceMs: i }));
    const recent = Array.from({ length: 80 }, (_, i) => ({ seq: 80 - i, tool: "read_files", outcome: "success" as const, reasonCode: "", atMs: 0 }));
    const recap = buildHandoffRecap(tools, { rows: pending, total: 45 }, recent, 500);
    assert.equal(recap.callsByTool.length, HANDOFF_BOUNDS.tools);
    assert.equal(recap.pendingJobs.length, HANDOFF_BOUNDS.pendingJobs);
    assert.equal(recap.pendingJobsTotal, 45);
    assert.equal(recap.recentCalls.length, HANDOFF_BOUNDS.recentMax);
    assert.equal(recap.truncated, true);
  });
});
