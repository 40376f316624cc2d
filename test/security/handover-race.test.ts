/**
 * The hand-over race. A workspace the platform makes belongs to its project's uid; once the
 * Runner handed a created tree over by walking it by path, and a Job swapping directories for
 * symlinks during the walk got a directory outside the workspace (aimed at /etc: root) handed
 * to its uid. Now the ownership is set where a Job cannot race it: create_project makes one
 * empty directory owned by the project's uid (or has git clone into one, as that uid, in the
 * sandbox), before any Job of that project can run. This test attacks that code path the way a
 * tenant would: while it clones a repository of 2,004 files into new projects again and again
 * (WEBCODEX_HANDOVER_RUNS, default 100, or as many as WEBCODEX_HANDOVER_BUDGET_MS allows:
 * support/attacks.ts), a Job of the same tenant flips every directory it can
 * reach to symlinks pointing at a root-only tree and at another tenant's workspace, in
 * its own workspace and wherever the new workspaces are made. Nothing outside the workspaces
 * changes owner; every cloned file belongs to its project's uid.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import { callTool, connectMcp, createBareRepo, createProjectDir, hostPids, killAll, startDevServer, startGitDaemon, tempDir } from "../support/index.js";
import type { DevServer, GitServer } from "../support/index.js";
import { anotherRun, assertOwnedBy, canaryTree, createProject, HANDOVER_TREE, owners, startFlipper, treeOwners } from "../support/attacks.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const FILES = HANDOVER_TREE;

describe("the hand-over race: a Job flipping directories to symlinks while new workspaces are handed to their uid", { skip }, () => {
  let server: DevServer;
  let client: Client;
  let other: Client;
  let git: GitServer;
  let dataDir: string;
  let rootOnly: string;
  let otherTenantDir: string;
  const flipTag = `flipper-${randomBytes(6).toString("hex")}`;
  const leftovers: number[] = [];

  before(async () => {
    const home = tempDir("wcx-ho-home-");
    chmodSync(home, 0o700);
    dataDir = join(home, ".webcodex", "data");
    mkdirSync(dataDir, { recursive: true });
    const tokens = { a: `ta-${randomBytes(16).toString("hex")}`, b: `tb-${randomBytes(16).toString("hex")}` };
    const tokensFile = join(home, "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { token: tokens.a, client_id: "acme", subject: "alice" },
          { token: tokens.b, client_id: "globex", subject: "bob" },
        ],
      }),
      { mode: 0o600 },
    );
    const base = tempDir("wcx-ho-git-");
    createBareRepo(base, "many", FILES);
    git = await startGitDaemon(base);
    // The victims: a root-only tree (as /etc is), and another tenant's workspace.
    rootOnly = canaryTree(join(tempDir("wcx-ho-victim-"), "etc"));
    server = await startDevServer({
      projectDir: createProjectDir({ "README.md": "# ho\n" }, { name: "ho" }),
      dataDir,
      tokensFile,
      env: { HOME: home, WEBCODEX_CLONE_ALLOW_HOSTS: "127.0.0.1" },
    });
    [client, other] = await Promise.all([connectMcp(server.mcpUrl, tokens.a), connectMcp(server.mcpUrl, tokens.b)]);
    const o = await createProject(other, "victim", { empty: {} });
    assert.equal(o.isError, false, JSON.stringify(o.result));
    const ws = join(dataDir, "workspaces");
    otherTenantDir = join(
      ws,
      readdirSync(ws).find((e) => !e.startsWith("."))!,
    );
  });

  after(async () => {
    killAll([...leftovers, ...hostPids(flipTag)]);
    await Promise.all([client?.close(), other?.close()]);
    await server?.stop();
    await git?.close();
  });

  it("while a Job flips directories during clones, nothing outside the workspaces changes owner", async () => {
    const victims = [rootOnly, otherTenantDir, "/etc"];
    const before = [...treeOwners(rootOnly), ...owners(victims.slice(1))];
    const victimOwners = () => [...treeOwners(rootOnly), ...owners(victims.slice(1))];
    // The attacker's own project, a clone of the same tree, where its Job runs the flipper.
    const own = await createProject(client, "attacker", { git: { url: `${git.url}/many.git` } });
    assert.equal(own.isError, false, JSON.stringify(own.result));
    const ws = join(dataDir, "workspaces");
    const ownRoot = join(
      ws,
      readdirSync(ws).find((e) => !e.startsWith(".") && existsSync(join(ws, e, "top0.txt")))!,
    );
    // It flips in its own workspace and wherever new workspaces are made (as the Job names them).
    const flipper = await startFlipper(client, String(own.result["project_ref"]), ownRoot, [ws, dataDir, "/tmp"], victims, flipTag);
    leftovers.push(...flipper.pids);

    const t0 = performance.now();
    // Only the projects made from here on count (the attacker's and the victim tenant's exist).
    const uids: number[] = [];
    let files = 0;
    let run = 0;
    for (; anotherRun(run, t0); run++) {
      const known = new Set(readdirSync(ws));
      const r = await createProject(client, `clone-${run}`, { git: { url: `${git.url}/many.git` } });
      assert.equal(r.isError, false, JSON.stringify(r.result).slice(0, 500));
      const dir = readdirSync(ws).find((e) => !known.has(e) && !e.startsWith("."));
      assert.ok(dir, `run ${run}: the new workspace is on disk`);
      const uid = lstatSync(join(ws, dir)).uid;
      uids.push(uid);
      files += assertOwnedBy(join(ws, dir), FILES, uid, `run ${run}`);
      assert.deepEqual(victimOwners(), before, `run ${run}: something outside the workspaces changed owner`);
      // Deleted once checked: 100 clones of thousands of files need not stay on disk.
      const deleted = await callTool(client, "delete_project", { project: String(r.result["project_ref"]) });
      assert.equal(deleted.isError, false, JSON.stringify(deleted.result).slice(0, 500));
    }
    const ms = performance.now() - t0;

    const report = await flipper.stop();
    // The attack ran: it flipped directories (in its own workspace, the only tree it could reach).
    assert.ok(report.flips > 0, JSON.stringify(report));
    assert.deepEqual(victimOwners(), before, "nothing outside the workspaces changed owner");
    assert.equal(new Set(uids).size, uids.length, "every project has a uid of its own");
    assert.ok(run >= 3 && files >= run * Object.keys(FILES).length);
    process.stdout.write(`# hand-over (dev): ${run} clones, ${files} files, ${report.flips} flips, ${(ms / run).toFixed(0)} ms per clone\n`);
  });
});
