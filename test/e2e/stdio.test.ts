/**
 * `webcodex stdio`: the embedded default over the MCP stdio transport, driven by the SDK's
 * StdioClientTransport as a local Host drives it. The same tools, refs and follow-ups as over
 * HTTP; stdout carries nothing but JSON-RPC; closing stdin stops every process it started.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { callTool, cliPath, createProjectDir, tempDir, until } from "../support/index.js";

/** Every live descendant of `pid` (from /proc). */
function descendantsOf(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid ...: comm may hold spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z") parentOf.set(Number(name), Number(fields[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parentOf)
      if (parent === p) {
        out.push(child);
        walk(child);
      }
  };
  walk(pid);
  return out;
}

const alive = (pid: number) => {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8");
    return state.slice(state.lastIndexOf(")") + 2, state.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};

const stdioEnv = (dataDir: string) => ({
  PATH: process.env["PATH"] ?? "/usr/bin:/bin",
  HOME: tempDir("wcx-home-"),
  // info, so there are log lines that would break the protocol if they reached stdout
  WEBCODEX_LOG_LEVEL: "info",
  WEBCODEX_DATA_DIR: dataDir,
});

describe("webcodex stdio through the SDK stdio client", () => {
  const projectDir = createProjectDir({ "src/app.ts": 'export const greeting = "hello";\n', "README.md": "# demo\n" }, { name: "stdio-demo" });
  const dataDir = tempDir("wcx-stdio-data-");
  let transport: StdioClientTransport;
  let client: Client;
  const protocolErrors: Error[] = [];
  let stderr = "";

  before(async () => {
    transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, "stdio", "--project", projectDir],
      env: stdioEnv(dataDir),
      stderr: "pipe",
    });
    transport.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    client = new Client({ name: "webcodex-stdio-tests", version: "1.0.0" });
    // Every stdout line that is not a JSON-RPC message surfaces here (the SDK's ReadBuffer).
    client.onerror = (error) => protocolErrors.push(error);
    await client.connect(transport);
  });
  after(async () => {
    await client?.close();
  });

  let project = "";
  it("list_projects shows the --project directory under the local principal", async () => {
    const listed = await callTool(client, "list_projects", {});
    assert.equal(listed.isError, false, JSON.stringify(listed.result));
    const projects = listed.result["projects"] as Array<Record<string, string>>;
    assert.equal(projects.length, 1);
    assert.equal(projects[0]?.["project_id"], "agent:local:stdio-demo");
    assert.match(projects[0]?.["project_ref"] ?? "", /^~p\d+$/);
    project = projects[0]?.["project_ref"] ?? "";
  });

  it("read_files then a guarded edit with the read_revision it returned", async () => {
    const read = await callTool(client, "read_files", { project, files: [{ path: "src/app.ts" }] });
    assert.equal(read.isError, false, JSON.stringify(read.result));
    const item = (read.result["items"] as Array<Record<string, unknown>>)[0] ?? {};
    assert.equal(item["content"], 'export const greeting = "hello";\n');
    const edit = await callTool(client, "edit_project_files", {
      project,
      changes: [
        { kind: "edit", path: "src/app.ts", expected_read_revision: item["read_revision"], edits: [{ replace_exact: { old_text: "hello", new_text: "hi" } }] },
      ],
    });
    assert.equal(edit.isError, false, JSON.stringify(edit.result));
    assert.equal(readFileSync(join(projectDir, "src/app.ts"), "utf8"), 'export const greeting = "hi";\n');
    // The same revision again is stale now: the guard holds over stdio too.
    const stale = await callTool(client, "edit_project_files", {
      project,
      changes: [
        { kind: "edit", path: "src/app.ts", expected_read_revision: item["read_revision"], edits: [{ replace_exact: { old_text: "hi", new_text: "hey" } }] },
      ],
    });
    assert.equal(stale.isError, true);
    assert.equal(stale.result["state_changed"], false);
    assert.equal(readFileSync(join(projectDir, "src/app.ts"), "utf8"), 'export const greeting = "hi";\n');
  });

  it("run_shell still running at wait_ms is a pending Job; its follow-up, run exactly as returned, reaches the result", async () => {
    const first = await callTool(client, "run_shell", { project, command: "sleep 1.5; echo finished-$((6*7))", wait_ms: 200 });
    assert.equal(first.isError, false, JSON.stringify(first.result));
    assert.equal(first.result["execution_state"], "pending");
    const f = first.result["follow_up"] as { follow_up_kind: string; tool: string; arguments: Record<string, unknown> };
    assert.equal(f.follow_up_kind, "mechanically_followable");
    let next = await callTool(client, f.tool, f.arguments);
    for (let i = 0; i < 10 && next.result["execution_state"] === "pending"; i++) next = await callTool(client, f.tool, f.arguments);
    assert.equal(next.isError, false, JSON.stringify(next.result));
    assert.match(JSON.stringify(next.result), /finished-42/);
  });

  it("nothing but JSON-RPC reached stdout, while logs went to stderr", () => {
    assert.deepEqual(
      protocolErrors.map((e) => e.message),
      [],
    );
    assert.match(stderr, /serving MCP over stdio/);
  });

  it("closing the client (stdin) stops the server and every process it started, a running Job included", async () => {
    const pid = transport.pid;
    assert.ok(pid, "the server process is running");
    const started = await callTool(client, "run_shell", { project, command: "sleep 120", wait_ms: 100 });
    assert.equal(started.result["execution_state"], "pending");
    const family = await until("the Job's sleep is a descendant", () => {
      const d = descendantsOf(pid);
      return d.some((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, "utf8").startsWith("sleep");
        } catch {
          return false;
        }
      })
        ? d
        : undefined;
    });
    await client.close();
    await until("the server and all its descendants are gone", () => !alive(pid) && family.every((p) => !alive(p)), 15_000);
  });
});

describe("webcodex stdio lifecycle", () => {
  it("exits 0 on its own when stdin closes, leaving no process behind", async () => {
    const projectDir = createProjectDir({ "a.txt": "a\n" }, { name: "stdio-eof" });
    const child = spawn(process.execPath, [cliPath, "stdio", "--project", projectDir], {
      env: stdioEnv(tempDir("wcx-stdio-data-")),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    // Initialize and run one command, so the spawn host and the embedded database are up.
    const send = (m: unknown) => child.stdin.write(JSON.stringify(m) + "\n");
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    await until("initialize answered", () => out.includes('"id":1'), 60_000);
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list_projects", arguments: {} } });
    await until("list_projects answered", () => out.includes('"id":2'), 30_000);
    const family = descendantsOf(child.pid ?? 0);
    child.stdin.end();
    const code = await Promise.race([exit, new Promise<"hung">((r) => setTimeout(() => r("hung"), 20_000))]);
    if (code === "hung") child.kill("SIGKILL");
    assert.equal(code, 0, err);
    await until("no descendant left", () => family.every((p) => !alive(p)), 5_000);
    for (const line of out.split("\n").filter(Boolean)) assert.equal((JSON.parse(line) as { jsonrpc?: string }).jsonrpc, "2.0", line);
  });

  it("--project is required: a usage error on stderr, exit 2, nothing on stdout", async () => {
    const child = spawn(process.execPath, [cliPath, "stdio"], { env: stdioEnv(tempDir("wcx-stdio-data-")), stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    assert.equal(code, 2);
    assert.equal(out, "");
    assert.match(err, /--project DIR is required/);
  });
});
