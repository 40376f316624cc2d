import { test } from "node:test";
import assert from "node:assert/strict";
import { pagedText } from "./compaction.js";
import { cursorFailure, decodeCursor, encodeCursor, pageFields } from "./paging.js";

test("a cursor decodes only as the listing it was made for; anything else is not a cursor", () => {
  const cursor = encodeCursor("projects", ["snap", 20, "api"]);
  assert.deepEqual(decodeCursor("projects", cursor), ["snap", 20, "api"]);
  assert.equal(decodeCursor("tasks", cursor), undefined, "another listing's");
  for (const bad of ["", "garbage", "c1.", "c1.!!!", `c1.${Buffer.from("[1]").toString("base64url")}`, cursor.slice(0, -3), `c1.${"A".repeat(2000)}`])
    assert.equal(decodeCursor("projects", bad), undefined, bad.slice(0, 20));
});

test("page fields are present only on a cut page", () => {
  assert.deepEqual(pageFields(0, undefined), {});
  assert.deepEqual(pageFields(0, "c1.x"), {});
  assert.deepEqual(pageFields(3, "c1.x"), { omitted: 3, next_cursor: "c1.x" });
});

test("a cursor failure is invalid_value with the restart of the same listing as its follow-up", () => {
  const failure = cursorFailure("cursor_expired", "list_projects", { name: "api" });
  assert.deepEqual([failure.reason_code, failure.detail_code, failure.state_changed], ["invalid_value", "cursor_expired", false]);
  assert.deepEqual(failure.follow_up, { follow_up_kind: "fallback_recovery", tool: "list_projects", arguments: { name: "api" } });
  const tasks = cursorFailure("cursor_invalid", "list_agent_tasks", { state: "open" });
  assert.deepEqual(tasks.follow_up?.arguments, { tool: "list_agent_tasks", arguments: { state: "open" } }, "a Gateway tool through call_runtime_tool");
});

test("the text rendering carries every fact of the result once, in columns", () => {
  const result = {
    projects: [
      { project_ref: "~p1", project_id: "agent:a:x", name: "x\ty", runner_state: "ready" },
      { project_ref: "~p2", project_id: "agent:a:z", name: "z" },
    ],
    omitted: 7,
    next_cursor: "c1.abc",
  };
  assert.equal(
    pagedText(result, "projects", ["project_ref", "project_id", "name", "runner_state"]),
    'projects: project_ref\tproject_id\tname\trunner_state\n~p1\tagent:a:x\tx y\tready\n~p2\tagent:a:z\tz\t-\nomitted: 7\nnext_cursor: "c1.abc"',
  );
});
