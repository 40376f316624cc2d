import { test } from "node:test";
import assert from "node:assert/strict";
import { callIdsText, renderFrictionTable, SHOWN_CALL_IDS } from "./render.js";
import type { FrictionReport } from "./analyze.js";

const ids = Array.from({ length: 920 }, (_, i) => `call-${String(i).padStart(4, "0")}`);
const report = {
  records: 920,
  streams: 1,
  thresholds: {},
  summary: [{ clientId: "acme", tool: "run_process", pattern: "schema_rejection_retry", count: 1, calls: 920 }],
  findings: [
    { pattern: "schema_rejection_retry", clientId: "acme", subject: "a", sessionId: "", tool: "run_process", startedAtMs: 0, callIds: ids, detail: {} },
  ],
} as unknown as FrictionReport;

test("a finding's table cell shows the call count and the first few ids, not all 920", () => {
  const table = renderFrictionTable(report);
  const line = table.split("\n").find((l) => l.includes("call-0000")) ?? "";
  assert.ok(line.includes("920: call-0000,call-0001,call-0002,… (+917; --ids for all)"), line);
  assert.ok(!table.includes("call-0003"), "ids after the first few are left out");
  assert.ok(line.length < 200, `one readable line: ${line.length} characters`);
});

test("--ids lists every call id; a finding with few calls lists them all anyway", () => {
  assert.ok(renderFrictionTable(report, { allIds: true }).includes("call-0919"));
  assert.equal(callIdsText(["a", "b"]), "2: a,b");
  assert.equal(callIdsText(ids.slice(0, SHOWN_CALL_IDS)), `${SHOWN_CALL_IDS}: call-0000,call-0001,call-0002`);
});
