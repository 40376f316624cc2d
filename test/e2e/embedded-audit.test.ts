/**
 * ActionAudit in embedded mode (`webcodex dev` as a real process, a real MCP client): every
 * tools/call has exactly one row in the PGlite data dir, naming tool, principal, project,
 * outcome and timing, and no row holds a path, file content or argument value. The rows are
 * read from the data dir after the process stopped (PGlite allows one process at a time).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createPgliteDatabase } from "@webcodex/platform";
import { callTool, connectMcp, createProjectDir, startDevServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome } from "../support/index.js";

const marker = (name: string) => `${name}${randomBytes(4).toString("hex")}`;
const M = {
  dir: marker("secretdir"),
  file: marker("notes"),
  content: marker("CONTENTMARK"),
  replaced: marker("REPLACEDMARK"),
  pattern: marker("PATTERNMARK"),
  missing: marker("missingfile"),
};
const path = `${M.dir}/${M.file}.txt`;

describe("embedded mode: ActionAudit through webcodex dev", () => {
  let projectDir: string;
  let dataDir: string;
  let server: DevServer;
  let client: Client;
  let window: { from: number; to: number };
  const calls: Array<{ tool: string; outcome: ToolOutcome; ms: number }> = [];
  let rows: Array<Record<string, unknown>> = [];

  before(async () => {
    projectDir = createProjectDir({ "README.md": "# audited\n", [path]: `first\n${M.content}\n` }, { name: "auditembedded" });
    dataDir = tempDir("wcx-data-");
    server = await startDevServer({ projectDir, dataDir });
    client = await connectMcp(server.mcpUrl, server.token);
    const call = async (tool: string, args: Record<string, unknown>) => {
      const t0 = performance.now();
      const outcome = await callTool(client, tool, args);
      calls.push({ tool, outcome, ms: performance.now() - t0 });
      return outcome;
    };
    window = { from: Date.now() - 1, to: 0 };
    await call("list_projects", {});
    const read = await call("read_files", { project: "~p1", files: [{ path }] });
    const revision = ((read.result["items"] as Array<Record<string, string>>)[0] ?? {})["read_revision"] ?? "";
    await call("search_project_texts", { project: "~p1", queries: [{ pattern: M.content }, { pattern: M.pattern }] });
    await call("edit_project_files", {
      project: "~p1",
      changes: [{ kind: "edit", path, expected_read_revision: revision, edits: [{ replace_exact: { old_text: M.content, new_text: M.replaced } }] }],
    });
    await call("read_files", { project: "~p99", files: [{ path: `${M.missing}.txt` }] });
    await call("read_files", { project: "~p1", files: `${M.missing}.txt` });
    window.to = Date.now() + 1;
    await client.close();
    // A clean stop flushes the audit batch; then the data dir can be opened here.
    await server.stop();
    assert.equal(server.child.exitCode, 0, "webcodex dev stopped cleanly");
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      rows = (await db.query("SELECT * FROM audit.action_audit ORDER BY started_at, call_id")).rows;
    } finally {
      await db.close();
    }
  });
  after(async () => {
    await client?.close().catch(() => undefined);
    await server?.stop();
  });

  it("the run has successes, an edit that changed the file and failures at two stages", () => {
    assert.deepEqual(
      calls.map((c) => [c.tool, c.outcome.isError]),
      [
        ["list_projects", false],
        ["read_files", false],
        ["search_project_texts", false],
        ["edit_project_files", false],
        ["read_files", true],
        ["read_files", true],
      ],
      JSON.stringify(calls.map((c) => c.outcome.result)),
    );
    assert.equal(readFileSync(join(projectDir, path), "utf8"), `first\n${M.replaced}\n`);
    assert.equal(calls[4]?.outcome.result["reason_code"], "project_not_found");
  });

  it("exactly one row per call, in call order, with tool, principal, project and outcome", () => {
    assert.equal(rows.length, calls.length, JSON.stringify(rows.map((r) => r["tool"])));
    assert.equal(new Set(rows.map((r) => r["call_id"])).size, rows.length, "call ids are unique");
    const project = "agent:local:auditembedded";
    assert.deepEqual(
      rows.map((r) => [r["tool"], r["client_id"], r["subject"], r["project_canonical_id"], r["outcome"], r["reason_code"] ?? null]),
      calls.map((c, i) => [
        // list_projects has no project; the other two failures end before it is resolved.
        c.tool,
        "local",
        "dev",
        i === 0 || i >= 4 ? null : project,
        c.outcome.isError ? "failure" : "success",
        c.outcome.isError ? c.outcome.result["reason_code"] : null,
      ]),
    );
    assert.deepEqual(
      rows.map((r) => r["state_changed"]),
      [false, false, false, true, false, false],
    );
    assert.deepEqual(
      rows.map((r) => r["outcome_unknown"]),
      [false, false, false, false, false, false],
    );
    for (const r of rows.filter((x) => x["outcome"] === "failure")) assert.match(String(r["failure_stage"]), /^[a-z_]+$/);
    assert.notEqual(rows[4]?.["failure_stage"], rows[5]?.["failure_stage"], "an unknown project and invalid arguments fail at different stages");
  });

  it("each row is timed: started within the run, a duration no longer than the call took, stage durations", () => {
    for (const [i, r] of rows.entries()) {
      const at = r["started_at"];
      const started = at instanceof Date ? at.getTime() : Date.parse(String(at));
      assert.ok(started >= window.from && started <= window.to, `row ${i} started at ${started}, outside the run [${window.from}, ${window.to}]`);
      const us = Number(r["duration_us"]);
      assert.ok(us > 0 && us / 1000 <= (calls[i]?.ms ?? 0) + 1, `row ${i}: ${us} us for a call the client timed at ${calls[i]?.ms} ms`);
      assert.equal(typeof r["stage_durations_us"], "object");
    }
    const read = rows[1]?.["stage_durations_us"] as Record<string, number>;
    assert.ok(Object.keys(read).length > 0 && Object.values(read).every((v) => Number.isInteger(v) && v >= 0), JSON.stringify(read));
    assert.ok(
      ["normalization", "resolution", "dispatch", "projection"].every((stage) => stage in read),
      `the stages, by their pipeline names: ${JSON.stringify(read)}`,
    );
  });

  it("no row holds a path, file content, search pattern, argument value, the project dir or the token", () => {
    const text = JSON.stringify(rows);
    for (const value of [...Object.values(M), path, projectDir, server.token, "~p99"]) {
      assert.ok(!text.includes(value), `${value} found in an audit row`);
    }
  });
});
