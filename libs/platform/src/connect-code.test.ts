import { test } from "node:test";
import assert from "node:assert/strict";
import { Code } from "@connectrpc/connect";
import { connectCodeFromName, connectCodeName } from "./connect-code.js";

test("every Connect code has its snake_case wire name and parses back", () => {
  assert.equal(connectCodeName(Code.DeadlineExceeded), "deadline_exceeded");
  assert.equal(connectCodeName(Code.Unavailable), "unavailable");
  for (const code of Object.values(Code).filter((v): v is Code => typeof v === "number")) assert.equal(connectCodeFromName(connectCodeName(code)), code);
});

test("a name that is no Connect code does not parse, and an out-of-range number reads as unknown", () => {
  assert.equal(connectCodeFromName("deadlineexceeded"), undefined);
  assert.equal(connectCodeFromName("DeadlineExceeded"), undefined);
  assert.equal(connectCodeName(99 as Code), "unknown");
});
