/**
 * One `webcodex dev` per data dir, and a start-up that checks the stores it opens: a ref
 * counter left behind its issued refs (what two processes on one data dir once produced) is
 * advanced and reported, and create_session works again.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { createPgliteDatabase } from "@webcodex/platform";
import { callTool, cliPath, connectMcp, createProjectDir, firstProjectRef, runCaptured, startDevServer, tempDir } from "../support/index.js";

const createSession = async (url: string, token: string) => {
  const client = await connectMcp(url, token);
  try {
    const project = await firstProjectRef(client);
    return await callTool(client, "call_runtime_tool", { tool: "create_session", arguments: { project } });
  } finally {
    await client.close();
  }
};

describe("webcodex dev: the data dir", () => {
  it("a second webcodex dev on a data dir in use refuses with one line naming the holder; the dir is free again once the first stops", async () => {
    const projectDir = createProjectDir({ "README.md": "hello\n" });
    const dataDir = tempDir("wc-dev-lock-");
    const first = await startDevServer({ projectDir, dataDir });
    let stopped = false;
    try {
      const second = await runCaptured(process.execPath, [cliPath, "dev", "--project", projectDir, "--port", "0", "--data-dir", dataDir], {
        cwd: projectDir,
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: process.env["HOME"] ?? "/tmp", WEBCODEX_DEV_TOKEN: "t-second-0123456789abcdef0123456789" },
        timeoutMs: 60_000,
      });
      assert.equal(second.code, 2, second.stderr);
      assert.equal(second.stdout, "", "it never said it was running");
      const lines = second.stderr.trim().split("\n");
      assert.equal(lines.length, 1, second.stderr);
      assert.match(lines[0] ?? "", new RegExp(`^webcodex: data dir .* is in use by process ${first.child.pid}; pass another --data-dir$`));
      // The first still serves.
      const served = await createSession(first.mcpUrl, first.token);
      assert.equal(served.isError, false, JSON.stringify(served.result));
      await first.stop();
      stopped = true;
      const again = await startDevServer({ projectDir, dataDir });
      await again.stop();
    } finally {
      if (!stopped) await first.stop();
    }
  });

  it("a session counter behind its issued refs is advanced at start-up, logged, and create_session issues the next code", async () => {
    const projectDir = createProjectDir({ "README.md": "hello\n" });
    const dataDir = tempDir("wc-dev-invariants-");
    const before = await startDevServer({ projectDir, dataDir });
    const codes: string[] = [];
    try {
      for (let i = 0; i < 3; i++) codes.push(String((await createSession(before.mcpUrl, before.token)).result["session_ref"]));
    } finally {
      await before.stop();
    }
    assert.deepEqual(codes, ["~s1", "~s2", "~s3"]);
    // The state two processes on one data dir left: refs 1-3 issued, the counter at 1.
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      await db.query("ALTER TABLE refs.ref_counters DISABLE TRIGGER ref_counters_only_advance");
      await db.query("UPDATE refs.ref_counters SET last_code = 1 WHERE kind = 'session'");
      await db.query("ALTER TABLE refs.ref_counters ENABLE TRIGGER ref_counters_only_advance");
    } finally {
      await db.close();
    }
    const after = await startDevServer({ projectDir, dataDir });
    try {
      const repaired = after
        .output()
        .split("\n")
        .filter((l) => l.includes("ref counter was behind its issued refs"));
      assert.equal(repaired.length, 1, after.output());
      assert.match(repaired[0] ?? "", /"kind":"session".*"counter_was":1.*"counter_now":3/);
      const next = await createSession(after.mcpUrl, after.token);
      assert.equal(next.isError, false, JSON.stringify(next.result));
      assert.equal(next.result["session_ref"], "~s4");
    } finally {
      await after.stop();
    }
  });
});
