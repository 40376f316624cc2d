import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConfigError } from "@webcodex/platform";
import { loadConfig, loadSpawnHostSetting } from "./config.js";

const base = { WEBCODEX_RUNNER_ROOT: "/w", WEBCODEX_RUNNER_BROKER_URL: "http://b", WEBCODEX_RUNNER_CLIENT_ID: "c", WEBCODEX_RUNNER_PROJECT_ID: "p" };

describe("runner config", () => {
  it("spawns through the spawn host unless WEBCODEX_RUNNER_SPAWN_HOST=off", () => {
    assert.equal(loadConfig(base).spawnHost, "on");
    assert.equal(loadConfig({ ...base, WEBCODEX_RUNNER_SPAWN_HOST: "off" }).spawnHost, "off");
    assert.equal(loadSpawnHostSetting({}), true);
    assert.equal(loadSpawnHostSetting({ WEBCODEX_RUNNER_SPAWN_HOST: "on" }), true);
    assert.equal(loadSpawnHostSetting({ WEBCODEX_RUNNER_SPAWN_HOST: "off" }), false);
  });

  it("refuses any other value of WEBCODEX_RUNNER_SPAWN_HOST", () => {
    assert.throws(() => loadSpawnHostSetting({ WEBCODEX_RUNNER_SPAWN_HOST: "false" }), (e: unknown) => e instanceof ConfigError && /WEBCODEX_RUNNER_SPAWN_HOST/.test(e.message));
  });
});
