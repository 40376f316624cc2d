import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConfigError } from "@webcodex/platform";
import { loadConfig, loadRunnerSettings } from "./config.js";

const base = { WEBCODEX_RUNNER_ROOT: "/w", WEBCODEX_RUNNER_BROKER_URL: "http://b", WEBCODEX_RUNNER_CLIENT_ID: "c", WEBCODEX_RUNNER_PROJECT_ID: "p" };
const configError = (pattern: RegExp) => (e: unknown) => e instanceof ConfigError && pattern.test(e.message);

describe("runner config", () => {
  it("spawns through the spawn host unless WEBCODEX_RUNNER_SPAWN_HOST=off", () => {
    assert.equal(loadConfig(base).spawnHost, true);
    assert.equal(loadConfig({ ...base, WEBCODEX_RUNNER_SPAWN_HOST: "off" }).spawnHost, false);
    assert.equal(loadRunnerSettings({}).spawnHost, true);
    assert.equal(loadRunnerSettings({ WEBCODEX_RUNNER_SPAWN_HOST: "on" }).spawnHost, true);
    assert.equal(loadRunnerSettings({ WEBCODEX_RUNNER_SPAWN_HOST: "off" }).spawnHost, false);
  });

  it("refuses any other value of WEBCODEX_RUNNER_SPAWN_HOST", () => {
    assert.throws(() => loadRunnerSettings({ WEBCODEX_RUNNER_SPAWN_HOST: "false" }), configError(/WEBCODEX_RUNNER_SPAWN_HOST/));
  });

  it("keeps the default sensitive globs unless WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS is set", () => {
    assert.equal(loadConfig(base).sensitiveWriteGlobs, undefined);
    assert.equal(loadRunnerSettings({ WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "" }).sensitiveWriteGlobs, undefined);
  });

  it("splits sensitive globs at commas outside braces and trims them", () => {
    const settings = loadRunnerSettings({ WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: " private/** ,**/*.{pem,key},, *.secret" });
    assert.deepEqual(settings.sensitiveWriteGlobs, ["private/**", "**/*.{pem,key}", "*.secret"]);
  });

  it("refuses a glob list with an unclosed brace or no glob at all", () => {
    assert.throws(() => loadRunnerSettings({ WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "*.{pem,key" }), configError(/unclosed "\{"/));
    assert.throws(() => loadRunnerSettings({ WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: " , " }), configError(/lists no glob/));
  });

  it("reads withheld capabilities by wire name, in any order, without duplicates", () => {
    assert.deepEqual(loadConfig(base).disabledCapabilities, []);
    const settings = loadRunnerSettings({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "git_review_v1, apply_text_edit_expected_match_count,git_review_v1" });
    assert.deepEqual(settings.disabledCapabilities, ["gitReview", "applyTextEditExpectedMatchCount"]);
  });

  it("an unknown capability name or a baseline one is a configuration error", () => {
    assert.throws(
      () => loadRunnerSettings({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "bulk_edits" }),
      configError(/unknown capability "bulk_edits" \(known: read_files_v1, /),
    );
    assert.throws(
      () => loadRunnerSettings({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "applyTextEditExpectedMatchCount" }),
      configError(/unknown capability/),
      "typed ids are not wire names",
    );
    assert.throws(() => loadRunnerSettings({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "read_files_v1" }), configError(/frozen V2 baseline/));
  });

  it("reports every problem in one error", () => {
    assert.throws(
      () => loadConfig({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "nope", WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "{" }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.problems.some((p) => /WEBCODEX_RUNNER_ROOT is required/.test(p)) &&
        e.problems.some((p) => /"nope"/.test(p)) &&
        e.problems.some((p) => /unclosed/.test(p)),
    );
  });
});
