import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError } from "@webcodex/platform";
import { loadConfig } from "./config.js";

const required = {
  WEBCODEX_TOOL_REGISTRY_URL: "http://r",
  WEBCODEX_REF_RESOLVER_URL: "http://f",
  WEBCODEX_AUDIT_URL: "http://a",
  WEBCODEX_RUNNER_BROKER_URL: "http://b",
};

test("WEBCODEX_HOST_PROFILE: an unknown profile is a config error at startup, never a default", () => {
  assert.equal(loadConfig(required).hostProfile, "generic");
  assert.equal(loadConfig({ ...required, WEBCODEX_HOST_PROFILE: "app" }).hostProfile, "app");
  assert.throws(
    () => loadConfig({ ...required, WEBCODEX_HOST_PROFILE: "chatgpt" }),
    (e: unknown) => e instanceof ConfigError && /WEBCODEX_HOST_PROFILE must be one of generic, app/.test(e.message),
  );
});
