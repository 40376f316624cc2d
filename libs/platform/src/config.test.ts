import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, readConfig } from "./config.js";

const spec = {
  url: { kind: "string", env: "T_URL", required: true },
  name: { kind: "string", env: "T_NAME", default: "svc" },
  port: { kind: "int", env: "T_PORT", default: 8080, min: 1, max: 65535 },
  debug: { kind: "bool", env: "T_DEBUG", default: false },
  level: { kind: "enum", env: "T_LEVEL", values: ["info", "warn"], default: "info" },
} as const;

function problemsOf(env: Record<string, string>): string[] {
  try {
    readConfig(spec, env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `a ConfigError, got ${String(error)}`);
    return error.problems;
  }
  assert.fail("readConfig accepted an invalid environment");
}

describe("readConfig", () => {
  it("parses every kind and applies defaults", () => {
    assert.deepEqual(readConfig(spec, { T_URL: "postgres://x" }), { url: "postgres://x", name: "svc", port: 8080, debug: false, level: "info" });
    assert.deepEqual(readConfig(spec, { T_URL: "u", T_NAME: "n", T_PORT: "9000", T_DEBUG: "yes", T_LEVEL: "warn" }), {
      url: "u",
      name: "n",
      port: 9000,
      debug: true,
      level: "warn",
    });
    assert.equal(readConfig(spec, { T_URL: "u", T_DEBUG: "OFF" }).debug, false);
  });

  it("a missing required value is a ConfigError naming the variable; an empty one counts as missing", () => {
    assert.deepEqual(problemsOf({}), ["T_URL is required"]);
    assert.deepEqual(problemsOf({ T_URL: "" }), ["T_URL is required"]);
  });

  it("each invalid value is named with what was given", () => {
    assert.deepEqual(problemsOf({ T_URL: "u", T_PORT: "80a" }), ['T_PORT must be an integer, got "80a"']);
    assert.deepEqual(problemsOf({ T_URL: "u", T_PORT: "1.5" }), ['T_PORT must be an integer, got "1.5"']);
    assert.deepEqual(problemsOf({ T_URL: "u", T_PORT: "0" }), ["T_PORT must be >= 1"]);
    assert.deepEqual(problemsOf({ T_URL: "u", T_PORT: "70000" }), ["T_PORT must be <= 65535"]);
    assert.deepEqual(problemsOf({ T_URL: "u", T_DEBUG: "maybe" }), ['T_DEBUG must be a boolean, got "maybe"']);
    assert.deepEqual(problemsOf({ T_URL: "u", T_LEVEL: "loud" }), ['T_LEVEL must be one of info, warn, got "loud"']);
  });

  it("reports every problem in one error, each on its own line", () => {
    try {
      readConfig(spec, { T_PORT: "x", T_LEVEL: "loud" });
      assert.fail("accepted");
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.problems.length, 3);
      assert.equal(
        error.message,
        'invalid configuration:\n  - T_URL is required\n  - T_PORT must be an integer, got "x"\n  - T_LEVEL must be one of info, warn, got "loud"',
      );
    }
  });

  it("an optional int without a default is undefined when unset, and read when set (a metrics port is off unless asked for)", () => {
    const ports = { metricsPort: { kind: "int", env: "T_METRICS_PORT", min: 0, max: 65535, optional: true } } as const;
    assert.equal(readConfig(ports, {}).metricsPort, undefined);
    assert.equal(readConfig(ports, { T_METRICS_PORT: "" }).metricsPort, undefined);
    assert.equal(readConfig(ports, { T_METRICS_PORT: "0" }).metricsPort, 0);
    assert.equal(readConfig(ports, { T_METRICS_PORT: "9090" }).metricsPort, 9090);
  });
});
