/**
 * Validation tools end to end on `webcodex dev` through a real MCP client: a guarded edit
 * breaks the build, project_validate says exactly where, the fix makes it pass; results are
 * sparse and far smaller than the raw output of the same commands through run_shell. A run
 * still going at wait_ms is a pending Job whose follow-up, executed as returned, gives the
 * same structured result; a tool whose toolchain the Runner lacks is refused before dispatch.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { symlinkSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createPgliteDatabase } from "@webcodex/platform";
import { fixtureFiles, sharedNodeModules } from "@webcodex/runner/validation-fixtures";
import { randomBytes } from "node:crypto";
import type { DistributedStack } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  firstProjectRef,
  openDevProject,
  readRevision,
  startDevServer,
  startTestStack,
  tempDir,
} from "../support/index.js";
import type { DevProject, DevServer, TestDatabase, ToolOutcome } from "../support/index.js";

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe("validation tools through a real MCP client (embedded)", () => {
  let dev: DevProject;
  let project: string;
  const validate = (args: Record<string, unknown> = {}) =>
    callTool(dev.client, "call_runtime_tool", { tool: "project_validate", arguments: { project, ...args } });

  before(async () => {
    dev = await openDevProject(
      { ...fixtureFiles("node", false), ".gitignore": "node_modules\n" },
      {
        name: "validate",
        prepare: (dir) => symlinkSync(sharedNodeModules(), join(dir, "node_modules"), "dir"),
      },
    );
    project = dev.project;
  });
  after(async () => {
    await dev?.close();
  });

  it("break the build with a guarded edit, validate, fix, validate: sparse, decision-ready results", async (t) => {
    const clean = await validate({ wait_ms: 30_000 });
    assert.equal(clean.isError, false, JSON.stringify(clean.result));
    assert.equal(clean.result["status"], "passed", JSON.stringify(clean.result));
    for (const k of ["execution_state", "job_id", "exit_code", "duration_ms", "started_at"])
      assert.equal(clean.result[k], undefined, `a clean result omits ${k}`);
    assert.deepEqual(
      (clean.result["checks"] as Array<Record<string, unknown>>).map((c) => [c["check"], c["status"]]),
      [
        ["typecheck", "passed"],
        ["lint", "passed"],
        ["test", "passed"],
      ],
    );

    const revision = await readRevision(dev.client, project, "src/index.ts");
    const broken = await callTool(dev.client, "edit_project_files", {
      project,
      changes: [
        {
          kind: "edit",
          path: "src/index.ts",
          expected_read_revision: revision,
          edits: [{ replace_exact: { old_text: "  return a + b;", new_text: '  const label: number = "sum";\n  return a + b + label;' } }],
        },
      ],
    });
    assert.equal(broken.isError, false, JSON.stringify(broken.result));

    const failed = await validate({ wait_ms: 30_000 });
    assert.equal(failed.result["status"], "failed", JSON.stringify(failed.result));
    const first = (failed.result["failures"] as Array<Record<string, unknown>>)[0];
    assert.deepEqual([first?.["check"], first?.["path"], first?.["line"], first?.["code"]], ["typecheck", "src/index.ts", 2, "TS2322"]);
    assert.equal(failed.result["job_id"], undefined, "a synchronous verdict carries no Job bookkeeping");

    // The raw output of the same commands, as an agent would otherwise read it.
    const commands = (failed.result["checks"] as Array<Record<string, string>>).map((c) => c["command_summary"]).join("; ");
    const raw = await callTool(dev.client, "run_shell", { project, command: `PATH=node_modules/.bin:$PATH; ${commands}`, wait_ms: 30_000 });
    assert.match(String(raw.result["output"] ?? raw.result["stdout"]), /TS2322/u, "the raw run saw the same error");
    t.diagnostic(
      `project_validate failed result: ${bytes(failed.result)} B; run_shell raw output of the same commands: ${bytes(raw.result)} B; passed result: ${bytes(clean.result)} B`,
    );
    assert.ok(bytes(failed.result) < bytes(raw.result), `${bytes(failed.result)} B structured vs ${bytes(raw.result)} B raw`);

    const revision2 = await readRevision(dev.client, project, "src/index.ts");
    const fixed = await callTool(dev.client, "edit_project_files", {
      project,
      changes: [
        {
          kind: "edit",
          path: "src/index.ts",
          expected_read_revision: revision2,
          edits: [{ replace_exact: { old_text: '  const label: number = "sum";\n  return a + b + label;', new_text: "  return a + b;" } }],
        },
      ],
    });
    assert.equal(fixed.isError, false);
    const again = await validate({ wait_ms: 30_000 });
    assert.equal(again.result["status"], "passed", JSON.stringify(again.result));
    assert.deepEqual(again.result["failures"], []);
  });

  it("a run still going at wait_ms is a pending Job; its follow-up, executed as returned, gives the structured result", async () => {
    const first = await validate({ checks: ["typecheck"], wait_ms: 0 });
    assert.equal(first.result["execution_state"], "pending", JSON.stringify(first.result));
    const f = first.result["follow_up"] as { follow_up_kind: string; tool: string; arguments: Record<string, unknown> };
    assert.equal(f.follow_up_kind, "mechanically_followable");
    let next: ToolOutcome = await callTool(dev.client, f.tool, f.arguments);
    while (next.result["execution_state"] === "pending") next = await callTool(dev.client, f.tool, f.arguments);
    assert.equal(next.result["status"], "passed", JSON.stringify(next.result));
    assert.deepEqual(
      (next.result["checks"] as Array<Record<string, unknown>>).map((c) => c["check"]),
      ["typecheck"],
    );
  });

  it("bad input fails closed before anything runs", async () => {
    const outside = await validate({ paths: ["../elsewhere"] });
    assert.equal(outside.isError, true);
    assert.equal(outside.result["reason_code"], "path_outside_project");
    const unknown = await validate({ checks: ["format"] });
    assert.equal(unknown.isError, true);
    assert.equal(unknown.result["reason_code"], "invalid_value");
  });
});

describe("a validation tool whose toolchain the Runner lacks", () => {
  let dev: DevProject;
  before(async () => {
    dev = await openDevProject(fixtureFiles("rust", true), { name: "norust", env: { WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "validation_rust_v1" } });
  });
  after(async () => {
    await dev?.close();
  });

  it("is refused before dispatch with capability_missing naming the capability", async () => {
    const r = await callTool(dev.client, "call_runtime_tool", { tool: "cargo_check", arguments: { project: dev.project } });
    assert.equal(r.isError, true);
    assert.deepEqual([r.result["reason_code"], r.result["detail_code"], r.result["state_changed"]], ["capability_missing", "validation_rust_v1", false]);
    // project_validate still runs what it can and says what it skipped and why.
    const v = await callTool(dev.client, "call_runtime_tool", { tool: "project_validate", arguments: { project: dev.project, wait_ms: 30_000 } });
    assert.deepEqual(v.result["skipped"], [
      { check: "typecheck", provider: "rust", reason: "capability_missing", capability: "validation_rust_v1" },
      { check: "test", provider: "rust", reason: "capability_missing", capability: "validation_rust_v1" },
    ]);
    assert.equal(v.result["status"], "error");
  });
});

describe("validation results in the session handoff and the audit row", () => {
  let server: DevServer;
  let client: Client;
  let dataDir: string;
  let handoff: Record<string, unknown> = {};
  let validated: ToolOutcome;
  let rows: Array<Record<string, unknown>> = [];

  before(async () => {
    const projectDir = createProjectDir(fixtureFiles("go", true), { name: "gosession" });
    dataDir = tempDir("wcx-data-");
    server = await startDevServer({ projectDir, dataDir });
    client = await connectMcp(server.mcpUrl, server.token);
    const project = await firstProjectRef(client);
    const session = await callTool(client, "create_session", { project, title: "validate" });
    const sessionId = String(session.result["session_ref"]);
    validated = await callTool(client, "call_runtime_tool", { tool: "project_validate", arguments: { project, session_id: sessionId, wait_ms: 30_000 } });
    handoff = (await callTool(client, "read_session_handoff", { session_id: sessionId })).result;
    await client.close();
    // A clean stop flushes the audit batch; then the data dir can be opened here.
    await server.stop();
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      rows = (await db.query("SELECT * FROM audit.action_audit WHERE tool = 'call_runtime_tool' OR tool = 'project_validate' ORDER BY started_at")).rows;
    } finally {
      await db.close();
    }
  });
  after(async () => {
    await client?.close().catch(() => undefined);
    await server?.stop();
  });

  it("the handoff carries the verdict and counts, never messages or paths", () => {
    assert.equal(validated.result["status"], "failed", JSON.stringify(validated.result));
    const validations = handoff["validations"] as Array<Record<string, unknown>>;
    assert.equal(validations.length, 1, JSON.stringify(handoff));
    const { at: _at, seq: _seq, ...v } = validations[0] as Record<string, unknown>;
    assert.deepEqual(v, { tool: "project_validate", status: "failed", tests: { passed: 1, failed: 1, skipped: 0 }, diagnostics: { errors: 1, warnings: 0 } });
    assert.doesNotMatch(JSON.stringify(handoff), /calc|Sprintf|TestAdd/u);
  });

  it("the audit row names provider, status and counts, never output text", () => {
    const row = rows.find((r) => JSON.stringify(r["summary"]).includes("validation"));
    assert.ok(row, JSON.stringify(rows));
    const summary = (typeof row["summary"] === "string" ? JSON.parse(row["summary"]) : row["summary"]) as Record<string, unknown>;
    assert.deepEqual(summary["validation"], {
      status: "failed",
      providers: ["go"],
      tests: { passed: 1, failed: 1, skipped: 0 },
      diagnostics: { errors: 1, warnings: 0 },
    });
    assert.doesNotMatch(JSON.stringify(row), /calc|Sprintf|TestAdd|go vet/u);
  });
});

describe("validation in distributed mode (six processes, Postgres, Redis)", () => {
  const token = `t-${randomBytes(16).toString("hex")}`;
  let db: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const projectDir = createProjectDir(fixtureFiles("go", true), { name: "godist" });
    stack = await startTestStack({ postgresUrl: db.url, redisUrl: services.redisUrl, projectDir, gatewayEnv: { WEBCODEX_DEV_TOKEN: token } });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await db?.drop();
  });

  it("go_test still running at wait_ms is a Job the broker tracks; the follow-up gives the failing test", async () => {
    const first = await callTool(client, "call_runtime_tool", { tool: "go_test", arguments: { project, wait_ms: 0 } });
    assert.equal(first.result["execution_state"], "pending", JSON.stringify(first.result));
    const f = first.result["follow_up"] as { tool: string; arguments: Record<string, unknown> };
    let next = await callTool(client, f.tool, f.arguments);
    while (next.result["execution_state"] === "pending") next = await callTool(client, f.tool, f.arguments);
    assert.equal(next.result["status"], "failed", JSON.stringify(next.result));
    // go test's default vet stops the build at the vet finding: that is the failure named.
    const failure = (next.result["failures"] as Array<Record<string, unknown>>)[0];
    assert.deepEqual([failure?.["path"], failure?.["line"]], ["calc.go", 6]);
    const observed = await callTool(client, "call_runtime_tool", { tool: "observe_jobs", arguments: { project, job_ids: [first.result["job_id"]] } });
    assert.equal(((observed.result["jobs"] as Array<Record<string, unknown>>)[0] ?? {})["kind"], "validation", JSON.stringify(observed.result));
    const run = await callTool(client, "call_runtime_tool", { tool: "go_test", arguments: { project, run: "TestDescribe", wait_ms: 30_000 } });
    assert.equal(run.result["status"], "failed", "the vet finding still fails the build");
  });
});
