/**
 * The commands the docs tell a reader to run, run as written. A shell block the docs mark with
 * an HTML comment (invisible when rendered) is extracted and run by bash in one reader's
 * session: the checkout as working directory, a fresh HOME holding the reader's project at
 * ~/src/myapp (a git checkout), aliases and exports carried from block to block as a shell
 * keeps them. Documented placeholders (/path/to/your/project, /path/to/webcodex) are filled in
 * as a reader would. The markers:
 *
 * - `<!-- docs-test: serves-mcp -->`: the block starts a server; it must print its MCP URL and
 *   token, and a real MCP client must see the project there;
 * - `<!-- docs-test: stdio-mcp -->`: the block is an MCP stdio server; a real MCP client
 *   started on it must see the project, and closing it must end it;
 * - `<!-- docs-test: exits-0 [expect=TEXT] -->`: the block must exit 0 (printing TEXT).
 *
 * The reader's environment sets WEBCODEX_PORT=0 so a busy port 8080 on a shared machine does
 * not decide the result; nothing else is added.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { callTool, connectMcp, createProjectDir, repoRoot, runCaptured, tempDir } from "../support/index.js";

interface MarkedBlock {
  file: string;
  line: number;
  mode: "serves-mcp" | "stdio-mcp" | "exits-0";
  expect?: string;
  script: string;
}

/** The marked shell blocks of README.md and docs/*.md, in reading order (README, quick start, the rest). */
function markedBlocks(): MarkedBlock[] {
  const first = ["quickstart.md", "connecting-a-host.md"];
  const docs = readdirSync(join(repoRoot, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort((a, b) => (first.includes(a) ? first.indexOf(a) : 99) - (first.includes(b) ? first.indexOf(b) : 99) || a.localeCompare(b));
  const out: MarkedBlock[] = [];
  for (const file of ["README.md", ...docs.map((d) => `docs/${d}`)]) {
    const text = readFileSync(join(repoRoot, file), "utf8");
    for (const m of text.matchAll(/<!-- docs-test: (serves-mcp|stdio-mcp|exits-0)(?: expect=(.+?))? -->\n```(?:sh|bash)\n([\s\S]*?)```/g)) {
      out.push({
        file,
        line: text.slice(0, m.index).split("\n").length,
        mode: m[1] as MarkedBlock["mode"],
        ...(m[2] !== undefined ? { expect: m[2] } : {}),
        script: m[3] ?? "",
      });
    }
  }
  return out;
}

describe("the docs' commands run as written", { timeout: 240_000 }, () => {
  const blocks = markedBlocks();
  let home = "";
  let env: Record<string, string> = {};
  /** What a shell session keeps from the blocks run so far: aliases and exports. */
  const session: string[] = ["shopt -s expand_aliases"];
  const placeholders = (script: string) =>
    script.split("/path/to/your/project").join(join(home, "src/myapp")).split("/path/to/webcodex").join(repoRoot.replace(/\/$/, ""));
  const scriptOf = (block: MarkedBlock) => [...session, placeholders(block.script)].join("\n");
  const remember = (block: MarkedBlock) => {
    for (const line of block.script.split("\n")) if (/^(alias|export) /.test(line.trim())) session.push(placeholders(line.trim()));
  };
  const stopGroup = (pid: number | undefined) => {
    try {
      if (pid !== undefined) process.kill(-pid, "SIGTERM");
    } catch {
      // already gone
    }
  };
  const children: number[] = [];

  before(() => {
    home = tempDir("wcx-reader-home-");
    const project = createProjectDir({ "README.md": "# myapp\n", "src/index.ts": "export const x = 1;\n" }, { name: "myapp" });
    // The reader's project lives at ~/src/myapp.
    mkdirSync(join(home, "src"), { recursive: true });
    renameSync(project, join(home, "src/myapp"));
    env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, WEBCODEX_PORT: "0" };
  });
  after(() => children.forEach(stopGroup));

  it("the docs mark their runnable blocks (quick start: dev, projects list, stdio; connecting a Host: stdio by hand)", () => {
    const where = blocks.map((b) => `${b.file}:${b.mode}`);
    for (const expected of [
      "docs/quickstart.md:serves-mcp",
      "docs/quickstart.md:exits-0",
      "docs/quickstart.md:stdio-mcp",
      "docs/connecting-a-host.md:stdio-mcp",
    ])
      assert.ok(where.includes(expected), `${expected} in ${where.join(", ")}`);
  });

  it("README's Host commands are the Host guide's, which test/e2e/hosts.test.ts runs with Claude Code (the checkout path as $PWD there)", () => {
    const lines = (file: string) =>
      readFileSync(join(repoRoot, file), "utf8")
        .split("\n")
        .filter((l) => l.startsWith("claude mcp add "))
        .map((l) => l.split("$PWD/tools/cli/bin/webcodex.js").join("<webcodex.js>").trim());
    const readme = lines("README.md");
    assert.ok(readme.length >= 2, "README shows the HTTP and the stdio command");
    const guide = lines("docs/connecting-a-host.md");
    for (const line of readme) assert.ok(guide.includes(line), `${line} is in docs/connecting-a-host.md: ${guide.join(" | ")}`);
    // Two entries under one name fail in Claude Code ("already exists"): the README's names differ.
    const names = readme.map((l) => l.replace(/--transport \S+ /, "").split(/\s+/)[3]);
    assert.equal(new Set(names).size, names.length, names.join(","));
  });

  for (const block of blocks) {
    it(`${block.file}:${block.line} (${block.mode}) runs as written`, async () => {
      const script = scriptOf(block);
      if (block.mode === "exits-0") {
        const run = await runCaptured("bash", ["-c", script], { cwd: repoRoot, env, timeoutMs: 60_000 });
        assert.equal(run.code, 0, `${block.script}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
        if (block.expect !== undefined) assert.ok(run.stdout.includes(block.expect), `prints ${block.expect}: ${run.stdout}`);
      } else if (block.mode === "serves-mcp") {
        const child = spawn("bash", ["-c", script], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
        if (child.pid !== undefined) children.push(child.pid);
        let out = "";
        let err = "";
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        const banner = await new Promise<{ url: string; token: string }>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no MCP URL in 60 s:\n${out}\n${err}`)), 60_000);
          child.stdout.on("data", (d: Buffer) => {
            out += d.toString();
            const url = /MCP URL: (\S+)/.exec(out)?.[1];
            const token = /Token:\s+(\S+)/.exec(out)?.[1];
            if (url && token) {
              clearTimeout(timer);
              resolve({ url, token });
            }
          });
          child.once("exit", (code) => {
            clearTimeout(timer);
            reject(new Error(`exited with ${code} before serving:\n${out}\n${err}`));
          });
        });
        const client = await connectMcp(banner.url, banner.token);
        const listed = await callTool(client, "list_projects", {});
        assert.ok(JSON.stringify(listed.result).includes("agent:local:myapp"), JSON.stringify(listed.result));
        await client.close();
        const exited = new Promise((resolve) => child.once("exit", resolve));
        stopGroup(child.pid);
        await exited;
      } else {
        let stderr = "";
        const transport = new StdioClientTransport({ command: "bash", args: ["-c", script], cwd: repoRoot, env, stderr: "pipe" });
        transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        const client = new Client({ name: "docs-commands", version: "1.0.0" });
        await client.connect(transport);
        const listed = await callTool(client, "list_projects", {});
        assert.ok(JSON.stringify(listed.result).includes("agent:local:myapp"), `${JSON.stringify(listed.result)}\n${stderr}`);
        await client.close();
      }
      remember(block);
    });
  }
});
