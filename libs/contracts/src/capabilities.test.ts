import { test } from "node:test";
import assert from "node:assert/strict";
import { RunnerCapabilities, runnerCapabilityByWire, runnerCapabilityCatalog } from "./capabilities.js";
import type { RunnerCapabilityId } from "./capabilities.js";
import { toolDefinitions } from "./catalog.js";
import { sampleToolArgs } from "./sample-args.js";

const catalog = runnerCapabilityCatalog;

test("capability ids and wire names are unique", () => {
  assert.equal(new Set(catalog.map((r) => r.wire)).size, catalog.length);
  assert.equal(new Set(catalog.map((r) => r.id)).size, catalog.length);
  for (const row of catalog) assert.match(row.wire, /^[a-z][a-z0-9_]*$/, row.wire);
});

test("every capability defaults to false: absent from the wire means unsupported", () => {
  for (const row of catalog) assert.equal(row.default, false, row.wire);
  const none = RunnerCapabilities.fromWire([]);
  for (const row of catalog) assert.equal(none.has(row.id), row.default, row.wire);
});

test("the frozen V2 baseline is exactly read, search and single edits; bulk edits are outside it", () => {
  assert.deepEqual(
    catalog.filter((r) => r.baselineV2).map((r) => r.wire),
    ["read_files_v1", "search_texts_v1", "apply_text_edit_v1"],
  );
  assert.equal(runnerCapabilityByWire("apply_text_edit_expected_match_count")?.baselineV2, false);
});

test("wire serialization follows declaration order and ignores names from newer Runners", () => {
  const set = RunnerCapabilities.fromWire(["fenced_execution_v1", "read_files_v1", "from_the_future_v9"]);
  assert.deepEqual(set.toWire(), ["read_files_v1", "fenced_execution_v1"]);
  assert.deepEqual(set.missingBaseline(), ["searchTexts", "applyTextEdit"]);
  assert.equal(runnerCapabilityByWire("from_the_future_v9"), undefined);
});

test("every capability a tool can require is declared in the catalog", () => {
  const ids = new Set<string>(catalog.map((r) => r.id));
  const variants: Record<string, Record<string, unknown>> = {
    run_shell: { login: true },
    edit_project_files: { changes: [{ kind: "edit", edits: [{ expected_match_count: 2 }] }] },
  };
  const required = new Set<RunnerCapabilityId>();
  for (const def of toolDefinitions()) {
    if (def.requiredCapabilities === undefined) continue;
    const args = sampleToolArgs(def.name);
    for (const a of [args, { ...args, ...variants[def.name] }]) for (const id of def.requiredCapabilities(a)) required.add(id);
  }
  for (const id of required) assert.ok(ids.has(id), id);
  assert.ok(required.has("applyTextEditExpectedMatchCount"), "a bulk edit requires the bulk-edit capability");
});
