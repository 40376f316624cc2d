/**
 * Tenant isolation on one machine, probed the way a hostile tenant would: through `webcodex
 * dev` running as root with its default data dir (under a 0700 home), two tenants, each with
 * a created project, and tenant B's Jobs looking for everything of tenant A's and of the
 * server's. Each probe's output is asserted.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { spawn } from "node:child_process";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import { callTool, cliPath, connectMcp, createProjectDir, startDevServer, tempDir, until } from "../support/index.js";
import type { DevServer } from "../support/index.js";
import { createProject, median, probeLocalTargets, shell, twoTenantProjects } from "../support/attacks.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;

/** Host pids whose command line holds `tag` (a Job's own pids mean nothing outside its pid namespace). */
function hostPids(tag: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(tag)) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** What get_runtime_status says of each Runner's sandbox. */
async function sandboxes(client: Client): Promise<unknown[]> {
  const { isError, result } = await callTool(client, "call_runtime_tool", { tool: "get_runtime_status", arguments: { compact: false } });
  assert.equal(isError, false, JSON.stringify(result));
  return (result["runner_details"] as Array<Record<string, unknown>>).map((r) => r["sandbox"]);
}

describe("two tenants on one webcodex dev (root, default data dir)", { skip }, () => {
  let server: DevServer;
  let a: Client;
  let b: Client;
  let aProject: string;
  let bProject: string;
  let dataDir: string;
  let tokensFile: string;
  const aToken = secret("tenant-a");
  const bToken = secret("tenant-b");
  const aFileSecret = secret("a-file");
  const aEnvSecret = secret("a-env");
  const sleepTag = `97.${String(Math.floor(Math.random() * 1e9)).padStart(9, "1")}`;
  let listener: Server;
  let connections = 0;

  before(async () => {
    // The default data dir of a root server: ~/.webcodex/data under a 0700 home.
    const home = tempDir("wcx-home-");
    chmodSync(home, 0o700);
    dataDir = join(home, ".webcodex", "data");
    mkdirSync(dataDir, { recursive: true });
    tokensFile = join(home, "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { token: aToken, client_id: "acme", subject: "alice" },
          { token: bToken, client_id: "globex", subject: "bob" },
        ],
      }),
      { mode: 0o600 },
    );
    const credentials = join(home, "git-credentials.json");
    writeFileSync(credentials, JSON.stringify({ tenants: { globex: { username: "bot", password: secret("pw") } } }), { mode: 0o600 });
    listener = createServer((s) => {
      connections++;
      s.destroy();
    });
    // Every loopback address, IPv4 and IPv6.
    await new Promise<void>((r) => listener.listen({ port: 0, host: "::", ipv6Only: false }, () => r()));
    server = await startDevServer({
      projectDir: createProjectDir({ "README.md": "# shared\n" }, { name: "iso" }),
      dataDir,
      tokensFile,
      env: { HOME: home, WEBCODEX_GIT_CREDENTIALS_FILE: credentials },
    });
    [a, b] = await Promise.all([connectMcp(server.mcpUrl, aToken), connectMcp(server.mcpUrl, bToken)]);
    ({ aProject, bProject } = await twoTenantProjects(a, b, { aFile: aFileSecret, aEnv: aEnvSecret, jobTag: sleepTag }));
  });

  after(async () => {
    for (const pid of hostPids(sleepTag)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await Promise.all([a?.close(), b?.close()]);
    await server?.stop();
    await new Promise((r) => listener?.close(r));
  });

  it("created workspaces belong to distinct project uids, and nothing else changed owner", async () => {
    const ws = join(dataDir, "workspaces");
    const owners = readdirSync(ws)
      .filter((e) => !e.startsWith("."))
      .map((e) => lstatSync(join(ws, e)).uid);
    assert.equal(owners.length, 2);
    assert.notEqual(owners[0], owners[1]);
    for (const uid of owners) assert.ok(uid >= 200_000_000, `project uid ${uid}`);
    assert.equal(lstatSync(ws).uid, 0);
    assert.equal(lstatSync(ws).mode & 0o777, 0o700);
    assert.equal(lstatSync(dataDir).uid, 0);
    // The data directory and the database are the server's alone.
    assert.equal(lstatSync(dataDir).mode & 0o777, 0o700);
    const pg = join(dataDir, "postgres");
    assert.equal(lstatSync(pg).mode & 0o777, 0o700);
    assert.equal(lstatSync(join(pg, "pg_hba.conf")).mode & 0o777, 0o600);
    assert.deepEqual(await sandboxes(a), ["bwrap", "bwrap"], "the --project Runner and tenant A's");
    const idA = (await shell(a, aProject, "id -u")).trim();
    const idB = (await shell(b, bProject, "id -u")).trim();
    assert.notEqual(idA, idB);
    assert.ok(owners.includes(Number(idA)) && owners.includes(Number(idB)));
  });

  it("tenant B's Job cannot read, list, write or signal anything of tenant A's or of the server", async () => {
    const ws = join(dataDir, "workspaces");
    const aDir = readdirSync(ws)
      .filter((e) => !e.startsWith("."))
      .map((e) => join(ws, e))
      .find((d) => existsSync(join(d, "private.txt")));
    assert.ok(aDir, "tenant A's workspace is on disk");
    const [aPid] = hostPids(sleepTag);
    const out = await shell(
      b,
      bProject,
      [
        `cat ${aDir}/private.txt 2>&1 | head -1; echo ---`,
        `ls ${aDir} 2>&1 | head -1; echo ---`,
        `echo x > ${aDir}/planted.txt 2>&1 || echo write-refused; echo ---`,
        `ls ${ws} 2>&1; echo ---`,
        `cat ${tokensFile} 2>&1 | head -1; echo ---`,
        `ls ${dataDir} 2>&1 | head -3; echo ---`,
        `kill -STOP ${aPid} 2>&1 || echo signal-refused; echo ---`,
        "grep -l A_SECRET /proc/[0-9]*/environ 2>/dev/null | wc -l; echo ---",
        "echo procs=$(ls -d /proc/[0-9]* | wc -l)",
      ].join("; "),
    );
    assert.equal(out.includes(aFileSecret), false, out);
    assert.equal(out.includes(aToken) || out.includes(bToken), false, "a token leaked");
    assert.match(out, /write-refused/);
    assert.match(out, /signal-refused/);
    assert.ok(!existsSync(join(aDir, "planted.txt")));
    // Tenant A's Job is still running (not stopped) and its secret was never seen.
    const state = readFileSync(`/proc/${aPid}/stat`, "utf8").split(") ")[1]?.[0];
    assert.notEqual(state, "T", "tenant A's Job was stopped");
    assert.equal(out.includes(aEnvSecret), false);
    const procs = Number(/procs=(\d+)/.exec(out)?.[1]);
    assert.ok(procs > 0 && procs < 8, `B's Job sees only its own processes: ${out}`);
  });

  it("a journal record planted where the Runner's state sits is not even writable by a Job", async () => {
    const ws = join(dataDir, "workspaces");
    const stateDirs = readdirSync(ws).filter((e) => e.endsWith(".webcodex-runner-state"));
    const out = await shell(
      b,
      bProject,
      stateDirs.map((d) => `mkdir -p ${join(ws, d)}/x 2>/dev/null && echo PLANTED || echo refused`).join("; ") || "echo none",
    );
    assert.doesNotMatch(out, /PLANTED/);
    for (const d of stateDirs) assert.ok(!existsSync(join(ws, d, "x")));
  });

  it("a credential without url_prefix never reaches a local listener; local targets in every spelling are refused alike, in one timing class", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", () => r()));
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const ports = { listener: (listener.address() as { port: number }).port, closed: closedPort };
    const probe = await probeLocalTargets((name, url) => createProject(b, name, { git: { url } }), ports);
    assert.deepEqual([...new Set(probe.codes)], ["clone_target_not_allowed"], probe.codes.join(","));
    assert.equal(probe.codes.length, 11);
    assert.equal(connections, 0, "no connection reached the local listener");
    // What listens on the port named (something or nothing) does not move the answer.
    const [open, shut] = [median(probe.msByPort["listener"]!), median(probe.msByPort["closed"]!)];
    assert.ok(Math.max(open, shut) <= 1.5 * Math.min(open, shut) + 100, `median ms: listener ${open.toFixed(1)}, closed ${shut.toFixed(1)}`);
  });
});

describe("isolation forced unavailable", { skip: asRoot ? false : "needs root" }, () => {
  it("a two-tenant webcodex dev refuses to start, naming what is missing and the ways out", async () => {
    const dir = tempDir("wcx-refuse-");
    const tokens = join(dir, "tokens.json");
    writeFileSync(
      tokens,
      JSON.stringify({
        tokens: [
          { token: secret("a"), client_id: "acme", subject: "a" },
          { token: secret("b"), client_id: "globex", subject: "b" },
        ],
      }),
    );
    const child = spawn(process.execPath, [cliPath, "dev", "--project", createProjectDir({ "a.txt": "a\n" }), "--port", "0", "--data-dir", join(dir, "data")], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir, WEBCODEX_DEV_TOKENS_FILE: tokens, WEBCODEX_RUNNER_BWRAP: "/nonexistent/bwrap" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    assert.notEqual(code, 0, out);
    assert.doesNotMatch(out, /MCP URL/);
    assert.match(out, /refusing to start: configured for 2 tenants/);
    assert.match(out, /bubblewrap not found at \/nonexistent\/bwrap/);
    assert.match(out, /apt-get install bubblewrap/);
    assert.match(out, /Kubernetes/);
  });

  it("a single-principal webcodex dev still starts, and says its Jobs are not sandboxed", async () => {
    const token = secret("single");
    const server = await startDevServer({
      projectDir: createProjectDir({ "a.txt": "a\n" }),
      dataDir: tempDir("wcx-single-"),
      token,
      env: { WEBCODEX_RUNNER_BWRAP: "/nonexistent/bwrap", WEBCODEX_LOG_LEVEL: "warn" },
    });
    const client = await connectMcp(server.mcpUrl, token);
    try {
      await until("the warning", () => /programs run without a sandbox/.test(server.output()));
      assert.deepEqual(await sandboxes(client), ["none: bubblewrap not found at /nonexistent/bwrap (apt-get install bubblewrap)"]);
    } finally {
      await client.close();
      await server.stop();
    }
  });
});
