/**
 * Probes of what a tenant's code, or a tenant's caller, can reach through `webcodex dev`
 * (the embedded server a new user meets first), each run the way an attacker would: through a
 * real MCP client, as a Job, or as raw HTTP. Each shows the platform fails closed. The request
 * flood (test/support/flood.ts) runs on `webcodex up` too: test/security/up-flood.test.ts.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { execFileSync, spawn } from "node:child_process";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { detectContainment } from "@webcodex/runner";
import {
  callTool,
  connectMcp,
  createProjectDir,
  firstProjectRef,
  hostPids,
  killAll,
  pidGone,
  sleepTag,
  startDevServer,
  tempDir,
  until,
} from "../support/index.js";
import type { DevServer } from "../support/index.js";
import { floodWhilePinging, postRaw, rssOf } from "../support/flood.js";

/** What this machine allows a Runner started by this test's user (the dev server detects the same). */
const machine = detectContainment();
const cgroupSkip = machine.mode === "process_tree" ? `no writable cgroup here (${machine.fallbackReason})` : false;

async function runtimeContainment(client: Client): Promise<{ summary: unknown; rows: unknown[] }> {
  const { isError, result } = await callTool(client, "call_runtime_tool", { tool: "get_runtime_status", arguments: { compact: false } });
  assert.equal(isError, false, JSON.stringify(result));
  const rows = (result["runner_details"] as Array<Record<string, unknown>>).map((r) => ({
    containment: r["containment"],
    separate_job_uid: r["separate_job_uid"],
  }));
  return { summary: result["containment"], rows };
}

/** A Runner running as root runs its Jobs as a user of their own: here the owner of the checkout. */
const separateUid = process.getuid?.() === 0;
const CHECKOUT_UID = 4242;

const secret = (label: string) => `${label}-${randomBytes(16).toString("hex")}`;

const writer = secret("writer");
const reader = secret("reader");
const other = secret("other");
/** Given in the environment but never used: only there to be looked for. */
const envDevToken = secret("envdev");
const envRunnerToken = secret("envrunner");

describe("security probes against webcodex dev", () => {
  let server: DevServer;
  let projectDir: string;
  let writerClient: Client;
  let readerClient: Client;
  let project: string;
  /** The read-only caller's own ref for the same project (refs are per principal). */
  let readerProject: string;
  let filterMarker: string;
  let tokensFile: string;
  const leftovers: number[] = [];

  before(async () => {
    projectDir = createProjectDir({ "README.md": "# probes\n", "data.txt": "one\n" }, { name: "probes" });
    // Where a filter the Job user runs could write and the test can look (not in the work tree).
    filterMarker = join(projectDir, ".git", "filter-ran");
    // As a workspace would be placed for a Runner: reachable by the unprivileged Job user.
    chmodSync(dirname(projectDir), 0o755);
    // A writer plants a clean filter; a read-only caller's read must never run it.
    execFileSync("git", ["config", "filter.probe.clean", `touch ${JSON.stringify(filterMarker)}; cat`], { cwd: projectDir });
    writeFileSync(join(projectDir, ".gitattributes"), "* filter=probe\n");
    writeFileSync(join(projectDir, "data.txt"), "two\n");
    // As a developer's checkout is: owned by its user, who is not root (the Job user then).
    if (separateUid) execFileSync("chown", ["-R", `${CHECKOUT_UID}:${CHECKOUT_UID}`, projectDir]);
    tokensFile = join(tempDir("wcx-tokens-"), "tokens.json");
    chmodSync(dirname(tokensFile), 0o755);
    // Readable by the server's user only, as an operator keeps it.
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { token: writer, client_id: "acme", subject: "writer" },
          { token: reader, client_id: "acme", subject: "reader", admission_profile: "read_only" },
          { token: other, client_id: "globex", subject: "someone" },
        ],
      }),
      { mode: 0o600 },
    );
    server = await startDevServer({
      projectDir,
      dataDir: tempDir("wcx-data-"),
      tokensFile,
      token: writer,
      env: {
        WEBCODEX_DEV_TOKEN: envDevToken,
        WEBCODEX_RUNNER_TOKEN: envRunnerToken,
        WEBCODEX_RUNNER_JOB_PIDS_MAX: "64",
        WEBCODEX_RUNNER_JOB_MEMORY_MAX_MB: "128",
      },
    });
    writerClient = await connectMcp(server.mcpUrl, writer);
    readerClient = await connectMcp(server.mcpUrl, reader);
    project = await firstProjectRef(writerClient);
    readerProject = await firstProjectRef(readerClient);
  });

  after(async () => {
    killAll(leftovers);
    await writerClient?.close();
    await readerClient?.close();
    await server?.stop();
  });

  it("a Job reading every /proc/<pid>/environ it can see finds no secret", async () => {
    const needles = [envDevToken, envRunnerToken, writer, reader, other];
    const command = [
      "n=0; for f in /proc/[0-9]*/environ; do if tr '\\0' '\\n' < \"$f\" >/dev/null 2>&1; then n=$((n+1)); fi; done; echo readable=$n",
      "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c '^PATH=' | sed 's/^/parent_path=/'",
      `grep -l -F ${needles.map((n) => `-e ${n}`).join(" ")} /proc/[0-9]*/environ 2>/dev/null | sed 's/^/LEAK /'; true`,
    ].join("; ");
    const { isError, result } = await callTool(writerClient, "run_shell", { project, command, wait_ms: 20_000 });
    assert.equal(isError, false, JSON.stringify(result));
    const output = String(result["output"] ?? result["stdout"] ?? "");
    assert.match(output, /readable=[1-9]/, "the probe could read environments");
    // Under a uid of its own a Job cannot even open its parent's environment; under the Runner's it can and finds nothing.
    assert.match(output, separateUid ? /parent_path=0/ : /parent_path=1/, output.slice(-500));
    assert.doesNotMatch(output, /LEAK/, output);
  });

  it("a Job cannot read the server's tokens file", { skip: separateUid ? false : "Jobs run as the server's own user when it is not root" }, async () => {
    const { isError, result } = await callTool(writerClient, "run_shell", {
      project,
      command: `id -u; cat ${JSON.stringify(tokensFile)} || echo unreadable`,
      wait_ms: 20_000,
    });
    assert.equal(isError, false, JSON.stringify(result));
    const output = String(result["output"] ?? "");
    assert.doesNotMatch(output, /^0$/m, "the Job ran as root");
    assert.match(output, /unreadable/);
    for (const token of [writer, reader, other]) assert.equal(output.includes(token), false, "a token leaked");
  });

  it("a read-only caller's read_workspace_changes never runs a planted git filter", async () => {
    const { isError, result } = await callTool(readerClient, "call_runtime_tool", { tool: "read_workspace_changes", arguments: { project: readerProject } });
    assert.equal(isError, false, JSON.stringify(result));
    assert.ok(JSON.stringify(result).includes("data.txt"), "the read observed the change");
    const hunks = await callTool(readerClient, "call_runtime_tool", { tool: "read_git_diff_hunks", arguments: { project: readerProject } });
    assert.equal(hunks.isError, false, JSON.stringify(hunks.result));
    assert.equal(existsSync(filterMarker), false, "the filter ran");
  });

  it("a setsid child is gone once its Job times out", async () => {
    const tag = sleepTag();
    const { isError, result } = await callTool(writerClient, "run_shell", {
      project,
      command: `setsid sh -c 'echo $$ > escaped.pid; exec sleep ${tag}' </dev/null >/dev/null 2>&1 & sleep 30`,
      timeout_ms: 1_000,
      wait_ms: 20_000,
    });
    assert.equal(isError, false, JSON.stringify(result));
    assert.equal(result["timed_out"], true);
    assert.ok(existsSync(join(projectDir, "escaped.pid")), "the setsid child started");
    await until(`setsid child (sleep ${tag}) to be gone`, () => hostPids(tag).length === 0, 5_000);
  });

  it("get_runtime_status reports how the Runner contains its Jobs", async () => {
    const { summary, rows } = await runtimeContainment(writerClient);
    const separate = separateUid ? 1 : 0;
    assert.deepEqual(summary, { modes: { [machine.mode]: 1 }, separate_job_uid: separate });
    assert.deepEqual(rows, [{ containment: machine.mode, separate_job_uid: separate === 1 }]);
  });

  it("a fork bomb in run_shell is capped by the Job's pids limit, reported, and ends with its Job", { skip: cgroupSkip }, async () => {
    const { isError, result } = await callTool(writerClient, "run_shell", {
      project,
      command: "bomb() { bomb | bomb & }; bomb; sleep 30",
      timeout_ms: 1_500,
      wait_ms: 20_000,
    });
    assert.equal(isError, false, JSON.stringify(result).slice(0, 500));
    assert.equal(result["timed_out"], true);
    assert.deepEqual(result["limit_exceeded"], { pids_max: 64 });
    // The next Job starts normally: nothing of the bomb is left to compete with it.
    const next = await callTool(writerClient, "run_shell", { project, command: "echo fine", wait_ms: 20_000 });
    assert.equal(next.isError, false, JSON.stringify(next.result));
    assert.match(String(next.result["output"]), /fine/);
  });

  it("a memory hog in run_script is killed at the Job's memory limit and reported", { skip: cgroupSkip }, async () => {
    const { isError, result } = await callTool(writerClient, "call_runtime_tool", {
      tool: "run_script",
      arguments: { project, language: "python", code: "x = b'a' * (1024 * 1024 * 1024)\nprint('survived')", wait_ms: 20_000 },
    });
    assert.equal(isError, false, JSON.stringify(result).slice(0, 500));
    assert.equal(result["signal"], "SIGKILL");
    assert.deepEqual(result["limit_exceeded"], { memory_max_bytes: 128 * 1024 * 1024 });
    assert.doesNotMatch(String(result["stdout"] ?? ""), /survived/);
  });

  it("a 160,000-request batch is refused while another tenant's ping p99 stays under 100 ms", async () => {
    const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    // Warm the other tenant's path first, so the probe measures contention only.
    for (let i = 0; i < 3; i++) await postRaw(server.mcpUrl, other, ping);
    // The batch is sent by another process, so this one's event loop only measures pings.
    const bodyFile = join(tempDir("wcx-batch-"), "batch.json");
    writeFileSync(bodyFile, JSON.stringify(Array.from({ length: 160_000 }, (_, id) => ({ jsonrpc: "2.0", id, method: "tools/list" }))));
    const sender = `
      const body = require("node:fs").readFileSync(process.argv[1]);
      fetch(process.argv[2], { method: "POST", body, headers: { authorization: "Bearer " + process.argv[3], "content-type": "application/json", accept: "application/json, text/event-stream" } })
        .then(async (r) => process.stdout.write(JSON.stringify({ status: r.status, text: await r.text() })), (e) => process.stdout.write(JSON.stringify({ status: 0, text: String(e) })));`;
    let done = false;
    const batch = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ["-e", sender, bodyFile, server.mcpUrl, reader], { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.on("error", reject);
      child.on("close", () => resolve(JSON.parse(out || '{"status":0,"text":"no answer"}') as { status: number; text: string }));
    }).finally(() => (done = true));
    // Pings while the batch is sent, refused and the rest of its body read, and at least 100 of
    // them, so that p99 is not the single slowest (one scheduler hiccup on a busy machine).
    const pings: number[] = [];
    while (!done || pings.length < 100) {
      pings.push((await postRaw(server.mcpUrl, other, ping)).ms);
      await new Promise((r) => setTimeout(r, 10));
    }
    const refused = await batch;
    assert.ok(refused.status === 413 || /"error"/.test(refused.text), `status ${refused.status}: ${refused.text.slice(0, 200)}`);
    assert.ok(refused.text.length < 1_000, "refused without answering any of it");
    const sorted = [...pings].sort((a, b) => a - b);
    const p99 = sorted[Math.ceil(sorted.length * 0.99) - 1] ?? Infinity;
    assert.ok(
      p99 < 100,
      `another tenant's ping p99 ${p99.toFixed(1)} ms over ${pings.length} pings during the batch (slowest ${sorted
        .slice(-5)
        .map((p) => p.toFixed(0))
        .join(", ")} ms)`,
    );
    // A batch within the cap is still served.
    const small = await postRaw(server.mcpUrl, reader, JSON.stringify(Array.from({ length: 3 }, (_, id) => ({ jsonrpc: "2.0", id, method: "ping" }))));
    assert.equal(small.status, 200);
    assert.equal((JSON.parse(small.text) as unknown[]).length, 3);
  });

  it("4 callers sending 400,000-key and 4M-deep requests are refused; another tenant's ping p99 stays under 100 ms and RSS comes back", async () => {
    const pid = server.child.pid as number;
    await floodWhilePinging({ label: "webcodex dev", mcpUrl: server.mcpUrl, floodToken: reader, pingToken: other, rss: () => rssOf(pid) });
  });

  it("a Job swapping a file for a symlink to outside never makes read_files return outside content in 10,000 reads", async () => {
    const outside = join(tempDir("wcx-outside-"), "secret.txt");
    writeFileSync(outside, "OUTSIDE-SECRET\n");
    writeFileSync(join(projectDir, "swap.txt"), "inside\n");
    const swapTag = `swapper-${randomBytes(6).toString("hex")}`;
    const script = [
      `const fs = require('node:fs'); const [root, outside] = process.argv.slice(1); /* ${swapTag} */`,
      "fs.writeFileSync(root + '/swapper.pid', String(process.pid));",
      "for (;;) { try {",
      "fs.symlinkSync(outside, root + '/l.tmp'); fs.renameSync(root + '/l.tmp', root + '/swap.txt');",
      "fs.writeFileSync(root + '/f.tmp', 'inside\\n'); fs.renameSync(root + '/f.tmp', root + '/swap.txt');",
      "} catch {} }",
    ].join(" ");
    const started = await callTool(writerClient, "run_shell", {
      project,
      command: `exec ${JSON.stringify(process.execPath)} -e ${JSON.stringify(script)} "$PWD" ${JSON.stringify(outside)}`,
      wait_ms: 100,
      timeout_ms: 600_000,
    });
    assert.equal(started.result["execution_state"], "pending", JSON.stringify(started.result));
    await until("the swapper to start", () => existsSync(join(projectDir, "swapper.pid")));
    const swappers = hostPids(swapTag, process.execPath);
    assert.equal(swappers.length, 1, "the swapper is found by its tag");
    leftovers.push(...swappers);
    let reads = 0;
    let inside = 0;
    try {
      while (reads < 10_000) {
        const { isError, result } = await callTool(readerClient, "read_files", {
          project: readerProject,
          files: Array.from({ length: 64 }, () => ({ path: "swap.txt" })),
        });
        const items = result["items"] as Array<Record<string, unknown>> | undefined;
        assert.ok(!isError && Array.isArray(items) && items.length === 64, JSON.stringify(result).slice(0, 500));
        for (const item of items) {
          reads++;
          const content = typeof item["content"] === "string" ? item["content"] : "";
          assert.equal(content.includes("OUTSIDE"), false, `read ${reads} returned the outside file`);
          if (content.includes("inside")) inside++;
        }
        assert.equal(JSON.stringify(result).includes("OUTSIDE"), false);
      }
    } finally {
      for (const pid of swappers) process.kill(pid, "SIGKILL");
    }
    assert.ok(reads >= 10_000);
    assert.ok(inside > 0, "some reads saw the inside file (the probe ran)");
  });
});

describe("webcodex dev with Job containment forced to process_tree", () => {
  let server: DevServer;
  let client: Client;
  let project: string;
  let projectDir: string;
  const leftovers: number[] = [];

  before(async () => {
    projectDir = createProjectDir({ "README.md": "# fallback\n" }, { name: "fallback" });
    chmodSync(dirname(projectDir), 0o755);
    if (separateUid) execFileSync("chown", ["-R", `${CHECKOUT_UID}:${CHECKOUT_UID}`, projectDir]);
    const token = secret("fallback");
    server = await startDevServer({ projectDir, dataDir: tempDir("wcx-data-"), token, env: { WEBCODEX_RUNNER_CONTAINMENT: "process_tree" } });
    client = await connectMcp(server.mcpUrl, token);
    project = await firstProjectRef(client);
  });

  after(async () => {
    killAll(leftovers);
    await client?.close();
    await server?.stop();
  });

  it("get_runtime_status reports the fallback", async () => {
    const { summary, rows } = await runtimeContainment(client);
    const separate = separateUid ? 1 : 0;
    assert.deepEqual(summary, { modes: { process_tree: 1 }, separate_job_uid: separate });
    assert.deepEqual(rows, [{ containment: "process_tree", separate_job_uid: separate === 1 }]);
  });

  it("a setsid child is still gone once its Job times out (found by its tag)", async () => {
    const tag = sleepTag();
    const { isError, result } = await callTool(client, "run_shell", {
      project,
      command: `setsid sh -c 'echo $$ > escaped.pid; exec sleep ${tag}' </dev/null >/dev/null 2>&1 & sleep 30`,
      timeout_ms: 1_000,
      wait_ms: 20_000,
    });
    assert.equal(isError, false, JSON.stringify(result));
    assert.equal(result["timed_out"], true);
    assert.equal(result["limit_exceeded"], undefined);
    assert.ok(existsSync(join(projectDir, "escaped.pid")), "the setsid child started");
    await until(`setsid child (sleep ${tag}) to be gone`, () => hostPids(tag).length === 0, 5_000);
  });
});
