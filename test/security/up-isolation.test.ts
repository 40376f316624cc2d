/**
 * Tenant isolation under `webcodex up` (six processes; the broker starts one `webcodex runner`
 * process per created project), probed the way a hostile tenant would: as root, with up's
 * default data dir (~/.webcodex/up under a 0700 home), two tenants from a tokens file, each
 * with a created project, and tenant B's Jobs looking for everything of tenant A's, of the
 * stack's and of the database's. Each probe's output is asserted.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { basename, dirname, join } from "node:path";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { findFreeBasePort, SERVICES } from "@webcodex/cli";
import { detectSandbox } from "@webcodex/runner";
import { callTool, cliPath, connectMcp, createBareRepo, createProjectDir, hostPids, sleepTag, startGitDaemon, startRootUp, tempDir } from "../support/index.js";
import type { GitServer, RootUp, UpStack } from "../support/index.js";
import { createProject, shell, twoTenantProjects, upWorkspaces } from "../support/attacks.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;

/** The process's run state letter from /proc (T: stopped). */
const runState = (pid: number): string | undefined => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
  } catch {
    return undefined;
  }
};

describe("two tenants on one webcodex up (root, default data dir)", { skip, timeout: 600_000 }, () => {
  let root: RootUp;
  let up: UpStack;
  let a: Client;
  let b: Client;
  let home: string;
  let workspaces: string;
  let tokensFile: string;
  let projectDir: string;
  let aProject: string;
  let bProject: string;
  let pgData: string | undefined;
  let git: GitServer;
  const aToken = secret("tenant-a");
  const bToken = secret("tenant-b");
  const aFileSecret = secret("a-file");
  const aEnvSecret = secret("a-env");
  const mainSecret = secret("main-file");
  const tag = sleepTag();

  before(async () => {
    const repos = tempDir("wcx-up-git-");
    createBareRepo(repos, "tree", { "README.md": "# cloned\n", "src/a/b/c.txt": "c\n", "src/d.txt": "d\n" });
    git = await startGitDaemon(repos);
    // The --project belongs to the first token's tenant (acme); up's default data dir for root is ~/.webcodex/up, under a 0700 home.
    projectDir = createProjectDir({ "README.md": "# main\n", "main-secret.txt": `${mainSecret}\n` }, { name: "upiso" });
    root = await startRootUp(
      [
        { token: aToken, client_id: "acme", subject: "alice" },
        { token: bToken, client_id: "globex", subject: "bob" },
      ],
      { WEBCODEX_CLONE_ALLOW_HOSTS: "127.0.0.1" },
      projectDir,
    );
    ({ up, home, workspaces, tokensFile } = root);
    const admin = new pg.Client({ connectionString: root.databaseUrl });
    await admin.connect();
    try {
      pgData = String((await admin.query("SHOW data_directory")).rows[0]?.["data_directory"] ?? "");
    } catch {
      pgData = undefined;
    } finally {
      await admin.end();
    }
    [a, b] = await Promise.all([connectMcp(up.mcpUrl, aToken), connectMcp(up.mcpUrl, bToken)]);
    ({ aProject, bProject } = await twoTenantProjects(a, b, { aFile: aFileSecret, aEnv: aEnvSecret, jobTag: tag }));
  });

  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await root?.close();
    await git?.close();
  });

  it("created workspaces belong to distinct project uids, the Jobs run as them, and the data dirs are root's alone", async () => {
    const created = upWorkspaces(workspaces);
    assert.equal(created.length, 2, created.join(","));
    const owners = created.map((d) => lstatSync(d).uid);
    assert.notEqual(owners[0], owners[1]);
    for (const uid of owners) assert.ok(uid >= 200_000_000, `project uid ${uid}`);
    for (const dir of [workspaces, ...readdirSync(workspaces).map((t) => join(workspaces, t))]) {
      assert.equal(lstatSync(dir).uid, 0, dir);
      assert.equal(lstatSync(dir).mode & 0o777, 0o700, dir);
    }
    const idA = Number((await shell(a, aProject, "id -u")).trim());
    const idB = Number((await shell(b, bProject, "id -u")).trim());
    assert.notEqual(idA, idB);
    assert.deepEqual([idA, idB].sort(), [...owners].sort(), "each Job runs as its workspace's owner");
    const status = await callTool(a, "call_runtime_tool", { tool: "get_runtime_status", arguments: { compact: false } });
    assert.equal(status.isError, false, JSON.stringify(status.result));
    const sandboxes = (status.result["runner_details"] as Array<Record<string, unknown>>).map((r) => r["sandbox"]);
    assert.deepEqual(sandboxes, ["bwrap", "bwrap"], "the --project Runner and tenant A's");
  });

  it("tenant B's Job cannot read, list, write or signal anything of tenant A's, of the stack's or of the database's", async () => {
    const aDir = upWorkspaces(workspaces).find((d) => existsSync(join(d, "private.txt")));
    assert.ok(aDir, "tenant A's workspace is on disk");
    const aTenantDir = dirname(aDir);
    const stateDirs = readdirSync(aTenantDir).filter((e) => e.endsWith(".webcodex-runner-state"));
    assert.ok(stateDirs.length > 0, "tenant A's Runner keeps its state beside the workspace");
    const aPids = hostPids(tag);
    // Each probe prints `<name>=refused`, or `<name>=DONE` when the attempt worked.
    const probes: Record<string, string> = {
      read_a_file: `cat ${aDir}/private.txt`,
      list_a_workspace: `ls -A ${aDir} | grep -qx private.txt`,
      write_a_workspace: `echo x > ${aDir}/planted.txt`,
      read_main_project: `cat ${projectDir}/main-secret.txt`,
      write_main_project: `echo x > ${projectDir}/planted.txt`,
      // (bwrap makes the directories above B's own workspace, empty, in the sandbox's root: what is named here is A's.)
      list_workspaces: `ls -A ${workspaces} | grep -qx ${basename(aTenantDir)}`,
      list_a_tenant: `ls -A ${aTenantDir} | grep -qx ${basename(aDir)}`,
      read_a_journal_key: `cat ${aTenantDir}/${stateDirs[0]}/journal.key`,
      plant_a_state: `mkdir -p ${aTenantDir}/${stateDirs[0]}/x`,
      read_tokens: `cat ${tokensFile}`,
      list_home: `ls -A ${home} | grep -qx tokens.json`,
      ...Object.fromEntries(aPids.map((p, i) => [`signal_a_${i}`, `kill -STOP ${p}`])),
      ...(pgData && existsSync(pgData) ? { list_db_files: `ls -A ${pgData} | grep -qx PG_VERSION`, read_db_hba: `cat ${pgData}/pg_hba.conf` } : {}),
    };
    const out = await shell(
      b,
      bProject,
      [
        ...Object.entries(probes).map(([name, cmd]) => `if { ${cmd}; } >/dev/null 2>&1; then echo ${name}=DONE; else echo ${name}=refused; fi`),
        "echo environs=$(grep -l -e A_SECRET -e WEBCODEX_SERVICE_KEY -e WEBCODEX_POSTGRES_URL -e WEBCODEX_RUNNER_TOKEN -e WEBCODEX_DEV_TOKENS_FILE /proc/[0-9]*/environ 2>/dev/null | wc -l)",
        // The control: the same grep finds the Job's own tag in its own processes' environments.
        "echo own=$(grep -l WEBCODEX_JOB_TAG /proc/[0-9]*/environ 2>/dev/null | wc -l)",
        "echo procs=$(ls -d /proc/[0-9]* | wc -l)",
      ].join("\n"),
    );
    for (const name of Object.keys(probes)) assert.match(out, new RegExp(`^${name}=refused$`, "m"), `${name}:\n${out}`);
    assert.ok(Object.keys(probes).length >= (pgData && existsSync(pgData) ? 14 : 12), Object.keys(probes).join(","));
    assert.match(out, /^environs=0$/m, `no environment of the stack or of tenant A's Job is visible:\n${out}`);
    assert.ok(Number(/^own=(\d+)$/m.exec(out)?.[1]) > 0, `the environ probe reads the Job's own:\n${out}`);
    for (const s of [aFileSecret, mainSecret, aToken, bToken, aEnvSecret]) assert.equal(out.includes(s), false, out);
    assert.ok(!existsSync(join(aDir, "planted.txt")) && !existsSync(join(projectDir, "planted.txt")));
    for (const d of stateDirs) assert.ok(!existsSync(join(aTenantDir, d, "x")));
    // Tenant A's Job is still running, not stopped.
    for (const pid of aPids) assert.notEqual(runState(pid), "T", `tenant A's process ${pid} was stopped`);
    const procs = Number(/procs=(\d+)/.exec(out)?.[1]);
    assert.ok(procs > 0 && procs < 8, `B's Job sees only its own processes: ${out}`);
  });

  it("tenant B cannot name tenant A's project through the tools either: answered as a project that does not exist", async () => {
    const listed = await callTool(a, "list_projects", {});
    const aId = (listed.result["projects"] as Array<Record<string, unknown>>).map((p) => String(p["project_id"])).find((id) => id.endsWith(":a-private"));
    assert.ok(aId, JSON.stringify(listed.result));
    const foreign = await callTool(b, "run_shell", { project: aId, command: "cat private.txt", wait_ms: 10_000 });
    const missing = await callTool(b, "run_shell", { project: aId.replace(/a-private$/, "no-such-project"), command: "cat private.txt", wait_ms: 10_000 });
    assert.equal(foreign.isError, true, JSON.stringify(foreign.result));
    assert.equal(JSON.stringify(foreign.result).includes(aFileSecret), false);
    assert.equal(foreign.result["reason_code"], missing.result["reason_code"], JSON.stringify([foreign.result, missing.result]));
    assert.equal(foreign.result["detail_code"], missing.result["detail_code"]);
  });
  it("tenant B's get_runtime_status shows none of tenant A's projects or Runners, nor counts them", async () => {
    const status = await callTool(b, "call_runtime_tool", { tool: "get_runtime_status", arguments: { compact: false } });
    assert.equal(status.isError, false, JSON.stringify(status.result));
    const text = JSON.stringify(status.result);
    assert.doesNotMatch(text, /a-private|agent:acme:|upiso/, text.slice(0, 2000));
    const rows = status.result["runner_details"] as Array<Record<string, unknown>>;
    assert.ok(rows.length >= 1, text.slice(0, 2000));
    for (const r of rows) assert.match(String(r["project_canonical_id"]), /^agent:globex:/);
    // Counted: B's one created project and its Runner, not A's two.
    assert.deepEqual(
      [(status.result["runners"] as Record<string, number>)["total"], (status.result["projects"] as Record<string, number>)["total"]],
      [rows.length, rows.length],
    );
    assert.equal(rows.length, 1, text.slice(0, 2000));
  });

  it("a cloned workspace is born owned by its own project uid: every file, none handed over, the Jobs run as it", async () => {
    const before = new Set(upWorkspaces(workspaces));
    const created = await createProject(b, "b-cloned", { git: { url: `${git.url}/tree.git` } });
    assert.equal(created.isError, false, JSON.stringify(created.result));
    const dir = upWorkspaces(workspaces).find((d) => !before.has(d));
    assert.ok(dir, "the cloned workspace is on disk");
    const uid = lstatSync(dir).uid;
    assert.ok(uid >= 200_000_000, `project uid ${uid}`);
    assert.ok(![...before].some((d) => lstatSync(d).uid === uid), "a uid of its own");
    const owners = new Map<string, number>();
    const walk = (d: string): void => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        owners.set(join(d, e.name), lstatSync(join(d, e.name)).uid);
        if (e.isDirectory()) walk(join(d, e.name));
      }
    };
    walk(dir);
    assert.ok(owners.has(join(dir, "src", "a", "b", "c.txt")), [...owners.keys()].join(","));
    for (const [file, owner] of owners) assert.equal(owner, uid, file);
    const listed = await callTool(b, "list_projects", {});
    const ref = (listed.result["projects"] as Array<Record<string, unknown>>).find((p) => p["name"] === "b-cloned")?.["project_ref"];
    assert.equal(Number((await shell(b, String(ref), "id -u; touch src/a/b/new.txt")).trim()), uid);
    assert.equal(lstatSync(join(dir, "src", "a", "b", "new.txt")).uid, uid);
  });
});

describe("webcodex up with isolation forced unavailable", { skip: asRoot ? false : "needs root" }, () => {
  it("a two-tenant configuration refuses to start, naming what is missing and the ways out, and holds no port", async () => {
    const dir = tempDir("wcx-up-refuse-");
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
    const basePort = await findFreeBasePort(SERVICES.length);
    const child = spawn(process.execPath, [cliPath, "up", "--project", createProjectDir({ "a.txt": "a\n" }), "--port", String(basePort)], {
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: dir,
        WEBCODEX_POSTGRES_URL: process.env["WEBCODEX_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/test",
        WEBCODEX_REDIS_URL: process.env["WEBCODEX_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379",
        WEBCODEX_DEV_TOKENS_FILE: tokens,
        WEBCODEX_RUNNER_BWRAP: "/nonexistent/bwrap",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    assert.equal(code, 1, out);
    assert.doesNotMatch(out, /running|MCP URL/);
    assert.match(out, /refusing to start: configured for 2 tenants/);
    assert.match(out, /bubblewrap not found at \/nonexistent\/bwrap/);
    assert.match(out, /apt-get install bubblewrap/);
    assert.match(out, /Kubernetes/);
    assert.equal(existsSync(join(dir, ".webcodex", "up", "workspaces")), false, "nothing was made");
  });
});
