import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ContinuationFactSchema } from "@webcodex/proto";
import { continuationFacts } from "./audit.js";

test("continuation facts keep known subjects and facts with opaque ids; anything else (prose, paths, unknown facts) is dropped", () => {
  const f = (subject: string, id: string, fact: string) => create(ContinuationFactSchema, { subject, id, fact });
  assert.deepEqual(
    continuationFacts([
      f("job", "job_12", "dispatch_accepted"),
      f("agent", "wc_agent_0123", "fresh_turn_observed"),
      f("job", "job_12", "consumed"),
      f("job", "src/secret file.ts", "consumed"),
      f("task", "x", "consumed"),
      f("job", "job_1", "sent twice"),
      f("agent", "wc_agent_1", "dispatch_maybe"),
    ]),
    [
      { subject: "job", id: "job_12", fact: "dispatch_accepted" },
      { subject: "agent", id: "wc_agent_0123", fact: "fresh_turn_observed" },
      { subject: "job", id: "job_12", fact: "consumed" },
    ],
  );
  assert.equal(continuationFacts([]), undefined);
  assert.equal(continuationFacts(Array.from({ length: 40 }, () => f("job", "job_1", "consumed")))?.length, 16, "bounded");
});
