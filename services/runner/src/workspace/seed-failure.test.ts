import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import { seedFailureFromStderr, seedFailureLine } from "./seed-failure.js";

describe("a local Runner's seed failure line", () => {
  const refused = toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, { detail_code: "clone_target_not_allowed", message: "local address" });

  it("carries the clone's reason, detail code and message to the broker, among other stderr lines", () => {
    const line = seedFailureLine(refused);
    assert.ok(line.endsWith("\n") && !line.slice(0, -1).includes("\n"));
    const got = seedFailureFromStderr(['{"level":"error","msg":"workspace clone failed"}', line.trimEnd(), "exiting"]);
    assert.deepEqual([got?.reason_code, got?.detail_code, got?.message], [ReasonCode.invalidValue, "clone_target_not_allowed", "local address"]);
    const auth = seedFailureFromStderr([
      seedFailureLine(toolFailure(ReasonCode.cloneFailed, PipelineStage.execution, { detail_code: "authentication_failed" })).trimEnd(),
    ]);
    assert.equal(auth?.detail_code, "authentication_failed");
  });

  it("the last line counts; no line, a garbled one or another kind of failure gives nothing (the exit is the answer)", () => {
    const first = seedFailureLine(toolFailure(ReasonCode.cloneFailed, PipelineStage.execution, { detail_code: "clone_failed" })).trimEnd();
    assert.equal(seedFailureFromStderr([first, seedFailureLine(refused).trimEnd()])?.detail_code, "clone_target_not_allowed");
    assert.equal(seedFailureFromStderr([]), undefined);
    assert.equal(seedFailureFromStderr(["plain crash"]), undefined);
    assert.equal(seedFailureFromStderr(["webcodex-runner-seed-failed {not json"]), undefined);
    const other = toolFailure(ReasonCode.runnerUnavailable, PipelineStage.execution, { detail_code: "something_else" });
    assert.equal(seedFailureFromStderr([seedFailureLine(other).trimEnd()]), undefined);
  });
});
