/**
 * The call pipeline's audit contract, with in-memory peers: every tools/call yields exactly
 * one ActionAudit record (refusals included) carrying the argument shape, the failure stage
 * and, for a success, the result sizes; an effectful call whose record cannot be made durable
 * is not acknowledged as a success.
 *
 * One concept over 400 lines: the pipeline's contract, against one set of in-memory peers.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { ConnectError, Code, createClient } from "@connectrpc/connect";
import type { Client } from "@connectrpc/connect";
import { RunnerBrokerService } from "@webcodex/proto";
import type { RefResolverService } from "@webcodex/proto";
import {
  admittedTools,
  failureFollowUpBuilder,
  followUpTarget,
  listedTools,
  reasonCodeTable,
  ReasonCode,
  PipelineStage,
  toolDefinitions,
  toolFailure,
  validateToolArguments,
  failureToWire,
} from "@webcodex/contracts";
import type { FollowUp, ToolDefinition } from "@webcodex/contracts";
import { argumentShape, createLogger, createMetrics, createServiceTransport } from "@webcodex/platform";
import type { Metrics } from "@webcodex/platform";
import type { Caller } from "./auth.js";
import { AuditNotDurableError } from "./audit-recorder.js";
import type { ActionRecordInit, AuditRecorder } from "./audit-recorder.js";
import type { AdmittedCatalog, CatalogCache } from "./catalog-cache.js";
import { createPipeline } from "./pipeline.js";

const caller: Caller = { principal: { clientId: "acme", subject: "alice" }, admissionProfile: "full", scopes: ["webcodex:read", "webcodex:write"] };
const project = { canonicalId: "agent:acme:demo", rootIdentity: "root-1", name: "demo" };

function catalogOf(defs: readonly ToolDefinition[]): AdmittedCatalog {
  return { version: "test", admitted: new Map(defs.map((d) => [d.name, d])), listed: listedTools(defs), toolsListResult: { tools: [] } };
}

/** A recorder that keeps what the pipeline asked it to record, and may refuse durable records. */
function recordingAudit(refuseDurable = false) {
  const records: Array<{ record: ActionRecordInit; durable: boolean }> = [];
  const audit: AuditRecorder = {
    async record(record, durable) {
      records.push({ record, durable });
      if (durable && refuseDurable) throw new AuditNotDurableError(new Error("audit down, spool full"));
    },
    flush: async () => undefined,
    replay: async () => 0,
    backlog: () => 0,
    close: async () => undefined,
  };
  return { audit, records };
}

type DispatchAnswer = ({ resultJson: string } | { failure: ReturnType<typeof failureToWire> }) & { answeredFallback?: boolean };
type DispatchRequest = { callId: string; tool: string; argumentsJson: string; fallback?: { tool: string; argumentsJson: string } };

type ProjectEntry = { projectRef: string; project: { canonicalId: string; rootIdentity: string; name: string } };

function pipelineWith(options: {
  audit: AuditRecorder;
  catalogs?: CatalogCache;
  dispatch?: (req: DispatchRequest) => DispatchAnswer;
  metrics?: Metrics;
  projects?: ProjectEntry[];
  runnerStates?: (req: { projects: Array<{ projectCanonicalId: string; rootIdentity: string }> }) => Record<string, string>;
  broker?: Client<typeof RunnerBrokerService>;
  mode?: "embedded" | "distributed";
  /** The Projects the broker's fleet rows name (getFleetStatus), or "down" when it cannot answer. */
  fleet?: string[] | "down";
  /** What listProjects answers instead of a page (a wire failure), and the requests it saw. */
  listFailure?: ReturnType<typeof failureToWire>;
  listRequests?: unknown[];
}) {
  const refResolver = {
    resolveProject: async () => ({ project }),
    listProjects: async (req: { restrictToOnly?: boolean; onlyCanonicalIds?: string[] }) => {
      options.listRequests?.push(req);
      if (options.listFailure) return { projects: [], omitted: 0, nextCursor: "", failure: options.listFailure };
      const all = options.projects ?? [];
      return { projects: req.restrictToOnly ? all.filter((p) => req.onlyCanonicalIds?.includes(p.project.canonicalId)) : all, omitted: 0, nextCursor: "" };
    },
  } as unknown as Client<typeof RefResolverService>;
  const broker = {
    getProjectRunnerStates: async (req: { projects: Array<{ projectCanonicalId: string; rootIdentity: string }> }) => ({
      states: (options.runnerStates ?? (() => ({})))(req),
    }),
    dispatch: async (req: DispatchRequest) => (options.dispatch ?? (() => ({ resultJson: "{}" })))(req),
    // Without `fleet`, a malformed answer (no runner rows): building full diagnostics from it throws mid-call.
    getFleetStatus: async () => {
      if (options.fleet === "down") throw new ConnectError("broker down", Code.Unavailable);
      return options.fleet ? { runners: options.fleet.map((projectCanonicalId) => ({ projectCanonicalId })) } : {};
    },
  } as unknown as Client<typeof RunnerBrokerService>;
  return createPipeline({
    catalogs: options.catalogs ?? { get: async () => catalogOf(toolDefinitions()) },
    refResolver,
    broker: options.broker ?? broker,
    audit: options.audit,
    hostProfile: "generic",
    serverInfo: { name: "webcodex", version: "test", mode: options.mode ?? "embedded" },
    logger: createLogger({ service: "test", level: "silent" }),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}

const signal = new AbortController().signal;
const readFilesResult = { items: [{ path: "README.md", content: "# demo\n", read_revision: "r1", success: true }] };
const editResult = { changed: true, files: [{ path: "README.md", read_revision: "r2" }] };

describe("pipeline audit", () => {
  it("a read-only success is recorded once, batched, with shape, sizes and stage times but no values", async () => {
    const { audit, records } = recordingAudit();
    const pipeline = pipelineWith({ audit, dispatch: () => ({ resultJson: JSON.stringify(readFilesResult) }) });
    const result = await pipeline.call(caller, "read_files", { project: "~p1", files: [{ path: "README.md" }] }, signal);
    assert.equal(result.isError, false);
    assert.equal(records.length, 1);
    const [{ record, durable }] = records as [{ record: ActionRecordInit; durable: boolean }];
    assert.equal(durable, false, "read-only records may be batched");
    assert.equal(record.tool, "read_files");
    assert.equal(record.outcome, "success");
    assert.equal(record.failureStage, "");
    assert.equal(record.projectCanonicalId, project.canonicalId);
    assert.match(record.argumentShape?.fingerprint ?? "", /^[0-9a-f]{16}$/);
    assert.ok((record.resultSize?.canonicalBytes ?? 0) > 0);
    assert.equal(record.resultSize?.projectedBytes, Buffer.byteLength(JSON.stringify(result.structuredContent)), "sizes are of what the model saw");
    assert.deepEqual(Object.keys(record.stageDurationsUs ?? {}).sort(), ["dispatch", "normalization", "projection", "resolution"]);
    assert.doesNotMatch(
      JSON.stringify(record, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
      /README|~p1/,
    );
  });

  it("the record is captured from the canonical result: its sizes exclude the normalization and follow-up the projection adds", async () => {
    const { audit, records } = recordingAudit();
    const pending = { execution_state: "pending", job_id: "job_1", effective: { timeout_ms: 600_000, wait_ms: 10 } };
    const pipeline = pipelineWith({ audit, dispatch: () => ({ resultJson: JSON.stringify(pending) }) });
    const result = await pipeline.call(caller, "run_shell", { project: "~p1", command: "sleep 5", timeout_ms: 9_999_999, wait_ms: 10 }, signal);
    assert.equal(result.isError, false);
    assert.equal((result.structuredContent["input_normalization"] as { code: string }).code, "clamped_to_ceiling");
    assert.deepEqual(result.structuredContent["follow_up"], {
      follow_up_kind: "mechanically_followable",
      tool: "call_runtime_tool",
      arguments: { tool: "wait_for_job_terminal", arguments: { project: "~p1", job_id: "job_1" } },
    });
    const [{ record }] = records as [{ record: ActionRecordInit; durable: boolean }];
    assert.equal(record.resultSize?.canonicalBytes, Buffer.byteLength(JSON.stringify(pending)), "canonical bytes are of the result as the Runner returned it");
    assert.equal(record.resultSize?.projectedBytes, Buffer.byteLength(JSON.stringify(result.structuredContent)));
    assert.equal(record.inputNormalizationCode, "clamped_to_ceiling");
  });

  it("a catalog failure is recorded as an admission failure", async () => {
    const { audit, records } = recordingAudit();
    const catalogs: CatalogCache = { get: () => Promise.reject(new ConnectError("registry down", Code.Unavailable)) };
    const result = await pipelineWith({ audit, catalogs }).call(caller, "read_files", { project: "~p1", files: [{ path: "a" }] }, signal);
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent["reason_code"], ReasonCode.dependencyUnavailable);
    assert.equal(records.length, 1);
    assert.equal(records[0]?.record.tool, "read_files");
    assert.equal(records[0]?.record.failureStage, PipelineStage.admission);
    assert.equal(records[0]?.record.resultSize, undefined, "failures carry no result size");
    assert.match(records[0]?.record.argumentShape?.fingerprint ?? "", /^[0-9a-f]{16}$/);
    // Through call_runtime_tool: recorded under the tool it forwarded, as every other refusal.
    const wrapped = await pipelineWith({ audit, catalogs }).call(
      caller,
      "call_runtime_tool",
      { tool: "create_session", arguments: { project: "~p1" } },
      signal,
    );
    assert.equal(wrapped.structuredContent["reason_code"], ReasonCode.dependencyUnavailable);
    assert.deepEqual(
      [records[1]?.record.tool, records[1]?.record.effect, records[1]?.record.failureStage],
      ["create_session", "durable_state", PipelineStage.admission],
    );
  });

  it("call_runtime_tool rejections are recorded under the inner tool, with the inner arguments' shape", async () => {
    const { audit, records } = recordingAudit();
    const pipeline = pipelineWith({ audit });
    const refused = await pipeline.call(caller, "call_runtime_tool", { tool: "present_work_result", arguments: { title: "x" } }, signal);
    assert.equal(refused.structuredContent["reason_code"], ReasonCode.presentationToolNotCallable);
    const malformed = await pipeline.call(caller, "call_runtime_tool", { tool: 42 }, signal);
    assert.equal(malformed.isError, true);
    assert.deepEqual(
      records.map((r) => [r.record.tool, r.record.outcome, r.record.failureStage]),
      [
        ["present_work_result", "failure", PipelineStage.admission],
        ["call_runtime_tool", "failure", PipelineStage.normalization],
      ],
    );
    const innerShape = argumentShape({ title: "x" }, toolDefinitions().find((d) => d.name === "present_work_result")?.inputSchema as never);
    assert.equal(records[0]?.record.argumentShape?.fingerprint, innerShape?.fingerprint);
  });

  it("an effectful success whose record is not durable is reported as audit_not_durable, saying the change happened", async () => {
    const { audit, records } = recordingAudit(true);
    const metrics = createMetrics();
    const pipeline = pipelineWith({ audit, metrics, dispatch: () => ({ resultJson: JSON.stringify(editResult) }) });
    const args = { project: "~p1", changes: [{ kind: "create", path: "new.txt", content: "hello\n" }] };
    const result = await pipeline.call(caller, "edit_project_files", args, signal);
    assert.equal(records.length, 1);
    assert.equal(records[0]?.durable, true);
    assert.equal(records[0]?.record.outcome, "success", "the record keeps the canonical outcome");
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent["reason_code"], ReasonCode.dependencyUnavailable);
    assert.equal(result.structuredContent["detail_code"], "audit_not_durable");
    assert.equal(result.structuredContent["failure_stage"], PipelineStage.record);
    assert.equal(result.structuredContent["state_changed"], true);
    assert.equal(result.structuredContent["outcome_unknown"], false);
    assert.deepEqual(result.structuredContent["evidence"], { call_outcome: "success" });
    assert.match(metrics.render(), /webcodex_tool_call_failures_total\{reason_code="dependency_unavailable",tool="edit_project_files"\} 1/);
  });

  it("effectful failures need a durable record only when state changed or the outcome is unknown", async () => {
    const failures = [
      toolFailure(ReasonCode.staleReadRevision, PipelineStage.preflight),
      toolFailure(ReasonCode.applyFailed, PipelineStage.apply, { state_changed: true }),
      toolFailure(ReasonCode.runnerLost, PipelineStage.execution, { outcome_unknown: true }),
    ];
    const { audit, records } = recordingAudit(true);
    let next = 0;
    const pipeline = pipelineWith({ audit, dispatch: () => ({ failure: failureToWire(failures[next++] as never) }) });
    const args = { project: "~p1", changes: [{ kind: "create", path: "new.txt", content: "x" }] };
    const results = [];
    for (let i = 0; i < failures.length; i++) results.push(await pipeline.call(caller, "edit_project_files", args, signal));
    assert.deepEqual(
      records.map((r) => [r.record.reasonCode, r.record.failureStage, r.durable]),
      [
        ["stale_read_revision", "preflight", false],
        ["apply_failed", "apply", true],
        ["runner_lost", "execution", true],
      ],
    );
    assert.equal(results[0]?.structuredContent["reason_code"], "stale_read_revision", "a non-durable failure record does not change the answer");
    assert.deepEqual(
      results
        .slice(1)
        .map((r) => [
          r.structuredContent["detail_code"],
          r.structuredContent["state_changed"],
          r.structuredContent["outcome_unknown"],
          r.structuredContent["evidence"],
        ]),
      [
        ["audit_not_durable", true, false, { call_outcome: "failure", call_reason_code: "apply_failed" }],
        ["audit_not_durable", false, true, { call_outcome: "failure", call_reason_code: "runner_lost" }],
      ],
    );
  });

  it("an edit whose outcome is unknown names its call id (what the Runner's crash recovery records), with the inspection follow-up", async () => {
    const { audit } = recordingAudit();
    const seen: string[] = [];
    const pipeline = pipelineWith({
      audit,
      dispatch: (req) => {
        seen.push(req.callId);
        return { failure: failureToWire(toolFailure(ReasonCode.runnerLost, PipelineStage.execution, { outcome_unknown: true })) };
      },
    });
    const edit = await pipeline.call(caller, "edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "n.txt", content: "x" }] }, signal);
    assert.equal(edit.structuredContent["outcome_unknown"], true);
    assert.deepEqual(edit.structuredContent["evidence"], { call_id: seen[0] });
    assert.equal((edit.structuredContent["follow_up"] as Record<string, unknown>)["tool"], "call_runtime_tool");
    const run = await pipeline.call(caller, "run_process", { project: "~p1", args: ["true"] }, signal);
    assert.equal(run.structuredContent["outcome_unknown"], true);
    assert.equal(run.structuredContent["evidence"], undefined, "no write journal behind a process: no call id to look up");
  });

  it("a call needing a scope the caller lacks is refused at admission, recorded, and never dispatched", async () => {
    const { audit, records } = recordingAudit();
    let dispatched = 0;
    const pipeline = pipelineWith({
      audit,
      dispatch: () => {
        dispatched += 1;
        return { resultJson: JSON.stringify(editResult) };
      },
    });
    const reader: Caller = { ...caller, scopes: ["webcodex:read"] };
    const edit = { project: "~p1", changes: [{ kind: "create", path: "n.txt", content: "x" }] };
    const direct = await pipeline.call(reader, "edit_project_files", edit, signal);
    const forwarded = await pipeline.call(reader, "call_runtime_tool", { tool: "edit_project_files", arguments: edit }, signal);
    const read = await pipeline.call(reader, "read_files", { project: "~p1", files: [{ path: "README.md" }] }, signal);
    for (const refused of [direct, forwarded]) {
      assert.equal(refused.structuredContent["reason_code"], ReasonCode.insufficientScope);
      assert.equal(refused.structuredContent["failure_stage"], PipelineStage.admission);
    }
    assert.equal(read.isError, false, "read scope suffices for a read");
    assert.equal(dispatched, 1, "only the read was dispatched");
    assert.deepEqual(
      records.map((r) => [r.record.tool, r.record.reasonCode]),
      [
        ["edit_project_files", "insufficient_scope"],
        ["edit_project_files", "insufficient_scope"],
        ["read_files", ""],
      ],
    );
    assert.equal(
      records[0]?.record.argumentShape?.fingerprint,
      records[1]?.record.argumentShape?.fingerprint,
      "the forwarded call is recorded with the inner arguments",
    );
  });

  it("an unexpected error in a stage still produces one record and a structured failure", async () => {
    const { audit, records } = recordingAudit();
    // The fake broker's fleet answer has no runner rows: full get_runtime_status throws a TypeError mid-call.
    const result = await pipelineWith({ audit }).call(caller, "get_runtime_status", { compact: false }, signal);
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent["reason_code"], ReasonCode.internal);
    assert.equal(result.structuredContent["outcome_unknown"], false, "a read-only call changed nothing");
    assert.deepEqual(
      records.map((r) => [r.record.tool, r.record.reasonCode, r.record.failureStage, r.durable]),
      [["get_runtime_status", "internal", "dispatch", false]],
    );
  });
});

describe("discovery contract", () => {
  const readOnlyCatalog: CatalogCache = { get: async () => catalogOf(admittedTools({ admissionProfile: "read_only", hostProfile: "generic" })) };

  it("read_tool_manifest: an unknown name is unknown_tool; a known tool not admitted is tool_not_admitted", async () => {
    const pipeline = pipelineWith({ audit: recordingAudit().audit, catalogs: readOnlyCatalog });
    const unknown = await pipeline.call(caller, "read_tool_manifest", { tool: "read_file" }, signal);
    assert.deepEqual([unknown.isError, unknown.structuredContent["reason_code"]], [true, ReasonCode.unknownTool]);
    const notAdmitted = await pipeline.call(caller, "read_tool_manifest", { tool: "run_shell" }, signal);
    assert.deepEqual([notAdmitted.isError, notAdmitted.structuredContent["reason_code"]], [true, ReasonCode.toolNotAdmitted]);
    const admitted = await pipeline.call(caller, "read_tool_manifest", { tool: "read_files" }, signal);
    assert.equal(admitted.isError, false);
    assert.equal(admitted.structuredContent["tool"], "read_files");
  });

  it("call_runtime_tool refuses the gateway entry points as such, and Presentation tools as presentation", async () => {
    const pipeline = pipelineWith({ audit: recordingAudit().audit });
    for (const entry of ["read_tool_manifest", "call_runtime_tool"]) {
      const r = await pipeline.call(
        caller,
        "call_runtime_tool",
        { tool: entry, arguments: entry === "read_tool_manifest" ? { tool: "read_files" } : { tool: "list_tools", arguments: {} } },
        signal,
      );
      assert.equal(r.structuredContent["reason_code"], ReasonCode.invalidValue, entry);
      assert.equal(r.structuredContent["detail_code"], "gateway_entry_point", entry);
    }
    const presentation = await pipeline.call(caller, "call_runtime_tool", { tool: "present_goal_plan", arguments: { project: "~p1", title: "t" } }, signal);
    assert.equal(presentation.structuredContent["reason_code"], ReasonCode.presentationToolNotCallable);
    const unknown = await pipeline.call(caller, "call_runtime_tool", { tool: "read_file", arguments: {} }, signal);
    assert.equal(unknown.structuredContent["reason_code"], ReasonCode.unknownTool);
    const ok = await pipeline.call(caller, "call_runtime_tool", { tool: "list_tools", arguments: {} }, signal);
    assert.equal(ok.isError, false);
  });

  it("list_tools rejects an unknown category, and answers an admitted-but-empty one with no tools", async () => {
    const readOnly: CatalogCache = { get: async () => catalogOf(admittedTools({ admissionProfile: "read_only", hostProfile: "generic" })) };
    const pipeline = pipelineWith({ audit: recordingAudit().audit, catalogs: readOnly });
    const unknown = await pipeline.call(caller, "list_tools", { category: "filez" }, signal);
    assert.deepEqual(
      [unknown.isError, unknown.structuredContent["reason_code"], unknown.structuredContent["detail_code"]],
      [true, ReasonCode.invalidValue, "enum"],
    );
    const files = await pipeline.call(caller, "list_tools", { category: "files" }, signal);
    assert.deepEqual(Object.keys(files.structuredContent["categories"] as object), ["files"]);
    const empty = await pipeline.call(caller, "list_tools", { category: "presentation" }, signal);
    assert.deepEqual(empty.structuredContent, { categories: {} }, "no presentation tool is admitted for a read-only caller on a generic Host");
  });

  it("a caller whose token names a Host profile is admitted against that profile's catalog", async () => {
    const asked: string[] = [];
    const catalogs: CatalogCache = {
      get: async (who, host) => {
        asked.push(`${who.admissionProfile}/${host}`);
        return catalogOf(admittedTools({ admissionProfile: who.admissionProfile, hostProfile: host }));
      },
    };
    const pipeline = pipelineWith({ audit: recordingAudit().audit, catalogs });
    const status = await pipeline.call({ ...caller, hostProfile: "app" }, "get_runtime_status", {}, signal);
    await pipeline.call(caller, "list_tools", {}, signal);
    assert.deepEqual(asked, ["full/app", "full/generic"], "the token's profile, else the gateway's");
    assert.equal(status.structuredContent["host_profile"], "app");
  });

  it("list_projects reports each Project's runner_state from one broker call, and unknown when the broker cannot answer", async () => {
    const projects: ProjectEntry[] = [
      { projectRef: "~p1", project: { canonicalId: "agent:acme:demo", rootIdentity: "root-1", name: "demo" } },
      { projectRef: "~p2", project: { canonicalId: "agent:acme:idle", rootIdentity: "root-2", name: "idle" } },
    ];
    const asked: unknown[] = [];
    const pipeline = pipelineWith({
      mode: "distributed",
      audit: recordingAudit().audit,
      projects,
      runnerStates: (req) => {
        asked.push(req.projects);
        return { "agent:acme:demo": "ready", "agent:acme:idle": "none" };
      },
    });
    const listed = await pipeline.call(caller, "list_projects", {}, signal);
    assert.deepEqual(listed.structuredContent, {
      projects: [
        { project_ref: "~p1", project_id: "agent:acme:demo", name: "demo", runner_state: "ready" },
        { project_ref: "~p2", project_id: "agent:acme:idle", name: "idle", runner_state: "none" },
      ],
    });
    assert.deepEqual(
      asked,
      [
        [
          { projectCanonicalId: "agent:acme:demo", rootIdentity: "root-1" },
          { projectCanonicalId: "agent:acme:idle", rootIdentity: "root-2" },
        ],
      ],
      "one call for all Projects",
    );
    const down = pipelineWith({
      audit: recordingAudit().audit,
      projects,
      runnerStates: () => {
        throw new ConnectError("broker down", Code.Unavailable);
      },
    });
    const degraded = await down.call(caller, "list_projects", {}, signal);
    assert.equal(degraded.isError, false);
    assert.deepEqual(
      (degraded.structuredContent["projects"] as Array<Record<string, unknown>>).map((p) => p["runner_state"]),
      ["unknown", "unknown"],
    );
    // Embedded mode lists only the projects a Runner of this process is known for (so none
    // other counts as omitted either); when the broker cannot say, nothing is left out.
    const listRequests: unknown[] = [];
    const embedded = pipelineWith({
      mode: "embedded",
      audit: recordingAudit().audit,
      projects,
      fleet: ["agent:acme:demo", "agent:acme:demo"],
      listRequests,
      runnerStates: () => ({ "agent:acme:demo": "ready" }),
    });
    assert.deepEqual((await embedded.call(caller, "list_projects", { name: "de", limit: 5 }, signal)).structuredContent, {
      projects: [{ project_ref: "~p1", project_id: "agent:acme:demo", name: "demo", runner_state: "ready" }],
    });
    assert.deepEqual(
      listRequests.map((r) => {
        const { name, limit, cursor, onlyCanonicalIds, restrictToOnly } = r as Record<string, unknown>;
        return { name, limit, cursor, onlyCanonicalIds, restrictToOnly };
      }),
      [{ name: "de", limit: 5, cursor: "", onlyCanonicalIds: ["agent:acme:demo"], restrictToOnly: true }],
      "the filter, page size and served set go to the ref-resolver",
    );
    const embeddedDown = pipelineWith({
      mode: "embedded",
      audit: recordingAudit().audit,
      projects,
      fleet: "down",
      runnerStates: () => {
        throw new ConnectError("broker down", Code.Unavailable);
      },
    });
    assert.equal(((await embeddedDown.call(caller, "list_projects", {}, signal)).structuredContent["projects"] as unknown[]).length, 2);
  });
});

describe("run_process → run_shell rewrite", () => {
  const completed = {
    execution_state: "completed",
    job_id: "j",
    state: "completed",
    exit_code: 0,
    signal: null,
    timed_out: false,
    stdout: "ok\n",
    stderr: "",
    truncated: false,
    duration_ms: 1,
    started_at: "t",
  };

  it("sends the literal run_process as the fallback; when the broker ran it, run_process is recorded and no rewrite code is reported", async () => {
    const { audit, records } = recordingAudit();
    const seen: DispatchRequest[] = [];
    const pipeline = pipelineWith({
      audit,
      dispatch: (req) => {
        seen.push(req);
        return { resultJson: JSON.stringify(completed), answeredFallback: true };
      },
    });
    const result = await pipeline.call(caller, "run_process", { project: "~p1", args: ["bash", "-lc", "make"] }, signal);
    assert.deepEqual([seen[0]?.tool, JSON.parse(seen[0]?.argumentsJson ?? "{}")], ["run_shell", { command: "make", shell: "bash", login: true }]);
    assert.deepEqual(
      [seen[0]?.fallback?.tool, JSON.parse(seen[0]?.fallback?.argumentsJson ?? "{}")],
      ["run_process", { args: ["bash", "-lc", "make"] }],
      "project and session_id stay with the gateway",
    );
    assert.equal(result.isError, false);
    assert.ok(!("input_normalization" in result.structuredContent), "no process_bash_login_to_run_shell for a call that ran as run_process");
    assert.equal(result.structuredContent["job_id"], "j", "projected as run_process (no run_shell compaction)");
    assert.deepEqual([records[0]?.record.tool, records[0]?.record.inputNormalizationCode], ["run_process", ""]);
  });

  it("a literal call that ran keeps its own normalization (argv_to_args); a rewrite that ran reports the rewrite code", async () => {
    const literalRan = pipelineWith({ audit: recordingAudit().audit, dispatch: () => ({ resultJson: JSON.stringify(completed), answeredFallback: true }) });
    const aliased = await literalRan.call(caller, "run_process", { project: "~p1", argv: ["sh", "-c", "ls"] }, signal);
    assert.equal((aliased.structuredContent["input_normalization"] as { code: string }).code, "argv_to_args");
    const { audit, records } = recordingAudit();
    const rewriteRan = pipelineWith({ audit, dispatch: () => ({ resultJson: JSON.stringify(completed), answeredFallback: false }) });
    const shell = await rewriteRan.call(caller, "run_process", { project: "~p1", args: ["bash", "-lc", "make"] }, signal);
    assert.equal((shell.structuredContent["input_normalization"] as { code: string }).code, "process_bash_login_to_run_shell");
    assert.deepEqual([records[0]?.record.tool, records[0]?.record.inputNormalizationCode], ["run_shell", "process_bash_login_to_run_shell"]);
  });
});

describe("failure follow-ups, table-driven over every reason code", () => {
  const listed = new Set(listedTools(admittedTools({ admissionProfile: "full", hostProfile: "generic" })).map((d) => d.name));
  for (const [code, row] of Object.entries(reasonCodeTable)) {
    const details = [undefined, ...Object.keys(row.detail_follow_ups ?? {})];
    for (const detail of details) {
      it(`${code}${detail ? ` (${detail})` : ""}: ${failureFollowUpBuilder(code as ReasonCode, detail) ?? "no follow-up, as the table records"}`, async () => {
        const { audit } = recordingAudit();
        const failure = toolFailure(code as ReasonCode, row.stages[0] as PipelineStage, {
          ...(detail ? { detail_code: detail } : {}),
          outcome_unknown: true,
          evidence: { path: "src/a.ts", task_id: "wc_task_0123456789abcdef0123456789abcdef", server: "tracker", tool: "search_issues" },
        });
        const builder = failureFollowUpBuilder(code as ReasonCode, detail);
        // A cursor failure comes from a paged listing: its restart is that listing's first page.
        const listing = builder === "restartListFollowUp";
        const pipeline = pipelineWith({
          audit,
          dispatch: () => ({ failure: failureToWire(failure) }),
          ...(listing ? { listFailure: failureToWire(failure) } : {}),
        });
        const result = listing
          ? await pipeline.call(caller, "list_projects", { cursor: "c1.x" }, signal)
          : await pipeline.call(caller, "edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "src/a.ts", content: "x" }] }, signal);
        assert.equal(result.isError, true);
        assert.equal(result.structuredContent["reason_code"], code);
        const followUp = result.structuredContent["follow_up"] as FollowUp | undefined;
        if (builder === undefined) {
          assert.equal(followUp, undefined, "no follow-up where the table records none");
          assert.ok((row.no_follow_up ?? "").length > 0);
          return;
        }
        assert.ok(followUp, `${builder} is attached`);
        assert.ok(listed.has(followUp.tool), `${followUp.tool} is callable by name from tools/list`);
        const target = followUpTarget(followUp);
        assert.equal(validateToolArguments(target.tool, target.arguments), undefined, "its arguments validate unchanged");
        if ("project" in target.arguments) assert.equal(target.arguments["project"], "~p1", "the caller's own selector");
      });
    }
  }
});

describe("a broker that did not answer: outcome_unknown is false only when the request provably never left", () => {
  const shell = { project: "~p1", command: "touch x" };
  it("a refused connection (real Connect transport to a closed port) proves nothing ran", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const broker = createClient(RunnerBrokerService, createServiceTransport(`http://127.0.0.1:${port}`));
    const result = await pipelineWith({ audit: recordingAudit().audit, broker }).call(caller, "run_shell", shell, signal);
    assert.deepEqual(
      [result.isError, result.structuredContent["reason_code"], result.structuredContent["outcome_unknown"]],
      [true, "dependency_unavailable", false],
    );
    assert.equal(result.structuredContent["follow_up"], undefined, "nothing ran: the same call is the repair");
  });
  for (const code of [Code.Unavailable, Code.Unimplemented]) {
    it(`${Code[code]} after the request may have been sent leaves the effect unknown, with the inspection follow-up`, async () => {
      const pipeline = pipelineWith({
        audit: recordingAudit().audit,
        dispatch: () => {
          throw new ConnectError("stream reset", code);
        },
      });
      const result = await pipeline.call(caller, "run_shell", shell, signal);
      assert.deepEqual([result.isError, result.structuredContent["outcome_unknown"]], [true, true]);
      assert.doesNotMatch(String(result.structuredContent["message"]), /nothing was run/);
      assert.equal(followUpTarget(result.structuredContent["follow_up"] as FollowUp).tool, "read_workspace_changes");
    });
  }
  it("a read-only call that was cut still says nothing changed", async () => {
    const pipeline = pipelineWith({
      audit: recordingAudit().audit,
      dispatch: () => {
        throw new ConnectError("stream reset", Code.Unavailable);
      },
    });
    const result = await pipeline.call(caller, "read_files", { project: "~p1", files: [{ path: "a" }] }, signal);
    assert.equal(result.structuredContent["outcome_unknown"], false);
  });
});

describe("passive job_attention", () => {
  const ended = { jobs: [{ job_id: "job_9", state: "completed", exit_code: 0, stdout_tail: "x" }] };
  const setup = () => {
    const asked: string[] = [];
    const pipeline = pipelineWith({
      audit: recordingAudit().audit,
      dispatch: (req) => {
        asked.push(req.tool);
        if (req.tool === "run_detached_process") return { resultJson: JSON.stringify({ execution_state: "running", job_id: "job_9", started_at: "t" }) };
        if (req.tool === "observe_jobs") return { resultJson: JSON.stringify(ended) };
        return { resultJson: JSON.stringify(readFilesResult) };
      },
    });
    const read = () => pipeline.call(caller, "read_files", { project: "~p1", files: [{ path: "README.md" }] }, signal);
    return { pipeline, asked, read };
  };

  it("an ended detached Job is reported once, on the first result after it ended, once that result was delivered", async () => {
    const { pipeline, asked, read } = setup();
    assert.equal((await read()).structuredContent["job_attention"], undefined, "nothing watched: no attention, no extra call");
    assert.deepEqual(asked, ["read_files"]);
    await pipeline.call(caller, "run_detached_process", { project: "~p1", args: ["sleep", "1"] }, signal);
    const first = await read();
    assert.deepEqual(first.structuredContent["job_attention"], { items: [{ job_id: "job_9", state: "completed", exit_code: 0 }] });
    first.delivered?.();
    const second = await read();
    assert.equal(second.structuredContent["job_attention"], undefined, "not again");
    assert.deepEqual(asked.filter((t) => t === "observe_jobs").length, 1, "nothing left to watch: no further observation");
  });

  it("a result that was not delivered does not count: the next result carries the item again", async () => {
    const { pipeline, read } = setup();
    await pipeline.call(caller, "run_detached_process", { project: "~p1", args: ["sleep", "1"] }, signal);
    assert.ok((await read()).structuredContent["job_attention"]);
    const again = await read();
    assert.ok(again.structuredContent["job_attention"], "the undelivered item is repeated");
  });

  it("a Job the caller waited for itself is not reported again, and another caller is never told", async () => {
    const { pipeline, read } = setup();
    await pipeline.call(caller, "run_detached_process", { project: "~p1", args: ["sleep", "1"] }, signal);
    const other = await pipeline.call(
      { ...caller, principal: { clientId: "acme", subject: "bob" } },
      "read_files",
      { project: "~p1", files: [{ path: "README.md" }] },
      signal,
    );
    assert.equal(other.structuredContent["job_attention"], undefined);
    await pipeline.call(caller, "observe_jobs", { project: "~p1", job_ids: ["job_9"] }, signal);
    assert.equal((await read()).structuredContent["job_attention"], undefined);
  });
});
