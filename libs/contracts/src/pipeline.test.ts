import { test } from "node:test";
import assert from "node:assert/strict";
import { reasonCodeTable } from "./reason-codes.js";
import {
  CallOutcome,
  callOutcomeFromString,
  callOutcomeOrUnknown,
  PipelineStage,
  PipelineSubStage,
  pipelineStageFromString,
  stageTimingKeyFromString,
} from "./pipeline.js";

test("a call outcome parses back only in the one spelling", () => {
  for (const outcome of ["success", "failure", "pending", "unknown"]) assert.equal(callOutcomeFromString(outcome), outcome);
  assert.deepEqual(Object.values(CallOutcome), ["success", "failure", "pending", "unknown"]);
  // The Session-only and the Attempt spellings are not call outcomes.
  for (const other of ["ok", "failed", "succeeded", "error", "Success", ""]) assert.equal(callOutcomeFromString(other), undefined, other);
});

test("an outcome read for display keeps the four words and reads any other as unknown", () => {
  for (const outcome of Object.values(CallOutcome)) assert.equal(callOutcomeOrUnknown(outcome), outcome);
  for (const other of ["ok", "failed", "succeeded", "error", "Success", ""]) assert.equal(callOutcomeOrUnknown(other), CallOutcome.unknown, other);
});

test("stage timings are keyed by pipeline stages and their named sub-stages only", () => {
  for (const stage of Object.values(PipelineStage)) assert.equal(stageTimingKeyFromString(stage), stage);
  assert.deepEqual(Object.values(PipelineSubStage).sort(), ["authorization.attempt", "record.session", "resolution.session"]);
  for (const sub of Object.values(PipelineSubStage)) {
    assert.equal(stageTimingKeyFromString(sub), sub);
    assert.ok(pipelineStageFromString(sub.split(".")[0] ?? "") !== undefined, `${sub} is named under a stage`);
    assert.equal(pipelineStageFromString(sub), undefined, "a sub-stage is no failure stage");
  }
  // The timing names of old are not stage names.
  for (const old of ["normalize", "resolve", "project", "admit_attempt", "resolve_session", "record_session", "resolution.other"])
    assert.equal(stageTimingKeyFromString(old), undefined, old);
});

test("every stage a reason code is decided at is a pipeline stage; projection decides none", () => {
  const decided = new Set(Object.values(reasonCodeTable).flatMap((row) => row.stages));
  for (const stage of decided) assert.equal(pipelineStageFromString(stage), stage);
  assert.ok(!decided.has(PipelineStage.projection));
});
