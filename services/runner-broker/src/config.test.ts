import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConfigError } from "@webcodex/platform";
import { loadConfig } from "./config.js";

const base = { WEBCODEX_REDIS_URL: "redis://x", WEBCODEX_POSTGRES_URL: "postgres://x", WEBCODEX_REF_RESOLVER_URL: "http://x" };

describe("runner-broker config", () => {
  it("defaults to no provisioner, no runner token and a per-project limit of 16", () => {
    const c = loadConfig(base);
    assert.equal(c.provisioner, "none");
    assert.equal(c.runnerToken, undefined);
    assert.equal(c.projectConcurrency, 16);
  });

  it("reports every missing value in one error", () => {
    assert.throws(
      () => loadConfig({}),
      (e: unknown) => e instanceof ConfigError && e.problems.length === 3,
    );
    assert.throws(() => loadConfig({ ...base, WEBCODEX_PROVISIONER: "kubernetes" }), /WEBCODEX_RUNNER_POD_TEMPLATE is required/);
    assert.throws(() => loadConfig({ ...base, WEBCODEX_PROVISIONER: "local-process" }), /WEBCODEX_RUNNER_WORKSPACES_DIR is required/);
  });
});
