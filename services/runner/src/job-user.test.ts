import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { loadConfig, loadRunnerSettings } from "./config.js";
import { DEFAULT_JOB_UID } from "./exec/job-user.js";
import { createRunner, runnerSettingsOptions } from "./runner.js";
import type { Runner } from "./runner.js";

/**
 * Jobs of a Runner running as root run as a user of their own: they cannot read what only the
 * Runner may read (its credential file), and the workspace stays theirs to write. These cases
 * are the Runner without its sandbox (WEBCODEX_RUNNER_SANDBOX=off); sandbox.test.ts covers it.
 */
const logger = createLogger({ service: "test", level: "silent" });
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const asRoot = process.getuid?.() === 0;

/** A credential file as an operator should leave it: readable by the Runner's user only. */
function credentialFile(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "wc-cred-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "runner-token");
  writeFileSync(file, "RUNNER-CREDENTIAL-SECRET\n", { mode: 0o600 });
  return file;
}

async function runnerOn(
  root: string,
  env: Record<string, string>,
  spawnHost: "on" | "off",
): Promise<{ runner: Runner; call: (tool: string, args: unknown) => Promise<Record<string, unknown>> }> {
  const config = loadConfig({
    WEBCODEX_RUNNER_ROOT: root,
    WEBCODEX_RUNNER_BROKER_URL: "http://b",
    WEBCODEX_RUNNER_CLIENT_ID: "c",
    WEBCODEX_RUNNER_PROJECT_ID: "p",
    WEBCODEX_RUNNER_SPAWN_HOST: spawnHost,
    WEBCODEX_RUNNER_SANDBOX: "off",
    ...env,
  });
  const runner = createRunner({ root: config.root, logger, ...runnerSettingsOptions(config) });
  cleanups.push(() => runner.close());
  const client = createInProcessClient(RunnerService, runner.service);
  let n = 0n;
  const call = async (tool: string, args: unknown) => {
    const res = await client.execute({ callId: `c${++n}`, tool, fence: 0n, argumentsJson: JSON.stringify(args) });
    assert.equal(res.failure, undefined, `${tool}: ${JSON.stringify(res.failure)}`);
    return JSON.parse(res.resultJson) as Record<string, unknown>;
  };
  return { runner, call };
}

function workspace(files: Record<string, string>, git = false): string {
  const root = mkdtempSync(path.join(os.tmpdir(), "wc-jobuser-"));
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(root, name), content);
  if (git) {
    execFileSync("git", ["init", "-q"], { cwd: root });
    execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], { cwd: root });
    execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], { cwd: root });
  }
  return root;
}

const output = (r: Record<string, unknown>) => String(r["output"] ?? "");

describe("the user Jobs run as", () => {
  for (const spawnHost of ["on", "off"] as const) {
    it(
      `as root, a root-owned workspace is handed to an unprivileged Job user who cannot read the Runner's credential file (spawn host ${spawnHost})`,
      { skip: asRoot ? false : "needs root" },
      async () => {
        const credential = credentialFile();
        const root = workspace({ "a.txt": "one\n" }, true);
        const { runner, call } = await runnerOn(root, { WEBCODEX_RUNNER_TOKEN_FILE: credential }, spawnHost);
        assert.deepEqual(runner.jobUser, { uid: DEFAULT_JOB_UID, gid: DEFAULT_JOB_UID });
        assert.equal(runner.containment.jobsSeparateUid, true);
        // Written by the Runner (as root) after the handover: a new file in a new directory.
        await call("edit_project_files", { changes: [{ kind: "create", path: "made/by-runner.txt", content: "runner\n" }] });
        for (const p of ["made", "made/by-runner.txt", "a.txt", ".git/HEAD"]) {
          assert.equal(lstatSync(path.join(root, p)).uid, DEFAULT_JOB_UID, `${p} belongs to the Job user`);
        }
        const result = await call("run_shell", {
          command: [
            "echo uid=$(id -u) gid=$(id -g)",
            `cat ${credential} 2>/dev/null || echo credential-unreadable`,
            "echo job >> made/by-runner.txt && echo appended",
            "echo new > by-job.txt && echo created",
            'test -w "$HOME" && echo home-writable',
          ].join("; "),
          wait_ms: 20_000,
        });
        const out = output(result);
        assert.match(out, new RegExp(`uid=${DEFAULT_JOB_UID} gid=${DEFAULT_JOB_UID}`));
        assert.match(out, /credential-unreadable/);
        assert.doesNotMatch(out, /RUNNER-CREDENTIAL-SECRET/);
        assert.match(out, /appended/);
        assert.match(out, /created/);
        assert.match(out, /home-writable/);
        // git runs as the owner of the repository too: no "dubious ownership", and it sees the Job's file.
        const changes = await call("read_workspace_changes", {});
        assert.match(JSON.stringify(changes), /by-job\.txt/);
        // An edit replacing a Job's file keeps it the Job user's.
        await call("edit_project_files", { changes: [{ kind: "create", path: "second.txt", content: "x\n" }] });
        assert.equal(lstatSync(path.join(root, "by-job.txt")).uid, DEFAULT_JOB_UID);
      },
    );
  }

  it("as root, a workspace owned by another user runs its Jobs as that user, with nothing handed over", { skip: asRoot ? false : "needs root" }, async () => {
    const root = workspace({ "a.txt": "one\n" });
    chownSync(root, 4321, 4321);
    const { runner, call } = await runnerOn(root, {}, "on");
    assert.deepEqual(runner.jobUser, { uid: 4321, gid: 4321 });
    assert.equal(lstatSync(path.join(root, "a.txt")).uid, 0, "the files were left as they were");
    assert.match(output(await call("run_shell", { command: "id -u", wait_ms: 20_000 })), /^4321/);
  });

  it("WEBCODEX_RUNNER_JOB_USER=runner keeps Jobs on the Runner's own user (and then they read its files)", async () => {
    const credential = credentialFile();
    const root = workspace({});
    const { runner, call } = await runnerOn(root, { WEBCODEX_RUNNER_JOB_USER: "runner" }, "on");
    assert.equal(runner.jobUser, undefined);
    assert.equal(runner.containment.jobsSeparateUid, false);
    const out = output(await call("run_shell", { command: `id -u; cat ${credential}`, wait_ms: 20_000 }));
    assert.match(out, new RegExp(`^${process.getuid?.()}`));
    assert.match(out, /RUNNER-CREDENTIAL-SECRET/);
    assert.ok(!existsSync(path.join(root, "x")));
  });

  it("an explicit uid:gid is used as given", { skip: asRoot ? false : "needs root" }, async () => {
    const root = workspace({});
    mkdirSync(path.join(root, "sub"));
    const { call } = await runnerOn(root, { WEBCODEX_RUNNER_JOB_USER: "2345:3456" }, "off");
    assert.equal(lstatSync(path.join(root, "sub")).uid, 2345);
    assert.match(output(await call("run_shell", { command: "echo $(id -u):$(id -g); touch sub/x && echo ok", wait_ms: 20_000 })), /2345:3456\s+ok/);
  });

  it("refuses a Job user that is root or not a user", () => {
    for (const bad of ["0", "0:0", "1000:0", "nobody", "-1", "12:ab"]) {
      assert.throws(() => loadRunnerSettings({ WEBCODEX_RUNNER_JOB_USER: bad }), /WEBCODEX_RUNNER_JOB_USER/, bad);
    }
    assert.equal(loadRunnerSettings({}).jobUser, "auto");
  });
});

describe("a Job user that cannot reach the workspace", () => {
  it("auto keeps Jobs on the Runner's user (reported), an explicit user refuses to start", { skip: asRoot ? false : "needs root" }, async () => {
    const closed = mkdtempSync(path.join(os.tmpdir(), "wc-closed-")); // 0700, root's
    cleanups.push(() => rm(closed, { recursive: true, force: true }));
    const root = path.join(closed, "ws");
    mkdirSync(root);
    const { runner } = await runnerOn(root, {}, "off");
    assert.equal(runner.jobUser, undefined);
    assert.equal(runner.containment.jobsSeparateUid, false);
    assert.equal(lstatSync(root).uid, 0, "nothing was handed over");
    await assert.rejects(runnerOn(root, { WEBCODEX_RUNNER_JOB_USER: "2345" }, "off"), /cannot reach/);
  });
});
