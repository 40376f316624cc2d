import { test } from "node:test";
import assert from "node:assert/strict";
import { ReasonCode } from "./failure.js";
import { PipelineStage } from "./pipeline.js";
import { followUpBuilders } from "./follow-up.js";
import { failureFollowUpBuilder, reasonCodeTable } from "./reason-codes.js";

test("every reason code has exactly one row, and every row is a reason code", () => {
  assert.deepEqual(Object.keys(reasonCodeTable).sort(), Object.values(ReasonCode).sort());
});

test("each reason code carries a registered follow-up or records why it has none", () => {
  const stages = new Set<string>(Object.values(PipelineStage));
  for (const [code, row] of Object.entries(reasonCodeTable)) {
    assert.ok(row.stages.length > 0 && row.stages.every((s) => stages.has(s)), `${code}: known stages`);
    assert.ok(row.meaning.length > 0, `${code}: a meaning`);
    const builders = [row.follow_up, ...Object.values(row.detail_follow_ups ?? {})].filter((b) => b !== undefined);
    for (const b of builders) assert.ok(b in followUpBuilders, `${code}: ${b} is a registered builder`);
    if (row.follow_up === undefined) assert.ok((row.no_follow_up ?? "").length > 0, `${code}: no follow-up, so the row records why`);
    if (row.detail_follow_ups !== undefined && row.follow_up === undefined) assert.ok((row.no_follow_up ?? "").length > 0, `${code}: other details record why`);
  }
});

test("the known repairs: unknown or stale project → list_projects; closed or unknown session → create_session", () => {
  assert.equal(failureFollowUpBuilder(ReasonCode.projectNotFound), "listProjectsFollowUp");
  assert.equal(failureFollowUpBuilder(ReasonCode.staleRef), "listProjectsFollowUp");
  assert.equal(failureFollowUpBuilder(ReasonCode.invalidValue, "session_closed"), "createSessionFollowUp");
  assert.equal(failureFollowUpBuilder(ReasonCode.invalidValue, "session_not_found"), "createSessionFollowUp");
  assert.equal(failureFollowUpBuilder(ReasonCode.invalidValue, "invalid_session_selector"), undefined);
  assert.equal(followUpBuilders.createSessionFollowUp.build("~p1").follow_up_kind, "fallback_recovery");
});
