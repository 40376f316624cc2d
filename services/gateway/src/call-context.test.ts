import { test } from "node:test";
import assert from "node:assert/strict";
import { PipelineStage, PipelineSubStage } from "@webcodex/contracts";
import type { StageTimings } from "@webcodex/contracts";
import { now, subStageDone, timedStage } from "./call-context.js";

test("a timed stage is stored under its PipelineStage name, a timed part under its sub-stage key", async () => {
  const stages: StageTimings = {};
  assert.equal(await timedStage(stages, PipelineStage.normalization, () => 7), 7);
  await assert.rejects(
    timedStage(stages, PipelineStage.dispatch, () => Promise.reject(new Error("lost"))),
    /lost/,
  );
  subStageDone(stages, PipelineSubStage.sessionResolution, now());
  assert.deepEqual(Object.keys(stages).sort(), ["dispatch", "normalization", "resolution.session"], "a failed stage is timed too");
  assert.ok(Object.values(stages).every((us) => Number.isInteger(us) && us >= 0));
});

test("only the closed vocabulary compiles as a stage name", () => {
  const stages: StageTimings = {};
  const typeOnly = () => {
    // @ts-expect-error a timing name of old is not a PipelineStage
    void timedStage(stages, "normalize", () => 0);
    // @ts-expect-error a sub-stage is timed with subStageDone, never as a stage (it has no span)
    void timedStage(stages, PipelineSubStage.sessionRecord, () => 0);
    // @ts-expect-error an ad-hoc sub-stage key does not compile
    subStageDone(stages, "resolve_session", 0);
  };
  assert.equal(typeof typeOnly, "function");
});
