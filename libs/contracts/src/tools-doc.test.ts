import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { renderToolsDoc } from "./tools-doc.js";
import { renderResultsDoc } from "./results-doc.js";
import { reasonCodeTable } from "./reason-codes.js";
import { toolDefinitions } from "./catalog.js";

test("docs/tools.md matches the catalog (run `make docs` after changing a tool)", () => {
  const committed = readFileSync(new URL("../../../docs/tools.md", import.meta.url), "utf8");
  assert.equal(committed, renderToolsDoc());
});

test("the tool reference lists every tool with its category, exposure and schema", () => {
  const doc = renderToolsDoc();
  for (const name of ["read_files", "call_runtime_tool", "run_process", "present_work_result"]) assert.ok(doc.includes(`## \`${name}\``), name);
  assert.ok(doc.includes("Gateway (via call_runtime_tool)"));
});

test("docs/results.md matches the code (run `make docs` after changing a tool, a reason code or a follow-up)", () => {
  const committed = readFileSync(new URL("../../../docs/results.md", import.meta.url), "utf8");
  assert.equal(committed, renderResultsDoc());
});

test("the results reference names every implemented tool and every reason code, and shows a Gateway follow-up wrapped", () => {
  const doc = renderResultsDoc();
  for (const d of toolDefinitions().filter((t) => t.implemented)) {
    assert.ok(doc.includes(`| \`${d.name}\` |`), d.name);
    if (d.name !== "call_runtime_tool") assert.ok(d.resultFields && d.resultFields.length > 0, `${d.name} declares its result fields`);
  }
  for (const code of Object.keys(reasonCodeTable)) assert.ok(doc.includes(`| \`${code}\` |`), code);
  assert.ok(doc.includes('"tool":"call_runtime_tool","arguments":{"tool":"wait_for_job_terminal"'));
});
