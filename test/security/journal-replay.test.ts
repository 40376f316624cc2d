/**
 * A write-journal record planted wherever a Job can write is never replayed. A Job of a
 * `--project` workspace and a Job of a created project each plant, in every place they can
 * reach (the workspace and dot-directories in it, /tmp, their home, and the paths where the
 * Runner's state lives on the host), a committed record with a key of their own and a MAC made
 * with it, whose after-images would overwrite a file of the workspace and a file outside it.
 * `webcodex dev` (root) restarts on the same data directory: nothing is applied, and no
 * recovery is reported. A control record written with the Runner's own key into its real state
 * directory is replayed, so the planted records were well formed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import { projectIdFor } from "@webcodex/cli";
import { callTool, connectMcp, createProjectDir, executeFollowUp, firstProjectRef, startDevServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome } from "../support/index.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const CHECKOUT_UID = 4244;

/** The record the journal writes (edit-journal.ts), committed, MACed with `key`. */
function forgedRecord(key: Buffer, targets: Array<{ rel: string; target: string }>): { intent: string } {
  const record = {
    version: 1,
    id: `zz${randomBytes(4).toString("hex")}`,
    tool: "edit_project_files",
    started_at: new Date().toISOString(),
    entries: targets.map((t) => ({ rel: t.rel, target: t.target, before: { kind: "absent" }, after: { kind: "file", blob: "b0", mode: 0o644 } })),
    created_dirs: [] as string[],
  };
  const mac = createHmac("sha256", key)
    .update(JSON.stringify({ ...record, mac: undefined }))
    .digest("hex");
  return { intent: JSON.stringify({ ...record, mac }) };
}

/** What the Job runs: plants a self-keyed record under every directory it is given, and says where it could. */
const PLANTER = `
const fs = require("node:fs"), path = require("node:path"), crypto = require("node:crypto");
const [targets, ...dirs] = [JSON.parse(process.argv[1]), ...process.argv.slice(2)];
const key = Buffer.alloc(32, 7);
const record = { version: 1, id: "zz" + crypto.randomBytes(4).toString("hex"), tool: "edit_project_files", started_at: new Date().toISOString(),
  entries: targets.map((t) => ({ rel: t.rel, target: t.target, before: { kind: "absent" }, after: { kind: "file", blob: "b0", mode: 420 } })), created_dirs: [] };
const mac = crypto.createHmac("sha256", key).update(JSON.stringify({ ...record, mac: undefined })).digest("hex");
for (const dir of dirs) {
  try {
    const tx = path.join(dir, "transactions", record.id);
    fs.mkdirSync(tx, { recursive: true });
    fs.writeFileSync(path.join(dir, "journal.key"), key);
    fs.writeFileSync(path.join(tx, "intent.json"), JSON.stringify({ ...record, mac }));
    fs.writeFileSync(path.join(tx, "b0"), "FORGED\\n");
    fs.writeFileSync(path.join(tx, "committed"), "");
    fs.mkdirSync(path.join(dir, "recovered"), { recursive: true });
    console.log("PLANTED " + dir);
  } catch (e) {
    console.log("REFUSED " + dir + " " + e.code);
  }
}`;

async function createProject(client: Client, name: string): Promise<string> {
  let outcome: ToolOutcome = await callTool(client, "create_project", { name, source: { empty: {} }, wait_ms: 0 });
  for (let i = 0; i < 60 && !outcome.isError && outcome.result["project_state"] === "pending"; i++)
    outcome = await executeFollowUp(client, outcome.result["follow_up"]);
  assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
  return String(outcome.result["project_ref"]);
}

describe("a journal record planted wherever a Job can write is never replayed", { skip }, () => {
  let server: DevServer;
  let client: Client;
  let dataDir: string;
  let tokensFile: string;
  let projectDir: string;
  const token = `tok-${randomBytes(16).toString("hex")}`;

  const start = async () => {
    server = await startDevServer({ projectDir, dataDir, tokensFile });
    client = await connectMcp(server.mcpUrl, token);
  };

  before(async () => {
    const home = tempDir("wcx-jr-home-");
    chmodSync(home, 0o700);
    dataDir = join(home, ".webcodex", "data");
    mkdirSync(dataDir, { recursive: true });
    tokensFile = join(home, "tokens.json");
    writeFileSync(tokensFile, JSON.stringify({ tokens: [{ token, client_id: "acme", subject: "alice" }] }), { mode: 0o600 });
    projectDir = createProjectDir({ "victim.txt": "ORIGINAL\n", "control.txt": "ORIGINAL\n" }, { name: "journal" });
    chmodSync(dirname(projectDir), 0o755);
    execFileSync("chown", ["-R", `${CHECKOUT_UID}:${CHECKOUT_UID}`, projectDir]);
    await start();
  });

  after(async () => {
    await client?.close();
    await server?.stop();
  });

  it("planted in the workspace, its dot-directories, /tmp, the Job's home and the state paths: nothing applied after a restart", async () => {
    const outsideDir = tempDir("wcx-jr-outside-");
    const outside = join(outsideDir, "outside.txt");
    writeFileSync(outside, "ORIGINAL\n", { mode: 0o600 });
    const absent = join(outsideDir, "created-by-replay.txt");
    const projects: Array<{ ref: string; root: string; stateDirs: string[] }> = [];
    const pRef = await firstProjectRef(client);
    projects.push({ ref: pRef, root: projectDir, stateDirs: [join(dataDir, "runner-state", projectIdFor(projectDir))] });
    const createdRef = await createProject(client, "created");
    const ws = join(dataDir, "workspaces");
    const createdName = readdirSync(ws).find((e) => !e.startsWith("."));
    assert.ok(createdName, "the created workspace is on disk");
    const createdRoot = join(ws, createdName);
    writeFileSync(join(createdRoot, "victim.txt"), "ORIGINAL\n");
    execFileSync("chown", [`${statUid(createdRoot)}:${statUid(createdRoot)}`, join(createdRoot, "victim.txt")]);
    projects.push({ ref: createdRef, root: createdRoot, stateDirs: [join(ws, `.${createdName}.webcodex-runner-state`)] });

    for (const p of projects) {
      const targets = [
        { rel: "victim.txt", target: join(p.root, "victim.txt") },
        { rel: "outside", target: outside },
        { rel: "absent", target: absent },
      ];
      const dirs = [
        p.root,
        join(p.root, ".webcodex"),
        join(p.root, ".webcodex-runner-state"),
        join(p.root, ".git", "webcodex-runner-state"),
        "$HOME",
        "/tmp",
        "/tmp/webcodex-runner-state",
        join(dirname(p.root), `.${basename(p.root)}.webcodex-runner-state`),
        ...p.stateDirs,
        join(dataDir, "runner-state"),
      ];
      const command = `exec node -e ${shq(PLANTER)} ${shq(JSON.stringify(targets))} ${dirs.map((d) => (d === "$HOME" ? '"$HOME"' : shq(d))).join(" ")}`;
      const { isError, result } = await callTool(client, "run_shell", { project: p.ref, command, wait_ms: 60_000 });
      assert.equal(isError, false, JSON.stringify(result).slice(0, 500));
      const out = String(result["output"] ?? "");
      // The Job could plant in its own places; the Runner's state paths, where it could name them
      // at all, were only its private /tmp's, never the host's.
      assert.match(out, new RegExp(`PLANTED ${escape(p.root)}\\n`), out);
      assert.match(out, /PLANTED \/tmp\n/, out);
      for (const d of p.stateDirs) {
        assert.equal(existsSync(join(d, "journal.key")) && readFileSync(join(d, "journal.key")).equals(Buffer.alloc(32, 7)), false, `${d}: key replaced`);
        assert.deepEqual(existsSync(join(d, "transactions")) ? readdirSync(join(d, "transactions")) : [], [], `${d}: a record reached the host`);
      }
    }

    // Control: the same record with the Runner's own key, in its real state directory, is replayed.
    const realState = projects[0]!.stateDirs[0]!;
    const key = readFileSync(join(realState, "journal.key"));
    const control = forgedRecord(key, [{ rel: "control.txt", target: join(projectDir, "control.txt") }]);
    const id = (JSON.parse(control.intent) as { id: string }).id;
    const tx = join(realState, "transactions", id);
    mkdirSync(tx, { recursive: true });
    writeFileSync(join(tx, "intent.json"), control.intent);
    writeFileSync(join(tx, "b0"), "FORGED\n");
    writeFileSync(join(tx, "committed"), "");

    await client.close();
    await server.stop();
    await start();
    // Both Runners start again (the created one on its first call) and have recovered by their first answer.
    for (const p of projects) {
      const read = await callTool(client, "read_files", { project: p.ref, files: [{ path: "victim.txt" }] });
      assert.equal(read.isError, false, JSON.stringify(read.result).slice(0, 500));
    }
    assert.equal(readFileSync(join(projectDir, "control.txt"), "utf8"), "FORGED\n", "the control record (the Runner's own key) was replayed");
    for (const p of projects) assert.equal(readFileSync(join(p.root, "victim.txt"), "utf8"), "ORIGINAL\n", `${p.root}/victim.txt was overwritten`);
    assert.equal(readFileSync(outside, "utf8"), "ORIGINAL\n", "a file outside the workspace was overwritten");
    assert.equal(existsSync(absent), false, "a file outside the workspace was created");
    // The only recovery reported is the control's.
    const changes = await callTool(client, "call_runtime_tool", { tool: "read_workspace_changes", arguments: { project: pRef } });
    assert.equal(changes.isError, false, JSON.stringify(changes.result).slice(0, 500));
    const recovered = (changes.result["recovered_writes"] ?? []) as Array<{ paths: string[] }>;
    assert.deepEqual(
      recovered.map((r) => r.paths),
      [["control.txt"]],
      JSON.stringify(recovered),
    );
    assert.equal((server.output().match(/interrupted write transaction recovered/g) ?? []).length <= 1, true);
  });
});

function statUid(p: string): number {
  return Number(execFileSync("stat", ["-c", "%u", p], { encoding: "utf8" }).trim());
}
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
