import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@webcodex/platform";
import { loadConfig } from "../config.js";
import { createConfiguredProvisioner, defaultRunnerCliPath, listLocalWorkspaces } from "./from-config.js";

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
      const provisioner = await createConfiguredProvisioner(
        loadConfig({ ...base, WEBCODEX_PROVISIONER: "local-process", WEBCODEX_RUNNER_WORKSPACES_DIR: dir }),
        () => "http://127.0.0.1:1",
        logger,
      );
      assert.ok(provisioner);
      await provisioner.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("local-process starts a Runner with the CLI WEBCODEX_RUNNER_CLI names, in a workspace under WEBCODEX_RUNNER_WORKSPACES_DIR", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wcx-prov-"));
    const marker = join(dir, "started.json");
    const cli = join(dir, "fake-cli.mjs");
    writeFileSync(
      cli,
      `import { writeFileSync } from "node:fs";\nwriteFileSync(${JSON.stringify(marker)}, JSON.stringify({ argv: process.argv.slice(2), root: process.env.WEBCODEX_RUNNER_ROOT, project: process.env.WEBCODEX_RUNNER_PROJECT_ID }));\n`,
    );
    try {
      const provisioner = await createConfiguredProvisioner(
        loadConfig({ ...base, WEBCODEX_PROVISIONER: "local-process", WEBCODEX_RUNNER_WORKSPACES_DIR: dir, WEBCODEX_RUNNER_CLI: cli }),
        () => "http://127.0.0.1:1",
        logger,
      );
      assert.ok(provisioner);
      try {
        // Only create_project (a source) makes a workspace: a call for an unknown Project starts nothing.
        await assert.rejects(provisioner.ensureRunner({ clientId: "acme", projectId: "demo" }), /no workspace/);
        assert.equal(existsSync(marker), false);
        assert.equal((await provisioner.ensureRunner({ clientId: "acme", projectId: "demo" }, { source: {} })).action, "created");
        const deadline = Date.now() + 10_000;
        while (!existsSync(marker) && Date.now() < deadline) await sleep(20);
        const started = JSON.parse(readFileSync(marker, "utf8")) as { argv: string[]; root: string; project: string };
        assert.deepEqual(started.argv, ["runner"]);
        assert.equal(started.project, "demo");
        assert.ok(started.root.startsWith(`${dir}/`) && started.root.endsWith("/demo"), started.root);
        // What a restarted broker resumes: the workspace, with its tenant's client id.
        assert.deepEqual(listLocalWorkspaces(dir), [{ clientId: "acme", projectId: "demo" }]);
        // A Runner that exited before it served is a failed start, with its exit code.
        while (((await provisioner.provisioningState?.({ clientId: "acme", projectId: "demo" }))?.state ?? "") === "starting") await sleep(20);
        const state = await provisioner.provisioningState?.({ clientId: "acme", projectId: "demo" });
        assert.equal(state?.state === "failed" ? state.failure.detail_code : state?.state, "runner_start_failed");
        // The workspaces are the provisioner's: kept when asked, else removed with the Project.
        assert.equal(await provisioner.removeRunner({ clientId: "acme", projectId: "demo" }, { keepWorkspace: true }), true);
        assert.ok(existsSync(started.root));
        assert.equal(await provisioner.removeRunner({ clientId: "acme", projectId: "demo" }), true);
        assert.equal(existsSync(started.root), false);
      } finally {
        await provisioner.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
