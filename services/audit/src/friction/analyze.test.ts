import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { analyzeFriction, FrictionPattern } from "./analyze.js";
import type { FrictionCatalog, FrictionRecord } from "./analyze.js";
import { actionSummary } from "../audit.js";

const catalog: FrictionCatalog = {
  isContractDiscovery: (t) => t === "list_tools" || t === "read_tool_manifest",
  isObservation: (t) => t === "read_files" || t === "list_project_files",
  contractBytes: (t) => ({ run_shell: 1200, read_files: 1000, edit_project_files: 3000 })[t],
};

let clock = 0;
let seq = 0;
function rec(tool: string, over: Partial<FrictionRecord> = {}): FrictionRecord {
  clock += 1000;
  seq += 1;
  return {
    callId: `c${String(seq).padStart(3, "0")}`,
    clientId: "acme",
    subject: "alice",
    sessionId: "",
    tool,
    projectCanonicalId: "agent:acme:p",
    effect: "read_only",
    outcome: "success",
    reasonCode: "",
    failureStage: "",
    startedAtMs: clock,
    shapeFingerprint: `${tool}-shape`,
    shapeLeaves: [`${tool}-a`, `${tool}-b`],
    ...over,
  };
}
const fail = (reasonCode: string, failureStage: string): Partial<FrictionRecord> => ({ outcome: "failure", reasonCode, failureStage });
const patterns = (records: FrictionRecord[]) => analyzeFriction(records, catalog).findings.map((f) => [f.pattern, f.tool, f.callIds.length] as const);

describe("friction analysis", () => {
  it("a schema rejection fixed by one renamed field is reported; a rewrite of several fields is not", () => {
    const rejected = rec("run_shell", { ...fail("unknown_field", "normalization"), shapeLeaves: ["cmd", "project", "workdir"], shapeFingerprint: "x1" });
    const fixed = rec("run_shell", { shapeLeaves: ["cmd", "project", "cwd"], shapeFingerprint: "x2" });
    const rejected2 = rec("run_shell", { ...fail("unknown_field", "normalization"), shapeLeaves: ["cmd", "project", "workdir"], shapeFingerprint: "x1" });
    const rewritten = rec("run_shell", { shapeLeaves: ["cmd", "cwd", "env", "timeout"], shapeFingerprint: "x3" });
    const report = analyzeFriction([rejected, fixed, rejected2, rewritten], catalog);
    assert.deepEqual(
      report.findings.map((f) => [f.pattern, f.callIds, f.detail["correction"]]),
      [[FrictionPattern.schemaRejectionCorrected, [rejected.callId, fixed.callId], "field_renamed_or_retyped"]],
    );
  });

  it("a rejection followed by another tool, or by a call that is rejected again, is not a correction", () => {
    assert.deepEqual(patterns([rec("run_shell", fail("invalid_value", "normalization")), rec("run_process")]), []);
    assert.deepEqual(patterns([rec("run_shell", fail("invalid_value", "normalization")), rec("run_shell", fail("invalid_value", "normalization"))]), []);
  });

  it("failure → re-read → identical retry is one finding, counting chained iterations", () => {
    const f1 = rec("edit_project_files", fail("stale_read_revision", "preflight"));
    const r1 = rec("read_files", { shapeFingerprint: "read-a" });
    const f2 = rec("edit_project_files", fail("stale_read_revision", "preflight"));
    const r2 = rec("read_files", { shapeFingerprint: "read-b" });
    const ok = rec("edit_project_files");
    const [finding, ...rest] = analyzeFriction([f1, r1, f2, r2, ok], catalog).findings;
    assert.deepEqual(rest, []);
    assert.equal(finding?.pattern, FrictionPattern.failureRereadRetry);
    assert.deepEqual(
      finding?.callIds,
      [f1, r1, f2, r2, ok].map((r) => r.callId),
    );
    assert.equal(finding?.detail["iterations"], 2);
    assert.equal(finding?.detail["final_outcome"], "success");
  });

  it("a failure followed by a read and a different call is not a retry loop", () => {
    assert.deepEqual(
      patterns([rec("edit_project_files", fail("match_not_found", "preflight")), rec("read_files"), rec("edit_project_files", { shapeFingerprint: "other" })]),
      [],
    );
    assert.deepEqual(patterns([rec("edit_project_files", fail("match_not_found", "preflight")), rec("edit_project_files")]), []);
  });

  it("discovery much larger than the selected contract is reported; a manifest of about its size is not", () => {
    const big = rec("list_tools", { resultProjectedBytes: 8000 });
    const selected = rec("run_shell");
    const manifest = rec("read_tool_manifest", { resultProjectedBytes: 1300 });
    const selected2 = rec("read_files", { shapeFingerprint: "r2" });
    const report = analyzeFriction([big, selected, manifest, selected2], catalog);
    assert.deepEqual(
      report.findings.map((f) => [f.pattern, f.tool, f.detail["selected_tool"], f.detail["contract_bytes"]]),
      [[FrictionPattern.discoveryOversized, "list_tools", "run_shell", 1200]],
    );
  });

  it("a projection that is mostly metadata is reported; a content-heavy one is not", () => {
    assert.deepEqual(patterns([rec("list_project_files", { resultProjectedBytes: 900, resultMetadataBytes: 600 })]), [
      [FrictionPattern.metadataDominated, "list_project_files", 1],
    ]);
    assert.deepEqual(patterns([rec("read_files", { resultProjectedBytes: 9000, resultMetadataBytes: 300 })]), []);
    assert.deepEqual(patterns([rec("read_files", { resultProjectedBytes: 100, resultMetadataBytes: 90 })]), [], "too small to matter");
  });

  it("a sequence repeated three times back to back is reported once; twice is not; a failure breaks it", () => {
    const three = [0, 1, 2].flatMap(() => [rec("run_shell"), rec("read_files")]);
    const report = analyzeFriction(three, catalog);
    assert.deepEqual(
      report.findings.map((f) => [f.pattern, f.detail["sequence"], f.detail["repeats"], f.callIds.length]),
      [[FrictionPattern.repeatedSequence, ["run_shell", "read_files"], 3, 6]],
    );
    assert.deepEqual(patterns([0, 1].flatMap(() => [rec("run_shell"), rec("read_files")])), []);
    assert.deepEqual(patterns([rec("run_shell"), rec("run_shell", fail("execution_failed", "execution")), rec("run_shell")]), []);
  });

  it("streams are per caller: interleaved callers do not form patterns together", () => {
    const a = rec("run_shell", { ...fail("unknown_field", "normalization"), shapeLeaves: ["a"], shapeFingerprint: "1" });
    const b = rec("run_shell", { subject: "bob", shapeLeaves: ["b"], shapeFingerprint: "2" });
    assert.deepEqual(patterns([a, b]), []);
  });

  it("summarizes per tenant and tool", () => {
    const records = [
      rec("list_project_files", { resultProjectedBytes: 900, resultMetadataBytes: 600 }),
      rec("list_project_files", { clientId: "globex", resultProjectedBytes: 900, resultMetadataBytes: 600 }),
      rec("list_project_files", { resultProjectedBytes: 900, resultMetadataBytes: 600, shapeFingerprint: "other" }),
    ];
    assert.deepEqual(
      analyzeFriction(records, catalog).summary.map((r) => [r.clientId, r.tool, r.pattern, r.count]),
      [
        ["acme", "list_project_files", FrictionPattern.metadataDominated, 2],
        ["globex", "list_project_files", FrictionPattern.metadataDominated, 1],
      ],
    );
  });
});

describe("summary.model_ergonomics", () => {
  it("keeps a known code of a success only", () => {
    assert.deepEqual(actionSummary("success", "argv_to_args"), { model_ergonomics: { version: 13, input_normalization_code: "argv_to_args" } });
    assert.deepEqual(actionSummary("failure", "argv_to_args"), { model_ergonomics: { version: 13 } });
    assert.deepEqual(actionSummary("success", "python3_alias"), { model_ergonomics: { version: 13 } });
    assert.deepEqual(actionSummary("success", ""), { model_ergonomics: { version: 13 } });
  });
});
