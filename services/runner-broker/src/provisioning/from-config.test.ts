import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@webcodex/platform";
import { loadConfig } from "../config.js";
import { createConfiguredProvisioner, defaultRunnerCliPath } from "./from-config.js";

const base = { WEBCODEX_REDIS_URL: "redis://x", WEBCODEX_POSTGRES_URL: "postgres://x", WEBCODEX_REF_RESOLVER_URL: "http://r" };
const logger = createLogger({ service: "t", level: "silent" });

describe("createConfiguredProvisioner", () => {
  it("none by default", async () => {
    assert.equal(await createConfiguredProvisioner(loadConfig(base), () => "", logger), undefined);
  });

  it("local-process starts Runners with the repository's webcodex CLI unless WEBCODEX_RUNNER_CLI names one", async () => {
    assert.ok(existsSync(defaultRunnerCliPath()), defaultRunnerCliPath());
    assert.match(defaultRunnerCliPath(), /tools\/cli\/bin\/webcodex\.js$/);
    const dir = mkdtempSync(join(tmpdir(), "wcx-prov-"));
    try {
      const provisioner = await createConfiguredProvisioner(loadConfig({ ...base, WEBCODEX_PROVISIONER: "local-process", WEBCODEX_RUNNER_WORKSPACES_DIR: dir }), () => "http://127.0.0.1:1", logger);
      assert.ok(provisioner);
      await provisioner.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
