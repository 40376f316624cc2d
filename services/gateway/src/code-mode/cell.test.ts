import { test } from "node:test";
import assert from "node:assert/strict";
import { CODE_CELL_TOOL, toolDefinition, toolLimit } from "@webcodex/contracts";
import { projectForModel } from "../model-projection.js";
import { cellText } from "./cell.js";

const def = toolDefinition(CODE_CELL_TOOL);
const success = (result: Record<string, unknown>) => projectForModel(def, { ok: true, result }, undefined, { project: "~p1", code: "" });

test("a cell's text content is its text output alone, not a copy of the structured result", () => {
  const result = { text: "src/a.ts:3\ncallers: src/b.ts\n", truncated: false, child_calls: 3, elapsed_ms: 12 };
  const projected = success(result);
  assert.equal(projected.text, "src/a.ts:3\ncallers: src/b.ts\n");
  assert.deepEqual(projected.structuredContent, result, "structuredContent stays the canonical result");
  assert.equal(success({ text: "", truncated: false, child_calls: 0, elapsed_ms: 1 }).text, "");
});

test("a cut text says so, and the ended Jobs a cell forwards reach the text too", () => {
  const attention = { items: [{ job_id: "j1", state: "exited", exit_code: 0 }] };
  const text = cellText({ text: "partial li", truncated: true, child_calls: 1, elapsed_ms: 5, job_attention: attention });
  assert.equal(
    text,
    `partial li\n[text truncated at ${toolLimit(CODE_CELL_TOOL, "text_bytes")} bytes]\njob_attention: {"items":[{"job_id":"j1","state":"exited","exit_code":0}]}\n`,
  );
  assert.equal(cellText({ text: "done\n", truncated: false, job_attention: attention }), `done\njob_attention: ${JSON.stringify(attention)}\n`);
});

test("a failed cell's text is still the JSON of its structured failure", () => {
  const failure = { reason_code: "execution_failed", failure_stage: "execution", state_changed: false, outcome_unknown: false };
  const projected = projectForModel(def, { ok: false, failure: failure as never }, undefined, {});
  assert.equal(projected.text, undefined);
  assert.equal(projected.isError, true);
});
