import assert from "node:assert/strict";
import { test } from "node:test";
import { compactEdit } from "./compaction.js";
import { repeatedFacts } from "./repeated-facts.js";

test("a list beside a list of objects holding the same values is a repeated fact; the sparse edit result has none", () => {
  const canonicalEdit = {
    dry_run: false,
    execution_state: "completed",
    changed: true,
    paths: ["src/a.ts"],
    applied_count: 1,
    change_summary: { files_changed: 1, edits_applied: 1, replacements: 1, created: 0, deleted: 0, moved: 0 },
    files: [{ path: "src/a.ts", kind: "edit", changed: true, read_revision: "r_0123456789abcdef", replacements: 1 }],
  };
  assert.deepEqual(repeatedFacts(canonicalEdit), ["paths repeats files[].path"]);
  assert.deepEqual(repeatedFacts(compactEdit(canonicalEdit)), []);
});

test("two fields with the same substantial value repeat a fact, at any depth; short scalars and distinct items do not", () => {
  assert.deepEqual(repeatedFacts({ a: { paths: ["p", "q"], changed_paths: ["p", "q"] } }), ["a.changed_paths repeats a.paths"]);
  assert.deepEqual(
    repeatedFacts({ created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z", read: ["a.ts"], changed: ["a.ts"] }),
    [],
    "equal facts that coincide",
  );
  assert.deepEqual(
    repeatedFacts({ input_schema: { type: "object", properties: { a: { type: "string" }, b_a: { type: "string" } } } }),
    [],
    "a schema is not a result's facts",
  );
  assert.deepEqual(
    repeatedFacts({
      failures: [
        { path: "src/a.ts", line: 1 },
        { path: "src/a.ts", line: 2 },
      ],
    }),
    [],
  );
});
