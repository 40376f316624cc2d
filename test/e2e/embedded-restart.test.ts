/**
 * Durable refs across restarts of `webcodex dev` on one data dir.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { callTool, cliPath, connectMcp, createProjectDir, executeFollowUp, startDevServer, tempDir } from "../support/index.js";

/** `webcodex projects list` on a data dir: what an operator sees. */
function operatorList(dataDir: string, ...flags: string[]): Promise<Array<Record<string, unknown>>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [cliPath, "projects", "list", "--data-dir", dataDir, "--format", "json", ...flags],
      { timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve((JSON.parse(stdout) as { projects: Array<Record<string, unknown>> }).projects);
      },
    );
  });
}

async function projectsOf(
  projectDir: string,
  dataDir: string,
): Promise<{ projects: Array<Record<string, string>>; fence: number; readStale?: Record<string, unknown>; recovered?: Record<string, unknown> }> {
  const server = await startDevServer({ projectDir, dataDir });
  try {
    const client = await connectMcp(server.mcpUrl, server.token);
    const { result } = await callTool(client, "list_projects", {});
    const readOld = await callTool(client, "read_files", { project: "~p1", files: [{ path: "README.md" }] });
    const status = await callTool(client, "call_runtime_tool", { tool: "get_runtime_status", arguments: { compact: false } });
    const held = (status.result["runner_details"] as Array<Record<string, unknown>>).find((r) => r["lease_held"] === true);
    // A failure's recovery, executed exactly as returned.
    const recovered = readOld.isError && readOld.result["follow_up"] ? await executeFollowUp(client, readOld.result["follow_up"]) : undefined;
    await client.close();
    return {
      projects: result["projects"] as Array<Record<string, string>>,
      fence: Number(held?.["fence"] ?? 0),
      ...(readOld.isError ? { readStale: readOld.result } : {}),
      ...(recovered && !recovered.isError ? { recovered: recovered.result } : {}),
    };
  } finally {
    await server.stop();
  }
}

describe("project refs are durable across restarts", () => {
  it("the same directory keeps its ref and canonical id; a different directory gets a new ref, never a reused one", async () => {
    const dataDir = tempDir("wcx-data-");
    const a = createProjectDir({ "README.md": "a\n" }, { name: "alpha" });
    const first = await projectsOf(a, dataDir);
    assert.deepEqual(first.projects, [{ project_ref: "~p1", project_id: "agent:local:alpha", name: "alpha", runner_state: "ready" }]);
    const again = await projectsOf(a, dataDir);
    assert.deepEqual(again.projects, first.projects);
    // The embedded broker's fences come from the PGlite high-water mark: never reissued after a restart.
    assert.ok(first.fence > 0, "the local Runner holds a fenced lease");
    assert.ok(again.fence > first.fence, `fence after restart ${again.fence} > ${first.fence}`);

    const b = createProjectDir({ "README.md": "b\n" }, { name: "beta" });
    const withB = await projectsOf(b, dataDir);
    // alpha of the earlier runs has no Runner in this process: the model's list does not offer it.
    assert.deepEqual(withB.projects, [{ project_ref: "~p2", project_id: "agent:local:beta", name: "beta", runner_state: "ready" }]);
    // An operator still sees it: `webcodex projects list` reads the same store.
    const listed = await operatorList(dataDir);
    assert.deepEqual(
      listed.map((p) => [p["canonical_id"], p["name"], p["retired_at"]]),
      [
        ["agent:local:alpha", "alpha", undefined],
        ["agent:local:beta", "beta", undefined],
      ],
    );
    // Its ref is kept, not reused: served again, alpha is ~p1 again.
    assert.deepEqual((await projectsOf(a, dataDir)).projects, first.projects);

    // Another root at the same address is a new incarnation: the old ref fails closed.
    const alphaElsewhere = createProjectDir({ "README.md": "other\n" }, { name: "alpha" });
    const moved = await projectsOf(alphaElsewhere, dataDir);
    const alpha = moved.projects.find((p) => p["project_id"] === "agent:local:alpha");
    assert.equal(alpha?.["project_ref"], "~p3");
    assert.equal(moved.readStale?.["reason_code"], "stale_ref");
    assert.equal((moved.readStale?.["follow_up"] as Record<string, unknown>)["tool"], "list_projects");
    assert.deepEqual(moved.recovered?.["projects"], moved.projects, "the recovery, executed as returned, lists the current refs");
    // The earlier incarnation of alpha is retired: listed only with --all.
    assert.deepEqual(
      (await operatorList(dataDir)).map((p) => [p["canonical_id"], p["incarnation"]]),
      [
        ["agent:local:alpha", 2],
        ["agent:local:beta", 1],
      ],
    );
    const all = await operatorList(dataDir, "--all");
    assert.deepEqual(
      all.map((p) => [p["canonical_id"], p["incarnation"], typeof p["retired_at"]]),
      [
        ["agent:local:alpha", 1, "string"],
        ["agent:local:alpha", 2, "undefined"],
        ["agent:local:beta", 1, "undefined"],
      ],
    );
  });
});
