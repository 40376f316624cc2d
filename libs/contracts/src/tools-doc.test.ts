import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { renderToolsDoc } from "./tools-doc.js";

test("docs/tools.md matches the catalog (run `make docs` after changing a tool)", () => {
  const committed = readFileSync(new URL("../../../docs/tools.md", import.meta.url), "utf8");
  assert.equal(committed, renderToolsDoc());
});

test("the tool reference lists every tool with its category, exposure and schema", () => {
  const doc = renderToolsDoc();
  for (const name of ["read_files", "call_runtime_tool", "run_process", "present_work_result"]) assert.ok(doc.includes(`## \`${name}\``), name);
  assert.ok(doc.includes("Gateway (via call_runtime_tool)"));
});
