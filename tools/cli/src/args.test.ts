import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { exitCodeFor, parsePort, UsageError } from "./args.js";

describe("parsePort", () => {
  const dev = { min: 0, max: 65535 };
  it("accepts plain decimal integers in range, bounds included", () => {
    assert.equal(parsePort("0", dev), 0);
    assert.equal(parsePort("8080", dev), 8080);
    assert.equal(parsePort("65535", dev), 65535);
  });

  it("refuses anything else with a usage error naming the flag, the range and the value", () => {
    for (const raw of ["abc", "", "1.5", "-1", "65536", "99999", "1e3", "0x50", " 80", "80 ", "+80"]) {
      assert.throws(
        () => parsePort(raw, dev),
        (e: unknown) => e instanceof UsageError && e.message === `--port must be an integer from 0 to 65535, got ${JSON.stringify(raw)}`,
        raw,
      );
    }
    assert.throws(
      () => parsePort("0", { min: 1, max: 65530, why: "six consecutive ports" }),
      /^UsageError: --port must be an integer from 1 to 65530 \(six consecutive ports\), got "0"$/,
    );
  });
});

describe("exitCodeFor", () => {
  it("is 2 for usage errors, ours and parseArgs's, and 1 for the rest", () => {
    assert.equal(exitCodeFor(new UsageError("x")), 2);
    let parseError: unknown;
    try {
      parseArgs({ args: ["--bogus"], options: {} });
    } catch (error) {
      parseError = error;
    }
    assert.equal(exitCodeFor(parseError), 2);
    assert.equal(exitCodeFor(new Error("database down")), 1);
    assert.equal(exitCodeFor("string"), 1);
    assert.equal(exitCodeFor(null), 1);
  });
});
