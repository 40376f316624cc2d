/**
 * A user's project keeps its owner when WebCodex runs as root (a server, a container, a dev VM):
 * `webcodex dev` and `webcodex stdio` serve a git checkout owned by an ordinary user (uid 1000),
 * a real MCP client reads, edits, imports, runs a shell command and a detached Job and uses the
 * git review tools; afterwards every file that was there has its owner unchanged, every file
 * that appeared (the tools', the Jobs', git's own under .git) belongs to that user, and the
 * user's own `git status` and `git add` work (docs/connecting-a-host.md, "Running as root").
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { callTool, cliPath, connectMcp, createProjectDir, firstProjectRef, readRevision, startDevServer, tempDir } from "../support/index.js";

const USER = { uid: 1000, gid: 1000 };
const asRoot = process.getuid?.() === 0;
const skip = asRoot ? false : "needs root: the case is WebCodex running as root on a user's project";

/** uid:gid of every entry below root (root itself included, .git included, symlinks not followed). */
function owners(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      const s = lstatSync(p);
      out.set(relative(root, p), `${s.uid}:${s.gid}`);
      if (e.isDirectory()) walk(p);
    }
  };
  const s = lstatSync(root);
  out.set(".", `${s.uid}:${s.gid}`);
  walk(root);
  return out;
}

/** A git checkout owned by USER, reachable by USER (the scratch parent is root's 0700 otherwise). */
function userProject(name: string): string {
  const dir = createProjectDir(
    {
      "README.md": "# owned\n",
      "src/app.ts": "export const greeting = 'hello';\n",
      "src/old.ts": "export const old = 1;\n",
      "docs/notes.md": "notes\n",
    },
    { name },
  );
  execFileSync("chown", ["-R", `${USER.uid}:${USER.gid}`, dir]);
  chmodSync(dirname(dir), 0o755);
  return dir;
}

/** Runs a command as USER (not root, no supplementary groups), in dir, with a home of its own. */
function asUser(dir: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const home = tempDir("wcx-user-home-");
  execFileSync("chown", [`${USER.uid}:${USER.gid}`, home]);
  chmodSync(dirname(home), 0o755);
  const r = spawnSync("setpriv", [`--reuid=${USER.uid}`, `--regid=${USER.gid}`, "--clear-groups", ...args], {
    cwd: dir,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home },
    encoding: "utf8",
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What a user does through a Host: reads, edits (every change kind), an import, a command, a detached Job, git review. */
async function work(client: Client, project: string): Promise<void> {
  const ok = async (name: string, args: Record<string, unknown>, viaRuntime = false) => {
    const outcome = viaRuntime ? await callTool(client, "call_runtime_tool", { tool: name, arguments: args }) : await callTool(client, name, args);
    assert.equal(outcome.isError, false, `${name}: ${JSON.stringify(outcome.result)}`);
    return outcome.result;
  };
  await ok("read_files", { project, files: [{ path: "README.md" }] });
  const app = await readRevision(client, project, "src/app.ts");
  const old = await readRevision(client, project, "src/old.ts");
  const notes = await readRevision(client, project, "docs/notes.md");
  await ok("edit_project_files", {
    project,
    changes: [
      { kind: "edit", path: "src/app.ts", expected_read_revision: app, edits: [{ replace_exact: { old_text: "hello", new_text: "hi" } }] },
      { kind: "create", path: "src/new/deep/made.ts", content: "export const made = 1;\n" },
      { kind: "delete", path: "src/old.ts", expected_read_revision: old },
      { kind: "move", path: "docs/notes.md", destination: "docs/moved/notes.md", expected_read_revision: notes },
    ],
  });
  await ok("import_host_files", { project, files: [{ path: "imported/host.txt", content: "from the host\n" }] });
  const shell = await ok("run_shell", { project, command: "mkdir -p build/out && echo built > build/out/a.txt && id -u" });
  assert.equal(shell["output"], `${USER.uid}\n`, "commands run as the project's owner");
  const started = await ok("run_detached_process", { project, args: ["sh", "-c", "sleep 0.3; echo job > job-made.txt"] }, true);
  let waited = await ok("wait_for_job_terminal", { project, job_id: started["job_id"], wait_ms: 20_000 }, true);
  while (waited["execution_state"] === "pending") waited = await ok("wait_for_job_terminal", { project, job_id: started["job_id"], wait_ms: 20_000 }, true);
  assert.equal(waited["exit_code"], 0, JSON.stringify(waited));
  // git runs for these (status refreshes the index, diff may write objects): still the user's files.
  await ok("read_workspace_changes", { project }, true);
  await ok("read_git_diff_hunks", { project }, true);
  await ok("read_git_review_summary", { project }, true);
}

function assertOwnersKept(dir: string, before: Map<string, string>): void {
  const now = owners(dir);
  const expected = `${USER.uid}:${USER.gid}`;
  const changed = [...now].filter(([p, o]) => (before.has(p) ? before.get(p) !== o : o !== expected)).map(([p, o]) => `${p} ${before.get(p) ?? "new"} -> ${o}`);
  assert.deepEqual(changed, [], "every file keeps its owner, every new file belongs to the project's owner");
  // The work happened (the check above is not vacuous): new files in the tree and under .git.
  for (const p of ["src/new/deep/made.ts", "docs/moved/notes.md", "imported/host.txt", "build/out/a.txt", "job-made.txt"]) assert.ok(now.has(p), `${p} exists`);
  assert.ok(!now.has("src/old.ts"));
}

function assertUserGitWorks(dir: string): void {
  const status = asUser(dir, ["git", "status", "--porcelain"]);
  assert.equal(status.status, 0, `git status as the owner: ${status.stderr}`);
  assert.doesNotMatch(status.stderr, /dubious ownership/);
  assert.match(status.stdout, /src\/app\.ts/);
  assert.match(status.stdout, /job-made\.txt/);
  const add = asUser(dir, ["git", "add", "-A"]);
  assert.equal(add.status, 0, `git add as the owner: ${add.stderr}`);
  const commit = asUser(dir, ["git", "-c", "user.email=u@example.com", "-c", "user.name=u", "commit", "-qm", "after WebCodex"]);
  assert.equal(commit.status, 0, `git commit as the owner: ${commit.stderr}`);
  assert.equal(readFileSync(join(dir, "src/app.ts"), "utf8"), "export const greeting = 'hi';\n");
}

describe("a user's project keeps its owner when WebCodex runs as root", { skip, timeout: 240_000 }, () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  });

  it("webcodex dev: edits, an import, a command, a Job and git review leave every owner as it was", async () => {
    const dir = userProject("owned-dev");
    const before = owners(dir);
    assert.ok([...before.values()].every((o) => o === `${USER.uid}:${USER.gid}`));
    const server = await startDevServer({ projectDir: dir, dataDir: tempDir("wcx-owned-data-") });
    cleanups.push(() => server.stop());
    const client = await connectMcp(server.mcpUrl, server.token);
    cleanups.push(() => client.close());
    await work(client, await firstProjectRef(client));
    await client.close();
    await server.stop();
    assertOwnersKept(dir, before);
    assertUserGitWorks(dir);
  });

  it("webcodex stdio: the same work leaves every owner as it was", async () => {
    const dir = userProject("owned-stdio");
    const before = owners(dir);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, "stdio", "--project", dir],
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: tempDir("wcx-home-"),
        WEBCODEX_LOG_LEVEL: "warn",
        WEBCODEX_DATA_DIR: tempDir("wcx-owned-stdio-"),
      },
      stderr: "pipe",
    });
    const client = new Client({ name: "webcodex-ownership-tests", version: "1.0.0" });
    await client.connect(transport);
    cleanups.push(() => client.close());
    await work(client, await firstProjectRef(client));
    await client.close();
    assertOwnersKept(dir, before);
    assertUserGitWorks(dir);
  });
});
