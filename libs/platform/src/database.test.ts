import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { describePostgresFailure } from "./database.js";

describe("Database failures", () => {
  it("describePostgresFailure tells unreachable, unavailable and failed queries apart", () => {
    assert.equal(describePostgresFailure(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" })), "unreachable (read ECONNRESET)");
    assert.equal(describePostgresFailure(new Error("Connection terminated unexpectedly")), "unreachable (Connection terminated unexpectedly)");
    assert.equal(
      describePostgresFailure(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })),
      "unavailable (terminating connection due to administrator command, SQLSTATE 57P01)",
    );
    assert.equal(
      describePostgresFailure(Object.assign(new Error("the database system is starting up"), { code: "57P03" })),
      "unavailable (the database system is starting up, SQLSTATE 57P03)",
    );
    assert.equal(
      describePostgresFailure(Object.assign(new Error('relation "x" does not exist'), { code: "42P01" })),
      'query failed (relation "x" does not exist)',
    );
    assert.equal(describePostgresFailure(Object.assign(new AggregateError([]), { code: "ECONNREFUSED" })), "unreachable (ECONNREFUSED)");
  });
});
