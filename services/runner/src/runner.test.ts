import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import type { Client } from "@connectrpc/connect";
import { RunnerCapabilities } from "@webcodex/contracts";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { loadConfig } from "./config.js";
import { createRunner, runnerSettingsOptions } from "./runner.js";
import type { Runner } from "./runner.js";

const logger = createLogger({ service: "test", level: "silent" });
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** A Runner on a fresh directory, configured from `env` exactly as `webcodex runner` is. */
async function runnerFromEnv(
  env: Record<string, string>,
): Promise<{ root: string; runner: Runner; call: (tool: string, args: unknown) => ReturnType<Client<typeof RunnerService>["execute"]> }> {
  const root = await mkdtemp(path.join(os.tmpdir(), "wc-runner-config-"));
  const config = loadConfig({
    WEBCODEX_RUNNER_ROOT: root,
    WEBCODEX_RUNNER_BROKER_URL: "http://b",
    WEBCODEX_RUNNER_CLIENT_ID: "c",
    WEBCODEX_RUNNER_PROJECT_ID: "p",
    WEBCODEX_RUNNER_SPAWN_HOST: "off",
    ...env,
  });
  const runner = createRunner({ root: config.root, logger, ...runnerSettingsOptions(config) });
  cleanups.push(async () => {
    await runner.close();
    await rm(root, { recursive: true, force: true });
  });
  const client = createInProcessClient(RunnerService, runner.service);
  let fence = 0n;
  const call = (tool: string, args: unknown) => client.execute({ callId: `c${++fence}`, tool, fence, argumentsJson: JSON.stringify(args) });
  return { root, runner, call };
}

const create = (p: string) => ({ changes: [{ kind: "create", path: p, content: "x\n" }] });

describe("a Runner built from its configuration", () => {
  it("refuses writes to the configured sensitive globs, which replace the defaults; .git/ stays refused", async () => {
    const { root, call } = await runnerFromEnv({ WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "private/**,*.{secret,key}" });
    for (const refused of ["private/notes.txt", "deep/api.key", ".git/config"]) {
      const res = await call("edit_project_files", create(refused));
      assert.equal(res.failure?.reasonCode, "sensitive_path", refused);
      assert.equal(existsSync(path.join(root, refused)), false, `${refused} was not written`);
    }
    const allowed = await call("edit_project_files", create(".env"));
    assert.equal(allowed.failure, undefined, "a default glob no longer applies once replaced");
    assert.equal(await readFile(path.join(root, ".env"), "utf8"), "x\n");
  });

  it("keeps the default sensitive globs when none are configured", async () => {
    const { call } = await runnerFromEnv({});
    assert.equal((await call("edit_project_files", create(".env"))).failure?.reasonCode, "sensitive_path");
  });

  it("withholds a disabled capability: not advertised, and a call needing it runs nothing", async () => {
    const { root, runner, call } = await runnerFromEnv({ WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "apply_text_edit_expected_match_count" });
    const advertised = await runner.capabilities;
    assert.ok(!advertised.includes("applyTextEditExpectedMatchCount"));
    assert.ok(advertised.includes("applyTextEdit"), "only the named capability is withheld");
    const describe = await createInProcessClient(RunnerService, runner.service).describe({});
    assert.ok(!describe.capabilities.includes("apply_text_edit_expected_match_count"));
    assert.deepEqual(describe.capabilities, new RunnerCapabilities(advertised).toWire());

    await writeFile(path.join(root, "a.txt"), "x x x\n");
    const read = JSON.parse((await call("read_files", { files: [{ path: "a.txt" }] })).resultJson) as { items: Array<{ read_revision: string }> };
    const revision = read.items[0]?.read_revision;
    const edit = (extra: Record<string, unknown>) => ({
      changes: [{ kind: "edit", path: "a.txt", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "x", new_text: "y" }, ...extra }] }],
    });
    const bulk = await call("edit_project_files", edit({ expected_match_count: 3 }));
    assert.equal(bulk.failure?.reasonCode, "capability_missing");
    assert.equal(bulk.failure?.failureStage, "dispatch");
    assert.equal(bulk.failure?.detailCode, "apply_text_edit_expected_match_count");
    assert.equal(bulk.failure?.stateChanged, false);
    assert.equal(await readFile(path.join(root, "a.txt"), "utf8"), "x x x\n", "nothing was written");
    const single = await call("edit_project_files", edit({ occurrence: 2 }));
    assert.equal(single.failure, undefined, "edits without the withheld capability still run");
    assert.equal(await readFile(path.join(root, "a.txt"), "utf8"), "x y x\n");
  });
});
