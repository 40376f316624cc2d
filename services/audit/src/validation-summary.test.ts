import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ValidationSummarySchema } from "@webcodex/proto";
import { validationSummary } from "./audit.js";

test("a validation summary keeps a known status, short provider names and counts; anything else is dropped", () => {
  const v = create(ValidationSummarySchema, {
    status: "failed",
    providers: ["node", "go", "node", "src/secret.ts", "x".repeat(40)],
    testsPassed: 3,
    testsFailed: 1,
    testsSkipped: 0,
    errors: 2,
    warnings: -4,
  });
  assert.deepEqual(validationSummary(v), {
    status: "failed",
    providers: ["go", "node"],
    tests: { passed: 3, failed: 1, skipped: 0 },
    diagnostics: { errors: 2, warnings: 0 },
  });
  // A status outside the four (prose, output) means no summary at all.
  assert.equal(validationSummary(create(ValidationSummarySchema, { status: "src/a.ts(1,1): error TS2322" })), undefined);
  assert.equal(validationSummary(undefined), undefined);
});
