import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createInProcessClient, createLogger } from "@webcodex/platform";
import { RunnerService } from "@webcodex/proto";
import { loadConfig } from "./config.js";
import { createOwnedWorkspaceDir, PROJECT_UID_BASE, projectUid } from "./exec/job-user.js";
import { detectSandbox, sandboxCommand } from "./exec/sandbox.js";
import { createRunner, runnerSettingsOptions } from "./runner.js";
import type { Runner } from "./runner.js";

/**
 * Every program a Runner starts runs in the bubblewrap sandbox: it sees its workspace, the
 * system directories (read-only) and a private /tmp and home, nothing of the Runner's, and no
 * process outside its own pid namespace.
 */
const logger = createLogger({ service: "test", level: "silent" });
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const asRoot = process.getuid?.() === 0;
const support = detectSandbox();
const noSandbox = support.available ? false : `no sandbox here: ${support.problem}`;

function tmp(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function runnerOn(
  root: string,
  env: Record<string, string> = {},
): Promise<{ runner: Runner; call: (tool: string, args: unknown) => Promise<Record<string, unknown>> }> {
  const config = loadConfig({
    WEBCODEX_RUNNER_ROOT: root,
    WEBCODEX_RUNNER_BROKER_URL: "http://b",
    WEBCODEX_RUNNER_CLIENT_ID: "c",
    WEBCODEX_RUNNER_PROJECT_ID: "p",
    ...env,
  });
  const runner = createRunner({ root: config.root, logger, ...runnerSettingsOptions(config), stateDir: path.join(tmp("wc-state-"), "state") });
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

const shell = async (call: (tool: string, args: unknown) => Promise<Record<string, unknown>>, command: string) =>
  String((await call("run_shell", { command, wait_ms: 30_000 }))["output"] ?? "");

function gitWorkspace(root: string): void {
  writeFileSync(path.join(root, "a.txt"), "one\n");
  execFileSync("git", ["init", "-q"], { cwd: root });
  execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], { cwd: root });
  execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], { cwd: root });
}

describe("the Job sandbox", { skip: noSandbox }, () => {
  it("is reported, and a Job sees only its workspace, a private /tmp and home, and its own processes", async () => {
    const secretDir = tmp("wc-secret-");
    writeFileSync(path.join(secretDir, "token"), "RUNNER-SECRET\n", { mode: 0o644 });
    const root = tmp("wc-sbx-");
    gitWorkspace(root);
    const { runner, call } = await runnerOn(root);
    assert.equal(runner.containment.sandboxed, true);
    const out = await shell(
      call,
      [
        `cat ${secretDir}/token 2>/dev/null || echo secret-invisible`,
        `ls ${path.dirname(root)} | grep -c wc- || true`,
        "echo procs=$(ls /proc | grep -c '^[0-9]')",
        "grep CapEff /proc/self/status",
        "cat /etc/shadow | wc -c",
        "echo x > in-workspace.txt && echo workspace-writable",
        "touch /usr/x 2>/dev/null || echo usr-readonly",
        'touch "$HOME/h" && echo home-writable',
        "echo t > /tmp/t && echo tmp-writable",
      ].join("; "),
    );
    assert.match(out, /secret-invisible/);
    assert.doesNotMatch(out, /RUNNER-SECRET/);
    // The workspace's parent shows only the workspace itself (the bind mount's path), not its siblings.
    assert.match(out, /^1$/m);
    const procs = Number(/procs=(\d+)/.exec(out)?.[1]);
    assert.ok(procs > 0 && procs < 8, `only the sandbox's own processes are visible: ${out}`);
    assert.match(out, /CapEff:\s+0000000000000000/);
    assert.match(out, /^0$/m, "/etc/shadow is masked");
    assert.match(out, /workspace-writable/);
    assert.match(out, /usr-readonly/);
    assert.match(out, /home-writable/);
    assert.match(out, /tmp-writable/);
    // git (a read tool) runs in the sandbox too and sees the Job's file.
    assert.match(JSON.stringify(await call("read_workspace_changes", {})), /in-workspace\.txt/);
  });

  it(
    "as root, a workspace owned by another user runs Jobs as that user even under a directory closed to it, and nothing changes owner",
    { skip: asRoot ? false : "needs root" },
    async () => {
      const closed = tmp("wc-closed-"); // 0700, root's: the Job user could not walk to it
      const root = path.join(closed, "ws");
      mkdirSync(root);
      gitWorkspace(root);
      chownSync(root, 4321, 4321);
      const { runner, call } = await runnerOn(root);
      assert.deepEqual(runner.jobUser, { uid: 4321, gid: 4321 });
      assert.equal(runner.containment.jobsSeparateUid, true);
      const out = await shell(
        call,
        `id -u; id -G; echo x > new.txt && echo wrote; echo t > /tmp/t && echo tmp-writable; ls ${root}/.git >/dev/null && echo path-reachable`,
      );
      assert.match(out, /^4321\n4321\nwrote\ntmp-writable\npath-reachable/);
      assert.equal(lstatSync(path.join(root, "a.txt")).uid, 0, "the files were left as they were");
      assert.equal(lstatSync(path.join(root, "new.txt")).uid, 4321);
    },
  );

  it(
    "as root, a root-owned workspace is not handed over: its Jobs run as root without capabilities, in the sandbox",
    { skip: asRoot ? false : "needs root" },
    async () => {
      const root = tmp("wc-rootws-");
      mkdirSync(path.join(root, "sub"));
      const { runner, call } = await runnerOn(root);
      assert.equal(runner.jobUser, undefined);
      assert.equal(lstatSync(path.join(root, "sub")).uid, 0);
      const out = await shell(call, "grep -E 'CapEff|CapBnd' /proc/self/status; grep NoNewPrivs /proc/self/status");
      assert.match(out, /CapEff:\s+0000000000000000/);
      assert.match(out, /CapBnd:\s+0000000000000000/);
      assert.match(out, /NoNewPrivs:\s+1/);
    },
  );

  it("a read-only host directory under /tmp (a bundled rg in a checkout there) is reachable by the Job user: the parents the sandbox makes are searchable", () => {
    // /tmp is private in the sandbox, so the directories above a read-only mount exist only
    // there; bwrap would make them 0700 for root, and an unprivileged Job could not reach it.
    const base = mkdtempSync(path.join(os.tmpdir(), "wcx-ro-parent-"));
    cleanups.push(() => rm(base, { recursive: true, force: true }));
    const bin = path.join(base, "checkout", "node_modules", "bin");
    mkdirSync(bin, { recursive: true });
    writeFileSync(path.join(bin, "tool"), "#!/bin/sh\necho reached\n", { mode: 0o755 });
    const workspace = mkdtempSync(path.join(os.tmpdir(), "wcx-ro-ws-"));
    cleanups.push(() => rm(workspace, { recursive: true, force: true }));
    chmodSync(workspace, 0o777);
    const plan = { workspace, readOnly: [bin], ...(asRoot ? { user: { uid: PROJECT_UID_BASE + 4321, gid: PROJECT_UID_BASE + 4321 } } : {}) };
    const cmd = sandboxCommand(support, plan, path.join(bin, "tool"), [], workspace, { PATH: "/usr/bin:/bin" });
    const r = spawnSync(cmd.program, cmd.args, { env: cmd.env, encoding: "utf8", timeout: 10_000 });
    assert.equal(r.stdout, "reached\n", r.stderr);
  });

  it("a Job's loader variables never reach the privileged part of the sandbox, only the Job", async () => {
    const root = tmp("wc-ldp-");
    const { call } = await runnerOn(root);
    // A library that does not exist: every program the loader sees it in says so once on stderr.
    const res = await call("run_process", { args: ["sh", "-c", 'echo "preload=$LD_PRELOAD"'], env: { LD_PRELOAD: `${root}/evil.so` }, wait_ms: 30_000 });
    assert.match(String(res["stdout"]), new RegExp(`preload=${root}/evil.so`));
    assert.equal(String(res["stderr"]).match(/cannot be preloaded/g)?.length, 1, `only the Job's own sh loaded it: ${String(res["stderr"])}`);
  });

  it("WEBCODEX_RUNNER_SANDBOX=required refuses to start without bubblewrap; auto reports why there is none", async () => {
    const root = tmp("wc-nobwrap-");
    await assert.rejects(runnerOn(root, { WEBCODEX_RUNNER_SANDBOX: "required", WEBCODEX_RUNNER_BWRAP: "/nonexistent/bwrap" }), /bubblewrap not found/);
    const { runner } = await runnerOn(root, { WEBCODEX_RUNNER_BWRAP: "/nonexistent/bwrap" });
    assert.equal(runner.containment.sandboxed, false);
    assert.match(runner.containment.sandboxProblem ?? "", /bubblewrap not found at \/nonexistent\/bwrap/);
  });
});

describe("project uids", () => {
  it("are derived from the workspace name, above the subordinate-id ranges, and distinct from every sibling's owner", () => {
    const parent = tmp("wc-uids-");
    const a = projectUid(path.join(parent, "proj-a"));
    assert.equal(projectUid(path.join(parent, "proj-a")), a, "deterministic");
    assert.ok(a >= PROJECT_UID_BASE);
    if (!asRoot) return;
    // A sibling already owned by the uid proj-a would get: proj-a moves on to the next one.
    const squatter = path.join(parent, "other");
    mkdirSync(squatter);
    chownSync(squatter, a, a);
    assert.notEqual(projectUid(path.join(parent, "proj-a")), a);
  });

  it("are distinct across every directory named (one per tenant under webcodex up)", { skip: asRoot ? false : "needs root" }, () => {
    const base = tmp("wc-tenants-");
    const [t1, t2] = [path.join(base, "t1"), path.join(base, "t2")];
    // The same project name under two tenants starts from the same uid: the second moves on.
    const first = createOwnedWorkspaceDir(path.join(t1, "same"), [t1, t2]);
    mkdirSync(t2, { mode: 0o700 });
    const second = createOwnedWorkspaceDir(path.join(t2, "same"), [t1, t2]);
    assert.ok(first && second);
    assert.notEqual(first.uid, second.uid);
    assert.equal(lstatSync(path.join(t2, "same")).uid, second.uid);
    // Looking only at its own parent, it would have taken the first tenant's uid.
    assert.equal(projectUid(path.join(t2, "other-parent", "same")), first.uid);
  });

  it("a created workspace is one fresh directory owned by its project's uid", { skip: asRoot ? false : "needs root" }, () => {
    const parent = tmp("wc-created-");
    chmodSync(parent, 0o700);
    const owner = createOwnedWorkspaceDir(path.join(parent, "ws", "p1"));
    const other = createOwnedWorkspaceDir(path.join(parent, "ws", "p2"));
    assert.ok(owner && other);
    assert.notEqual(owner.uid, other.uid);
    assert.equal(lstatSync(path.join(parent, "ws", "p1")).uid, owner.uid);
    assert.equal(lstatSync(path.join(parent, "ws")).uid, 0);
    assert.equal(lstatSync(path.join(parent, "ws")).mode & 0o777, 0o700);
  });
});
