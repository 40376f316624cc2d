import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isAttemptId, isCallerId, isCounter, newAttemptId, refOrTuple } from "./agent-model.js";

describe("agent identities", () => {
  it("accepts bounded caller ids and server attempt ids only", () => {
    assert.equal(isCallerId("agent-1.main:x@y"), true);
    for (const bad of ["", " a", "a b", "-a", "x".repeat(129), "a/b"]) assert.equal(isCallerId(bad), false, bad);
    assert.equal(isAttemptId(newAttemptId()), true);
    assert.equal(isAttemptId("wc_att_1"), false);
  });

  it("generations and fences are exact positive integers", () => {
    assert.equal(isCounter(0, true), true);
    assert.equal(isCounter(0, false), false);
    assert.equal(isCounter(Number.MAX_SAFE_INTEGER + 1, true), false);
    assert.equal(isCounter(1.5, true), false);
  });
});

describe("ref or explicit tuple", () => {
  const names = { ref: "attempt_ref", tuple: "the tuple" };
  it("takes a ref alone or a complete tuple alone", () => {
    assert.deepEqual(refOrTuple("~a1", {}, [false, false], names), { kind: "ref", ref: "~a1" });
    assert.deepEqual(refOrTuple("", { x: 1 }, [true, true], names), { kind: "tuple", tuple: { x: 1 } });
  });

  it("rejects a ref combined with a tuple, and a partial tuple", () => {
    const both = refOrTuple("~a1", {}, [true, false], names);
    assert.equal(both.kind === "invalid" && both.failure.detail_code, "ref_with_explicit_tuple");
    const partial = refOrTuple("", {}, [true, false], names);
    assert.equal(partial.kind === "invalid" && partial.failure.reason_code, "missing_field");
  });
});
