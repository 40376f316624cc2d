/**
 * The hand-over race. A workspace the platform makes belongs to its project's uid; once the
 * Runner handed a created tree over by walking it by path, and a Job swapping directories for
 * symlinks during the walk got a directory outside the workspace (aimed at /etc: root) handed
 * to its uid. Now the ownership is set where a Job cannot race it: create_project makes one
 * empty directory owned by the project's uid (or has git clone into one, as that uid, in the
 * sandbox), before any Job of that project can run. This test attacks that code path the way a
 * tenant would: while it clones repositories of many files into new projects again and again
 * (WEBCODEX_HANDOVER_RUNS, default 100), a Job of the same tenant flips every directory it can
 * reach to symlinks pointing at a root-only directory and at another tenant's workspace, in
 * its own workspace and wherever the new workspaces are made. Nothing outside the workspaces
 * changes owner; every cloned file belongs to its project's uid.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import {
  callTool,
  connectMcp,
  createBareRepo,
  createProjectDir,
  executeFollowUp,
  hostPids,
  killAll,
  startDevServer,
  startGitDaemon,
  tempDir,
  until,
} from "../support/index.js";
import type { DevServer, GitServer, ToolOutcome } from "../support/index.js";

const asRoot = process.getuid?.() === 0;
const shq = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const RUNS = Number(process.env["WEBCODEX_HANDOVER_RUNS"] ?? 100);
/** Files per cloned repository: 6 directories of 6, two levels deep, plus a few at the top. */
const FILES: Record<string, string> = {};
for (let d = 0; d < 6; d++) for (let f = 0; f < 6; f++) FILES[`d${d}/s${f % 2}/f${f}.txt`] = `${d}.${f}\n`;
for (let f = 0; f < 4; f++) FILES[`top${f}.txt`] = `${f}\n`;

async function createProject(client: Client, name: string, source: Record<string, unknown>): Promise<ToolOutcome> {
  let outcome = await callTool(client, "create_project", { name, source, wait_ms: 0 });
  for (let i = 0; i < 120 && !outcome.isError && outcome.result["project_state"] === "pending"; i++)
    outcome = await executeFollowUp(client, outcome.result["follow_up"]);
  return outcome;
}

/** The flipper: for its duration, turns every directory it finds under the given roots into a symlink to a victim, and back. */
const FLIPPER = `
const fs = require("node:fs"), path = require("node:path");
const [tag, victims, ...roots] = [process.argv[1], JSON.parse(process.argv[2]), ...process.argv.slice(3)];
const end = Date.now() + 600000; let flips = 0, seen = 0, n = 0;
fs.writeFileSync("flipper.started", tag);
while (Date.now() < end && !fs.existsSync("flipper.stop")) {
  for (const root of roots) {
    let stack = [root];
    while (stack.length) {
      const dir = stack.pop(); let entries;
      try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { continue; }
      if (dir !== root) seen++;
      for (const e of entries) {
        if (!e.isDirectory() || e.name === ".git") continue;
        const full = path.join(dir, e.name);
        try {
          fs.renameSync(full, full + ".flip");
          fs.symlinkSync(victims[n++ % victims.length], full);
          flips++;
          fs.unlinkSync(full);
          fs.renameSync(full + ".flip", full);
        } catch {}
        stack.push(full);
      }
    }
  }
  fs.writeFileSync("flipper.report.tmp", JSON.stringify({ flips, seen })); fs.renameSync("flipper.report.tmp", "flipper.report");
}
fs.writeFileSync("flipper.report", JSON.stringify({ flips, seen }));`;

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
    // The victims: a root-only directory (as /etc is) with a subdirectory, and another tenant's workspace.
    rootOnly = join(tempDir("wcx-ho-victim-"), "etc");
    mkdirSync(join(rootOnly, "sub"), { recursive: true, mode: 0o700 });
    chmodSync(rootOnly, 0o700);
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

  it(`over ${RUNS} clones, nothing outside the workspaces changes owner`, async () => {
    const victims = [rootOnly, otherTenantDir, "/etc"];
    const before = victims.map((v) => ({ v, uid: lstatSync(v).uid, gid: lstatSync(v).gid }));
    const subBefore = lstatSync(join(rootOnly, "sub")).uid;
    // The attacker's own project, a clone of the same tree, where its Job runs the flipper.
    const own = await createProject(client, "attacker", { git: { url: `${git.url}/many.git` } });
    assert.equal(own.isError, false, JSON.stringify(own.result));
    const ownRef = String(own.result["project_ref"]);
    const ws = join(dataDir, "workspaces");
    const ownRoot = join(
      ws,
      readdirSync(ws).find((e) => !e.startsWith(".") && existsSync(join(ws, e, "top0.txt")))!,
    );
    const started = await callTool(client, "run_shell", {
      project: ownRef,
      command: `exec node -e ${shq(FLIPPER)} ${flipTag} '${JSON.stringify(victims)}' "$PWD" ${ws} ${dataDir} /tmp`,
      wait_ms: 100,
      timeout_ms: 900_000,
    });
    assert.equal(started.result["execution_state"], "pending", JSON.stringify(started.result).slice(0, 500));
    await until("the flipper to run", () => existsSync(join(ownRoot, "flipper.started")), 60_000);
    leftovers.push(...hostPids(flipTag));

    const t0 = performance.now();
    // Only the projects made from here on count (the attacker's and the victim tenant's exist).
    const created: Array<{ dir: string; uid: number }> = [];
    let files = 0;
    for (let run = 0; run < RUNS; run++) {
      const known = new Set(readdirSync(ws));
      const r = await createProject(client, `clone-${run}`, { git: { url: `${git.url}/many.git` } });
      assert.equal(r.isError, false, JSON.stringify(r.result).slice(0, 500));
      const dir = readdirSync(ws).find((e) => !known.has(e) && !e.startsWith("."));
      assert.ok(dir, `run ${run}: the new workspace is on disk`);
      const root = join(ws, dir);
      const uid = lstatSync(root).uid;
      created.push({ dir: root, uid });
      for (const rel of Object.keys(FILES)) {
        assert.equal(lstatSync(join(root, rel)).uid, uid, `run ${run}: ${rel} belongs to the project's uid`);
        files++;
      }
      for (const b of before) assert.deepEqual([lstatSync(b.v).uid, lstatSync(b.v).gid], [b.uid, b.gid], `run ${run}: ${b.v} changed owner`);
    }
    const ms = performance.now() - t0;

    // The flipper's workspace is the host's to write: the stop sign goes straight in.
    writeFileSync(join(ownRoot, "flipper.stop"), "");
    const report = await until(
      "the flipper's report",
      () =>
        existsSync(join(ownRoot, "flipper.report"))
          ? (JSON.parse(readFileSync(join(ownRoot, "flipper.report"), "utf8")) as { flips: number; seen: number })
          : undefined,
      60_000,
      200,
    );
    // The attack ran: it flipped directories (in its own workspace, the only tree it could reach).
    assert.ok(report.flips > 0, JSON.stringify(report));
    for (const b of before) assert.deepEqual([lstatSync(b.v).uid, lstatSync(b.v).gid], [b.uid, b.gid], `${b.v} changed owner`);
    assert.equal(lstatSync(join(rootOnly, "sub")).uid, subBefore);
    assert.equal(new Set(created.map((c) => c.uid)).size, created.length, "every project has a uid of its own");
    assert.ok(files >= RUNS * Object.keys(FILES).length);
    process.stdout.write(`# hand-over: ${RUNS} clones, ${files} files, ${report.flips} flips, ${(ms / RUNS).toFixed(0)} ms per clone\n`);
  });
});
