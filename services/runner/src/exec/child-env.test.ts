import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { childEnv, scrubbedBaseEnv } from "./child-env.js";
import { failsWith } from "./exec.test-support.js";

describe("child environment", () => {
  it("keeps only PATH, HOME, LANG, TMPDIR and TERM=dumb from the base", () => {
    const base = scrubbedBaseEnv({ PATH: "/bin", HOME: "/home/u", DATABASE_URL: "postgres://x", WEBCODEX_TOKEN: "t" });
    assert.deepEqual(Object.keys(base).sort(), ["HOME", "LANG", "PATH", "TERM", "TMPDIR"]);
    assert.equal(base["PATH"], "/bin");
    assert.equal(base["TERM"], "dumb");
  });

  it("never reads the Runner's own process environment", () => {
    process.env["WEBCODEX_ENV_PROBE_SECRET"] = "leak";
    try {
      assert.ok(!Object.values(scrubbedBaseEnv()).includes("leak"));
      assert.equal(scrubbedBaseEnv()["WEBCODEX_ENV_PROBE_SECRET"], undefined);
    } finally {
      delete process.env["WEBCODEX_ENV_PROBE_SECRET"];
    }
  });

  it("lays request additions over the base, overriding base keys", () => {
    const env = childEnv(scrubbedBaseEnv({ PATH: "/bin" }), { PATH: "/venv/bin", FOO: "bar" });
    assert.equal(env["PATH"], "/venv/bin");
    assert.equal(env["FOO"], "bar");
  });

  it("rejects invalid names and non-string values", () => {
    const base = scrubbedBaseEnv();
    assert.throws(() => childEnv(base, { "A-B": "x" }), failsWith(ReasonCode.invalidValue, "env_key_invalid"));
    assert.throws(() => childEnv(base, { "1A": "x" }), failsWith(ReasonCode.invalidValue, "env_key_invalid"));
    assert.throws(() => childEnv(base, { A: 1 as unknown as string }), failsWith(ReasonCode.invalidValue, "env_value_invalid"));
    assert.throws(() => childEnv(base, { A: "x\0y" }), failsWith(ReasonCode.invalidValue, "env_value_invalid"));
  });
});
