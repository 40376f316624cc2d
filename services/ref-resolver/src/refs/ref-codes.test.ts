import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { formatRef, parseRef, RefKind } from "./ref-codes.js";

describe("ref codes", () => {
  it("formats each kind with its own prefix", () => {
    assert.equal(formatRef(RefKind.project, 1), "~p1");
    assert.equal(formatRef(RefKind.session, "12"), "~s12");
    assert.equal(formatRef(RefKind.agentContinuation, 3n), "~a3");
    assert.equal(formatRef(RefKind.attempt, 4), "~t4");
  });

  it("parses only exact refs of the requested kind", () => {
    assert.equal(parseRef(RefKind.project, "~p42"), "42");
    assert.equal(parseRef(RefKind.session, "~p42"), undefined);
    assert.equal(parseRef(RefKind.attempt, "~a42"), undefined);
    for (const bad of ["~p0", "~p01", "~p", "p1", " ~p1", "~p1 ", "~P1", "~p1.0", "~p-1", "~p1e3", "~p１"]) {
      assert.equal(parseRef(RefKind.project, bad), undefined, bad);
    }
  });

  it("keeps codes above 2^53 exact instead of rounding them onto a neighbour", () => {
    assert.equal(parseRef(RefKind.project, "~p9007199254740993"), "9007199254740993");
    assert.equal(formatRef(RefKind.project, "9007199254740993"), "~p9007199254740993");
  });

  it("rejects codes that would not fit a Postgres bigint", () => {
    assert.equal(parseRef(RefKind.project, `~p${"9".repeat(18)}`), "9".repeat(18));
    assert.equal(parseRef(RefKind.project, `~p${"1".repeat(19)}`), undefined);
    assert.throws(() => formatRef(RefKind.project, 0));
  });
});
