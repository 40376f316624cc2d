import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@webcodex/platform";
import { loadConfig } from "../config.js";
import { skillCatalogsDirFrom } from "./catalogs-dir.js";

const base = {
  WEBCODEX_TOOL_REGISTRY_URL: "http://127.0.0.1:1",
  WEBCODEX_REF_RESOLVER_URL: "http://127.0.0.1:2",
  WEBCODEX_AUDIT_URL: "http://127.0.0.1:3",
  WEBCODEX_RUNNER_BROKER_URL: "http://127.0.0.1:4",
};

test("WEBCODEX_SKILL_CATALOGS_DIR: unset means none; a directory is taken as given; anything else stops startup", async () => {
  const dir = await mkdtemp(join(tmpdir(), "wc-catalogs-"));
  try {
    assert.equal(loadConfig(base).skillCatalogsDir, undefined);
    assert.equal(loadConfig({ ...base, WEBCODEX_SKILL_CATALOGS_DIR: dir }).skillCatalogsDir, dir);
    await writeFile(join(dir, "file"), "x");
    assert.throws(() => loadConfig({ ...base, WEBCODEX_SKILL_CATALOGS_DIR: join(dir, "file") }), ConfigError);
    assert.throws(() => skillCatalogsDirFrom(join(dir, "missing")), /is not a directory/);
    assert.equal(skillCatalogsDirFrom(""), undefined);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
