/**
 * The `webcodex` command as users run it: real processes, their output, exit codes and
 * signals. Argument errors; `webcodex dev` with no token and no data dir given; `webcodex up`
 * against Postgres and Redis, stopped by SIGINT.
 *
 * One concept over 400 lines: the command line as a user meets it, one suite.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Redis } from "ioredis";
import { findFreeBasePort } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  cliPath,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  firstProjectRef,
  pidGone,
  processGroupAlive,
  redisKeyPrefix,
  repoRoot,
  tempDir,
  until,
} from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const baseEnv = () => ({ PATH: process.env["PATH"] ?? "/usr/bin:/bin", WEBCODEX_LOG_LEVEL: "warn" });

function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliPath, ...args], { env: { ...baseEnv(), HOME: tempDir("wcx-home-"), ...env }, timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code) : 0, stdout, stderr });
    });
  });
}

interface Started {
  child: ChildProcess;
  /** Values of the `Name: value` lines printed at start (MCP URL, Data, Token). */
  printed: Record<string, string>;
  stderr: () => string;
}

/** Spawns the CLI and waits for its "MCP URL:" line (the last lines of the banner come with it). */
async function startCli(args: string[], env: Record<string, string>, options: { detached?: boolean } = {}): Promise<Started> {
  const child = spawn(process.execPath, [cliPath, ...args], { env, stdio: ["ignore", "pipe", "pipe"], detached: options.detached ?? false });
  let out = "";
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`webcodex ${args[0]} did not start in 90 s\n${out}\n${err}`)), 90_000);
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      if (/MCP URL: \S+\n[\s\S]*Token: +\S+\n/.test(out) || (/MCP URL: \S+\n/.test(out) && !/Token/.test(out) && /Data: +\S+\n/.test(out))) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`webcodex ${args[0]} exited with ${code}\n${out}\n${err}`));
    });
  });
  const printed = Object.fromEntries([...out.matchAll(/^ +([A-Za-z ]+): +(\S+)$/gm)].map((m) => [m[1] ?? "", m[2] ?? ""]));
  return { child, printed, stderr: () => err };
}

function exited(child: ChildProcess, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve({ code: child.exitCode, signal: child.signalCode });
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit in ${timeoutMs} ms`)), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

/** Live (not zombie) descendants of `pid`, from /proc. */
function descendants(pid: number): Array<{ pid: number; cmd: string }> {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z" || state === "X") continue;
      children.set(Number(ppid), [...(children.get(Number(ppid)) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<{ pid: number; cmd: string }> = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      let cmd = "";
      try {
        cmd = readFileSync(`/proc/${c}/cmdline`, "utf8").split("\0").join(" ").trim();
      } catch {
        continue;
      }
      out.push({ pid: c, cmd });
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Keys under `prefix` in Redis; deleted when `drop` is set. */
async function redisKeys(url: string, prefix: string, drop = false): Promise<string[]> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys = await redis.keys(`${prefix}*`);
    if (drop && keys.length > 0) await redis.del(...keys);
    return keys;
  } finally {
    redis.disconnect();
  }
}

describe("webcodex: bad arguments", () => {
  it("--port that is not an integer in range: exit 2, one line naming the flag and the value, no stack trace", async () => {
    const cases: Array<[string[], string]> = [
      [["dev", "--project", ".", "--port", "abc"], 'webcodex: --port must be an integer from 0 to 65535, got "abc"'],
      [["dev", "--project", ".", "--port", "8080.5"], 'webcodex: --port must be an integer from 0 to 65535, got "8080.5"'],
      [["dev", "--project", ".", "--port=-1"], 'webcodex: --port must be an integer from 0 to 65535, got "-1"'],
      [["dev", "--project", ".", "--port", "65536"], 'webcodex: --port must be an integer from 0 to 65535, got "65536"'],
      [["up", "--project", ".", "--port", "65531"], 'webcodex: --port must be an integer from 1 to 65530 (the first of 6 consecutive ports), got "65531"'],
      [["up", "--project", ".", "--port", "0"], 'webcodex: --port must be an integer from 1 to 65530 (the first of 6 consecutive ports), got "0"'],
    ];
    for (const [args, message] of cases) {
      const { code, stdout, stderr } = await runCli(args);
      assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
      assert.equal(stderr, `${message}\n`, args.join(" "));
      assert.equal(stdout, "");
    }
  });

  it("an unknown option or command is a usage error too (exit 2); a failure that is not one exits 1", async () => {
    const unknown = await runCli(["dev", "--project", ".", "--prot", "80"]);
    assert.deepEqual([unknown.code, unknown.stderr.split("\n").length], [2, 2], unknown.stderr);
    assert.match(unknown.stderr, /^webcodex: Unknown option '--prot'/);
    assert.equal((await runCli(["frobnicate"])).code, 2);
    const noDb = await runCli(["up", "--project", ".", "--port", "8180"]);
    assert.deepEqual([noDb.code, noDb.stderr], [1, "webcodex: webcodex up needs WEBCODEX_POSTGRES_URL and WEBCODEX_REDIS_URL\n"]);
  });
});

describe("webcodex: one command-line convention", () => {
  it("--version prints the version on one line, exit 0", async () => {
    const { code, stdout, stderr } = await runCli(["--version"]);
    const version = (JSON.parse(readFileSync(join(repoRoot, "tools/cli/package.json"), "utf8")) as { version: string }).version;
    assert.deepEqual([code, stdout, stderr], [0, `webcodex ${version}\n`, ""]);
  });

  it("an unknown command, serve without a service, a missing --project directory: each one line naming it, exit 2, nothing on stdout", async () => {
    const missing = join(tempDir("wcx-missing-"), "no-such-dir");
    const cases: Array<[string[], RegExp]> = [
      [["frobnicate"], /^webcodex: unknown command "frobnicate" \(webcodex --help lists the commands\)\n$/],
      [["serve"], /^webcodex: serve needs a service: one of tool-registry, .*gateway\n$/],
      [["serve", "gatewy"], /^webcodex: unknown service "gatewy": one of /],
      [["dev", "--project", missing], new RegExp(`^webcodex: --project ${missing}: no such directory\n$`)],
      [["stdio", "--project", missing], new RegExp(`^webcodex: --project ${missing}: no such directory\n$`)],
      [["up", "--project", missing], new RegExp(`^webcodex: --project ${missing}: no such directory\n$`)],
      [["dev"], /^webcodex: --project DIR is required \(webcodex dev --help\)\n$/],
    ];
    for (const [args, expected] of cases) {
      const { code, stdout, stderr } = await runCli(args);
      assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
      assert.match(stderr, expected, args.join(" "));
      assert.equal(stderr.split("\n").length, 2, `one line: ${stderr}`);
      assert.equal(stdout, "", args.join(" "));
    }
  });

  it("each command's help names the environment variables it reads", async () => {
    const reads: Record<string, string[]> = {
      dev: ["WEBCODEX_DATA_DIR", "WEBCODEX_DEV_TOKEN", "WEBCODEX_LOG_LEVEL", "WEBCODEX_RUNNER_*"],
      stdio: ["WEBCODEX_DATA_DIR", "WEBCODEX_LOG_LEVEL"],
      up: ["WEBCODEX_POSTGRES_URL", "WEBCODEX_REDIS_URL"],
      migrate: ["WEBCODEX_POSTGRES_URL", "WEBCODEX_MIGRATE_WAIT_S"],
      runner: ["WEBCODEX_RUNNER_ROOT"],
    };
    for (const [command, names] of Object.entries(reads)) {
      const { stdout } = await runCli([command, "--help"]);
      for (const name of names) assert.ok(stdout.includes(name), `${command} --help names ${name}`);
    }
  });

  it("make with no target prints the targets", async () => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile("make", ["-s", "--no-print-directory"], { cwd: repoRoot, timeout: 30_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    );
    assert.match(out, /^make run /m);
    assert.match(out, /^make test /m);
  });

  it("the docs never run a bare `npx webcodex` (outside the checkout it is a registry lookup), and README's claude mcp add lines use distinct names", () => {
    const docs = [
      "README.md",
      ...readdirSync(join(repoRoot, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => `docs/${f}`),
    ];
    for (const doc of docs) {
      const text = readFileSync(join(repoRoot, doc), "utf8");
      for (const line of text.split("\n")) assert.ok(!/^\s*(\$ )?npx webcodex\b|&& npx webcodex\b/.test(line), `${doc}: ${line}`);
    }
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    const names = [...readme.matchAll(/^claude mcp add (?:--transport \S+ )?(\S+)/gm)].map((m) => m[1]);
    assert.ok(names.length >= 2, names.join(","));
    assert.equal(new Set(names).size, names.length, `distinct names: ${names.join(",")}`);
  });

  it("make run serves a copy of the sample project under .webcodex/, never the tracked examples/sample-project", async () => {
    const plan = await new Promise<string>((resolve, reject) =>
      execFile("make", ["-n", "--no-print-directory", "run"], { cwd: repoRoot, timeout: 30_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    );
    assert.match(plan, /cp -R examples\/sample-project \.webcodex\/sample-project|webcodex\.js dev --project \.webcodex\/sample-project /);
    assert.match(plan, /webcodex\.js dev --project \.webcodex\/sample-project /);
    assert.doesNotMatch(plan, /--project examples\/sample-project/);
  });
});

describe("webcodex --help", () => {
  it("every command and subcommand answers --help and -h with its usage on stdout and exit 0", async () => {
    const commands = [
      [],
      ["dev"],
      ["stdio"],
      ["up"],
      ["serve"],
      ["serve", "gateway"],
      ["serve", "runner-broker"],
      ["runner"],
      ["migrate"],
      ["friction-report"],
      ["projects"],
      ["projects", "list"],
    ];
    for (const command of commands) {
      for (const flag of ["--help", "-h"]) {
        const { code, stdout, stderr } = await runCli([...command, flag]);
        const line = [...command, flag].join(" ");
        assert.equal(code, 0, `${line}: ${stderr}`);
        assert.equal(stderr, "", line);
        assert.match(stdout, /usage/i, line);
        if (command[0] !== undefined) assert.match(stdout, new RegExp(`webcodex ${command[0]}`), line);
      }
    }
    // Options of the command are named in its help.
    assert.match((await runCli(["up", "--help"])).stdout, /--project DIR/);
    assert.match((await runCli(["stdio", "-h"])).stdout, /stdout carries only MCP JSON-RPC/);
  });
});

describe("webcodex dev on a terminal", () => {
  it("prints readable log lines, not JSON, around the banner (JSON again when WEBCODEX_LOG_FORMAT=json)", async () => {
    const projectDir = createProjectDir({ "a.txt": "a\n" }, { name: "ttydemo" });
    const runOnTty = async (extra: Record<string, string>) => {
      // `script` gives the command a pseudo-terminal for stdout and stderr alike.
      const command = `exec ${process.execPath} ${cliPath} dev --project ${projectDir} --port 0 --data-dir ${tempDir("wcx-data-")}`;
      const child = spawn("script", ["-qfec", command, "/dev/null"], {
        env: { ...baseEnv(), HOME: tempDir("wcx-home-"), WEBCODEX_LOG_LEVEL: "info", WEBCODEX_DEV_TOKEN: "tty-token-at-least-16", TERM: "dumb", ...extra },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
      });
      try {
        await until("the banner", () => /Token: +tty-token-at-least-16/.test(out), 90_000);
      } finally {
        child.kill("SIGTERM");
        child.stdin.end();
      }
      return out.split(/\r?\n/).filter(Boolean);
    };
    const lines = await runOnTty({});
    assert.ok(
      lines.some((l) => /^\d\d:\d\d:\d\d info +registered with broker/.test(l)),
      lines.join("\n"),
    );
    assert.deepEqual(
      lines.filter((l) => l.startsWith("{")),
      [],
    );
    const json = await runOnTty({ WEBCODEX_LOG_FORMAT: "json" });
    assert.ok(
      json.some((l) => l.startsWith("{") && (JSON.parse(l) as { msg?: string }).msg === "registered with broker"),
      json.join("\n"),
    );
  });
});

describe("webcodex dev with no token and no data dir given", () => {
  let home: string;
  let dev: Started;
  let client: Client | undefined;

  before(async () => {
    home = tempDir("wcx-home-");
    const projectDir = createProjectDir({ "README.md": "# defaults\n" }, { name: "defaults" });
    // No WEBCODEX_DEV_TOKEN, WEBCODEX_DATA_DIR or --data-dir: only HOME says where data goes.
    dev = await startCli(["dev", "--project", projectDir, "--port", "0"], { ...baseEnv(), HOME: home });
  });
  after(async () => {
    await client?.close();
    if (dev) {
      dev.child.kill("SIGTERM");
      await exited(dev.child, 15_000).catch(() => dev.child.kill("SIGKILL"));
    }
  });

  it("prints a random token that authenticates; another token and no token get 401", async () => {
    const token = dev.printed["Token"] ?? "";
    assert.match(token, /^[A-Za-z0-9_-]{32}$/, JSON.stringify(dev.printed));
    const mcpUrl = dev.printed["MCP URL"] ?? "";
    client = await connectMcp(mcpUrl, token);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "read_files"));
    assert.equal(await firstProjectRef(client), "~p1");
    const read = await callTool(client, "read_files", { project: "~p1", files: [{ path: "README.md" }] });
    assert.equal((read.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "# defaults\n", JSON.stringify(read.result));

    const initialize = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    });
    const post = (headers: Record<string, string>) =>
      fetch(mcpUrl, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: initialize,
      });
    const wrong = `${token.slice(0, -1)}${token.endsWith("A") ? "B" : "A"}`;
    assert.equal((await post({ authorization: `Bearer ${wrong}` })).status, 401);
    assert.equal((await post({})).status, 401);
    assert.equal((await post({ authorization: `Bearer ${token}` })).status, 200);
  });

  it("keeps its data in ~/.webcodex/data under HOME", () => {
    const expected = join(home, ".webcodex", "data");
    assert.equal(dev.printed["Data"], expected);
    assert.ok(existsSync(join(expected, "postgres", "PG_VERSION")), "the PGlite cluster is there");
  });

  it("SIGTERM stops it with status 0", async () => {
    await client?.close();
    client = undefined;
    dev.child.kill("SIGTERM");
    assert.deepEqual(await exited(dev.child, 15_000), { code: 0, signal: null }, dev.stderr());
  });
});

describe("webcodex up as a real process", () => {
  let database: TestDatabase;
  let prefix: string;
  let up: Started | undefined;
  let client: Client | undefined;
  let redisUrl = "";

  before(async () => {
    redisUrl = (await backingServices()).redisUrl;
    database = await createTestDatabase();
    prefix = redisKeyPrefix();
  });
  after(async () => {
    try {
      await client?.close();
      if (up?.child.pid !== undefined && processGroupAlive(up.child.pid)) process.kill(-up.child.pid, "SIGKILL");
      if (redisUrl) await redisKeys(redisUrl, prefix, true);
    } finally {
      await database?.drop();
    }
  });

  it("serves MCP through six processes on Postgres and Redis; SIGINT stops every one of them", async () => {
    const projectDir = createProjectDir({ "README.md": "# up\n", "src/a.ts": "export const a = 1;\n" }, { name: "updemo" });
    const basePort = await findFreeBasePort();
    up = await startCli(
      ["up", "--project", projectDir, "--port", String(basePort)],
      {
        ...baseEnv(),
        HOME: tempDir("wcx-home-"),
        WEBCODEX_POSTGRES_URL: database.url,
        WEBCODEX_REDIS_URL: redisUrl,
        WEBCODEX_REDIS_KEY_PREFIX: prefix,
      },
      { detached: true },
    );
    const pid = up.child.pid ?? 0;
    assert.equal(up.printed["MCP URL"], `http://127.0.0.1:${basePort + 4}/mcp`);

    // Ready means the --project Runner takes calls: /readyz says so by name when the banner shows.
    const readyz = await fetch((up.printed["MCP URL"] ?? "").replace(/\/mcp$/, "/readyz"));
    const report = (await readyz.json()) as { ready: boolean; checks: Record<string, { ok: boolean }> };
    assert.equal(readyz.status, 200, JSON.stringify(report));
    assert.equal(report.checks["project agent:local:updemo"]?.ok, true, JSON.stringify(report));

    client = await connectMcp(up.printed["MCP URL"] ?? "", up.printed["Token"] ?? "");
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "read_files"));
    const listed = await callTool(client, "list_projects", {});
    assert.deepEqual(listed.result["projects"], [{ project_ref: "~p1", project_id: "agent:local:updemo", name: "updemo", runner_state: "ready" }]);
    const read = await callTool(client, "read_files", { project: "~p1", files: [{ path: "src/a.ts" }] });
    assert.equal(read.isError, false, JSON.stringify(read.result));
    assert.equal((read.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "export const a = 1;\n");
    await client.close();
    client = undefined;

    // The broker kept its state under this stack's Redis key prefix (passed through by `up`).
    assert.ok((await redisKeys(redisUrl, prefix)).length > 0, "keys under the stack's prefix");

    const processes = descendants(pid);
    const services = processes.filter((p) => p.cmd.includes(cliPath));
    assert.deepEqual(services.map((p) => p.cmd.slice(p.cmd.indexOf(cliPath) + cliPath.length + 1)).sort(), [
      "runner",
      "serve audit",
      "serve gateway",
      "serve ref-resolver",
      "serve runner-broker",
      "serve tool-registry",
    ]);
    up.child.kill("SIGINT");
    assert.deepEqual(await exited(up.child, 30_000), { code: 0, signal: null }, up.stderr());
    await until("every process of the stack has exited", () => processes.every((p) => pidGone(p.pid)) && !processGroupAlive(pid), 5_000);
    assert.deepEqual(
      processes.filter((p) => !pidGone(p.pid)),
      [],
    );
  });
});
