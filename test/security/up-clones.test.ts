/**
 * Clones on `webcodex up`, attacked the way a tenant would: as root, with up's default data dir
 * (~/.webcodex/up under a 0700 home), two tenants, a git credential without `url_prefix` in the
 * operator's credentials file, the warm pool on (WEBCODEX_FLEET_WARM_POOL), and one host
 * allow-listed for cloning (127.0.0.2, where the test's git servers listen).
 * - Local clone targets in every spelling (127.0.0.1, [::1], 0x7f000001, localhost) at a
 *   listener, a closed port and Redis, and 169.254.169.254: refused alike, one detail code, one
 *   timing class, and nothing connects.
 * - The credential never reaches a local listener, even one the operator allow-lists.
 * - A project claimed from the warm pool gets a workspace owned by its own project uid.
 * - The hand-over race: while a Job flips every directory it can reach to symlinks at a
 *   root-only canary tree, another tenant's workspace and /etc, new projects are cloned from a
 *   repository of 2,004 files (warm claims and cold starts both); nothing outside the
 *   workspaces changes owner and every cloned file belongs to its project's uid.
 *   WEBCODEX_HANDOVER_RUNS runs (default 100) or as many as WEBCODEX_HANDOVER_BUDGET_MS
 *   (default 45,000; 0: no bound) allows.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server as HttpServer } from "node:http";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectSandbox } from "@webcodex/runner";
import {
  backingServices,
  callTool,
  connectMcp,
  createBareRepo,
  createProjectDir,
  hostPids,
  killAll,
  startGitDaemon,
  startRootUp,
  tempDir,
  until,
} from "../support/index.js";
import type { GitServer, RootUp, UpStack } from "../support/index.js";
import {
  anotherRun,
  assertOwnedBy,
  canaryTree,
  createProject,
  HANDOVER_TREE,
  handoverTimeoutMs,
  median,
  owners,
  probeLocalTargets,
  startFlipper,
  treeOwners,
  upWorkspaces,
} from "../support/attacks.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
/** The allow-listed host: a loopback address of its own, so 127.0.0.1 stays refused. */
const ALLOWED = "127.0.0.2";
const WARM_TITLE = "webcodex runner (warm)";

/** Pids of processes whose command line is exactly `title` (a Runner names what it is there). */
const pidsTitled = (title: string): number[] =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/cmdline`, "utf8").replace(/\0+$/, "").replace(/\0/g, " ") === title;
      } catch {
        return false;
      }
    })
    .map(Number);

describe("clones on webcodex up (root, default data dir, warm pool on)", { skip, timeout: handoverTimeoutMs() }, () => {
  let root: RootUp;
  let up: UpStack;
  let a: Client;
  let b: Client;
  let workspaces: string;
  let git: GitServer;
  let redisPort: number;
  /** Counts every connection to it, on every loopback address, IPv4 and IPv6. */
  let listener: Server;
  let connections = 0;
  /** An allow-listed HTTP "repository" asking for credentials: records what each request carried. */
  let asking: HttpServer;
  const seen: IncomingHttpHeaders[] = [];
  const password = secret("git-password");
  const flipTag = `flipper-${randomBytes(6).toString("hex")}`;
  const leftovers: number[] = [];

  before(async () => {
    const services = await backingServices();
    redisPort = Number(new URL(services.redisUrl).port || 6379);
    const repos = tempDir("wcx-upc-git-");
    createBareRepo(repos, "many", HANDOVER_TREE);
    git = await startGitDaemon(repos, ALLOWED);
    listener = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => listener.listen({ port: 0, host: "::", ipv6Only: false }, () => r()));
    asking = createHttpServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"' }).end();
    });
    await new Promise<void>((r) => asking.listen(0, ALLOWED, () => r()));
    const tokens = { a: secret("tenant-a"), b: secret("tenant-b") };
    root = await startRootUp(
      [
        { token: tokens.a, client_id: "acme", subject: "alice" },
        { token: tokens.b, client_id: "globex", subject: "bob" },
      ],
      (home) => {
        // The operator's git credentials: tenant B's has no url_prefix.
        const credentials = join(home, "git-credentials.json");
        writeFileSync(credentials, JSON.stringify({ tenants: { globex: { username: "bot", password } } }), { mode: 0o600 });
        return { WEBCODEX_GIT_CREDENTIALS_FILE: credentials, WEBCODEX_CLONE_ALLOW_HOSTS: ALLOWED, WEBCODEX_FLEET_WARM_POOL: "2" };
      },
      createProjectDir({ "README.md": "# upc\n" }, { name: "upc" }),
    );
    ({ up, workspaces } = root);
    [a, b] = await Promise.all([connectMcp(up.mcpUrl, tokens.a), connectMcp(up.mcpUrl, tokens.b)]);
  });

  after(async () => {
    killAll([...leftovers, ...hostPids(flipTag)]);
    await Promise.all([a?.close(), b?.close()]);
    await root?.close();
    await git?.close();
    await new Promise((r) => listener?.close(r));
    await new Promise((r) => asking?.close(r));
  });

  it("local clone targets in every spelling are refused alike: one detail code, one timing class, nothing connects", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", () => r()));
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const ports = { listener: (listener.address() as { port: number }).port, closed: closedPort, redis: redisPort };
    // Each call claims a loaded Runner from the warm pool, so every one starts alike.
    const loaded = () => until("a loaded Runner in the warm pool", () => pidsTitled(WARM_TITLE).length > 0, 60_000);
    const probe = await probeLocalTargets((name, url) => createProject(b, name, { git: { url } }), ports, loaded);
    assert.deepEqual([...new Set(probe.codes)], ["clone_target_not_allowed"], probe.codes.join(","));
    assert.equal(probe.codes.length, 16);
    assert.equal(connections, 0, "no connection reached the local listener");
    // One timing class: what listens on the port named (something, nothing, Redis) does not move the answer.
    const medians = Object.fromEntries(Object.entries(probe.msByPort).map(([k, v]) => [k, Math.round(median(v))]));
    const byPort = [medians["listener"]!, medians["closed"]!, medians["redis"]!];
    assert.ok(Math.max(...byPort) <= 1.5 * Math.min(...byPort) + 100, `median ms by port: ${JSON.stringify(medians)}`);
    process.stdout.write(`# up clone refusals: median ms by port ${JSON.stringify(medians)}\n`);
  });

  it("a credential without url_prefix never reaches a local listener, even one the operator allow-lists", async () => {
    const { port } = asking.address() as { port: number };
    const r = await createProject(b, "asks-for-credentials", { git: { url: `http://${ALLOWED}:${port}/private.git` } });
    assert.equal(r.isError, true, JSON.stringify(r.result));
    // The clone went there (the allow-list let it), was asked for a credential, and sent none.
    assert.ok(seen.length > 0, "the allow-listed listener was reached");
    for (const headers of seen) assert.equal(headers["authorization"], undefined, JSON.stringify(headers));
    assert.equal(JSON.stringify(seen).includes(password), false);
    assert.equal(JSON.stringify(r.result).includes(password), false);
  });

  it("a project claimed from the warm pool gets a workspace owned by its own non-root project uid, and its Jobs run as it", async () => {
    const warm = await until("a loaded Runner in the warm pool", () => (pidsTitled(WARM_TITLE).length > 0 ? pidsTitled(WARM_TITLE) : undefined), 60_000);
    const known = new Set(upWorkspaces(workspaces));
    const created = await createProject(a, "warm-claimed", { empty: {} });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const claimed = warm.filter((pid) => !pidsTitled(WARM_TITLE).includes(pid) && existsSync(`/proc/${pid}`));
    assert.ok(claimed.length > 0, "one of the loaded Runners became the project's");
    const dir = upWorkspaces(workspaces).find((d) => !known.has(d));
    assert.ok(dir, "the workspace is on disk");
    const uid = lstatSync(dir).uid;
    assert.ok(uid >= 200_000_000, `project uid ${uid}`);
    for (const other of known) assert.notEqual(lstatSync(other).uid, uid, `${other} has the same uid`);
    const ran = await callTool(a, "run_shell", { project: String(created.result["project_ref"]), command: "id -u; touch mine.txt", wait_ms: 30_000 });
    assert.equal(ran.isError, false, JSON.stringify(ran.result).slice(0, 500));
    assert.equal(Number(String(ran.result["output"]).trim()), uid);
    assert.equal(lstatSync(join(dir, "mine.txt")).uid, uid);
  });

  it("the hand-over race: nothing outside the workspaces changes owner while a Job flips directories during clones", async () => {
    const url = `${git.url}/many.git`;
    const beforeVictim = new Set(upWorkspaces(workspaces));
    const victimTenant = await createProject(a, "victim", { empty: {} });
    assert.equal(victimTenant.isError, false, JSON.stringify(victimTenant.result));
    const before0 = new Set(upWorkspaces(workspaces));
    const victimDir = [...before0].find((d) => !beforeVictim.has(d));
    assert.ok(victimDir, "the other tenant's workspace is on disk");
    const own = await createProject(b, "attacker", { git: { url } });
    assert.equal(own.isError, false, JSON.stringify(own.result));
    const ownRoot = upWorkspaces(workspaces).find((d) => !before0.has(d) && existsSync(join(d, "top0.txt")));
    assert.ok(ownRoot, "the attacker's workspace is on disk");
    const canary = canaryTree(join(tempDir("wcx-upc-victim-"), "etc"));
    const victims = [canary, victimDir, "/etc"];
    const ownersNow = () => [...treeOwners(canary), ...owners([victimDir, "/etc"])];
    const before = ownersNow();
    const upDir = join(workspaces, "..");
    const flipper = await startFlipper(b, String(own.result["project_ref"]), ownRoot, [workspaces, upDir, "/tmp"], victims, flipTag);
    leftovers.push(...flipper.pids);

    const t0 = performance.now();
    const uids: number[] = [];
    let files = 0;
    let run = 0;
    const phases = { create: 0, delete: 0 };
    for (; anotherRun(run, t0); run++) {
      const known = new Set(upWorkspaces(workspaces));
      const tc = performance.now();
      const r = await createProject(b, `clone-${run}`, { git: { url } });
      phases.create += performance.now() - tc;
      assert.equal(r.isError, false, JSON.stringify(r.result).slice(0, 500));
      const dir = upWorkspaces(workspaces).find((d) => !known.has(d));
      assert.ok(dir, `run ${run}: the new workspace is on disk`);
      const uid = lstatSync(dir).uid;
      assert.ok(uid >= 200_000_000, `run ${run}: project uid ${uid}`);
      uids.push(uid);
      files += assertOwnedBy(dir, HANDOVER_TREE, uid, `run ${run}`);
      assert.deepEqual(ownersNow(), before, `run ${run}: something outside the workspaces changed owner`);
      // Deleted once checked: its Runner stops (a machine holds only so many) and its files go.
      const td = performance.now();
      const deleted = await callTool(b, "delete_project", { project: String(r.result["project_ref"]) });
      phases.delete += performance.now() - td;
      assert.equal(deleted.isError, false, JSON.stringify(deleted.result).slice(0, 500));
    }
    const ms = performance.now() - t0;
    const report = await flipper.stop();
    assert.ok(report.flips > 0, `the attack ran: ${JSON.stringify(report)}`);
    assert.deepEqual(ownersNow(), before, "nothing outside the workspaces changed owner");
    assert.equal(new Set(uids).size, uids.length, "every project has a uid of its own");
    assert.ok(files >= run * Object.keys(HANDOVER_TREE).length);
    process.stdout.write(
      `# hand-over (up): ${run} clones, ${files} files, ${report.flips} flips, ${(ms / run).toFixed(0)} ms per run (create ${(phases.create / run).toFixed(0)} ms, delete ${(phases.delete / run).toFixed(0)} ms)\n`,
    );
  });
});
