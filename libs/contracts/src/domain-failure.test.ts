import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DomainFailureSchema } from "@webcodex/proto";
import { failureFromWire, failureToWire } from "./domain-failure.js";
import { reasonCodeFromString, toolFailure } from "./failure.js";
import { pipelineStageFromString } from "./pipeline.js";

test("a failure crosses the wire and back unchanged", () => {
  const failure = toolFailure("stale_read_revision", "preflight", {
    detail_code: "changed",
    state_changed: false,
    evidence: { path: "a.ts" },
    message: "Re-read a.ts.",
  });
  assert.deepEqual(failureFromWire(create(DomainFailureSchema, failureToWire(failure))), failure);
});

test("reason codes and stages parse back only when this build knows them", () => {
  assert.equal(reasonCodeFromString("stale_ref"), "stale_ref");
  assert.equal(reasonCodeFromString("staleRef"), undefined);
  assert.equal(pipelineStageFromString("normalization"), "normalization");
  assert.equal(pipelineStageFromString("normalize"), undefined);
});

test("an unknown reason code from a newer peer reads as internal, keeping the wire codes as evidence", () => {
  const wire = create(DomainFailureSchema, {
    reasonCode: "brand_new_reason",
    failureStage: "dispatch",
    detailCode: "x",
    evidenceJson: JSON.stringify({ evidence: { path: "a.ts" } }),
  });
  const failure = failureFromWire(wire);
  assert.equal(failure.reason_code, "internal");
  assert.equal(failure.failure_stage, "dispatch");
  assert.equal(failure.detail_code, "x");
  assert.deepEqual(failure.evidence, { path: "a.ts", wire_reason_code: "brand_new_reason", wire_failure_stage: "dispatch" });
});
