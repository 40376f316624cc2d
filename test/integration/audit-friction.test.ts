/**
 * The friction report against a recorded trace: a scripted session with known mistakes is
 * recorded through the audit service into real Postgres (argument shapes and result sizes
 * computed by the same functions the gateway uses), then `webcodex friction-report` reads it
 * back. It must find each planted pattern and nothing else.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { AuditService } from "@webcodex/proto";
import type { ActionRecordSchema } from "@webcodex/proto";
import { toolDefinition, toolDefinitions } from "@webcodex/contracts";
import { createAudit, migrateAudit } from "@webcodex/audit";
import type { FrictionReport } from "@webcodex/audit";
import { argumentShape, createInProcessClient, createPostgresDatabase, measureResult } from "@webcodex/platform";
import type { Database, ShapeSchema } from "@webcodex/platform";
import { join } from "node:path";
import { cliPath, createTestDatabase, repoRoot } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const run = promisify(execFile);
type Init = MessageInitShape<typeof ActionRecordSchema>;

interface Step {
  tool: string;
  args: Record<string, unknown>;
  /** A success result (canonical; projected defaults to the same). */
  result?: Record<string, unknown>;
  projected?: Record<string, unknown>;
  failure?: { reason: string; stage: string };
}

/** Values that must never be found in the store or the report. */
const SECRETS = ["npm run lint-zq7", "pkg-dir-x81", "OLD-TEXT-k2", "NEW-TEXT-k2", "print('p9')", "src/planted-a.ts"];

const project = "~p1";
const content = (n: number) => `line of source code ${"x".repeat(60)}\n`.repeat(n);
const readResult = (path: string) => ({
  items: [{ path, content: content(40), read_revision: `r-${path.length}`, start_line: 1, end_line: 40, total_lines: 40 }],
});
const shellResult = { command_summary: "npm", output: content(30), exit_code: 0 };
const listing = (n: number) => ({
  project,
  items: Array.from({ length: n }, (_, i) => ({ path: `src/m${i}.ts`, kind: "file", binary: false, truncated: false, success: true, error: null })),
});
const catalogListing = {
  tools: toolDefinitions()
    .filter((d) => d.implemented)
    .map((d) => ({ name: d.name, description: d.description, inputSchema: d.inputSchema })),
};
const manifestOf = (tool: string) => {
  const d = toolDefinition(tool);
  return { name: d?.name, description: d?.description, inputSchema: d?.inputSchema, route: { primary: "direct" } };
};

const edit = (revision: string, extra: Record<string, unknown> = {}) => ({
  project,
  changes: [
    {
      kind: "edit",
      path: "src/planted-a.ts",
      expected_read_revision: revision,
      edits: [{ replace_exact: { old_text: "OLD-TEXT-k2", new_text: "NEW-TEXT-k2" }, ...extra }],
    },
  ],
});

/** acme/alice: every planted pattern once, plus near misses that must not be reported. */
const alice: Step[] = [
  { tool: "list_projects", args: {}, result: { projects: [{ project_ref: "~p1", canonical_id: "agent:acme:demo" }] } },
  // P3 discovery_oversized: the whole catalog to pick run_shell.
  { tool: "list_tools", args: {}, result: catalogListing },
  { tool: "run_shell", args: { project, command: "npm test", cwd: "pkg-dir-x81" }, result: shellResult },
  // P1 schema_rejection_corrected: workdir → cwd.
  { tool: "run_shell", args: { project, command: "npm run lint-zq7", workdir: "pkg-dir-x81" }, failure: { reason: "unknown_field", stage: "normalization" } },
  { tool: "run_shell", args: { project, command: "npm run lint-zq7", cwd: "pkg-dir-x81" }, result: shellResult },
  // P2 failure_reread_retry: stale revision → read → the same edit again.
  { tool: "edit_project_files", args: edit("r1"), failure: { reason: "stale_read_revision", stage: "preflight" } },
  { tool: "read_files", args: { project, files: [{ path: "src/planted-a.ts" }] }, result: readResult("src/planted-a.ts") },
  { tool: "edit_project_files", args: edit("r2"), result: { changed: true, files: [{ path: "src/planted-a.ts", read_revision: "r3" }] } },
  // P4 metadata_dominated: a listing that is mostly repeated flags and an echoed project.
  { tool: "list_project_files", args: { project, path: "src" }, result: listing(14) },
  // P5 repeated_sequence: run → read, three times, nothing failing, nothing new.
  ...[1, 2, 3].flatMap((i): Step[] => [
    { tool: "run_process", args: { project, args: ["npm", "test"] }, result: shellResult },
    { tool: "read_files", args: { project, files: [{ path: `log-${i}.txt` }] }, result: readResult(`log-${i}.txt`) },
  ]),
  // Near misses.
  { tool: "read_tool_manifest", args: { tool: "run_script" }, result: manifestOf("run_script") },
  { tool: "run_script", args: { project, language: "python", code: "print('p9')" }, result: shellResult },
  { tool: "run_script", args: { project, language: "python3", code: "print('p9')" }, failure: { reason: "invalid_value", stage: "normalization" } },
  { tool: "read_files", args: { project, files: [{ path: "src/planted-a.ts" }] }, result: readResult("src/planted-a.ts") },
  { tool: "edit_project_files", args: edit("r3"), failure: { reason: "match_not_found", stage: "preflight" } },
  { tool: "read_files", args: { project, files: [{ path: "src/planted-a.ts", start_line: 1, end_line: 9 }] }, result: readResult("src/planted-a.ts") },
  { tool: "edit_project_files", args: edit("r4", { occurrence: 1 }), result: { changed: true } },
  { tool: "run_shell", args: { project, command: "npm test", cwd: "pkg-dir-x81" }, result: shellResult },
  { tool: "list_project_files", args: { project, path: "." }, result: { items: [{ path: "README.md", kind: "file" }], note: content(8) } },
  { tool: "run_shell", args: { project, command: "npm test", cwd: "pkg-dir-x81" }, result: shellResult },
  { tool: "list_project_files", args: { project, path: "." }, result: { items: [{ path: "README.md", kind: "file" }], note: content(8) } },
  { tool: "get_runtime_status", args: {}, result: { server: "webcodex", runners: 1 } },
  { tool: "run_shell", args: { project, command: "x", timeout_ms: "9000" }, failure: { reason: "invalid_value", stage: "normalization" } },
  { tool: "run_shell", args: { project, command: "y", cwd: "a", env: { A: "1" } }, result: shellResult },
];

/** globex/bob: one planted pattern; a failure retried without a re-read is not a loop. */
const bob: Step[] = [
  { tool: "list_project_files", args: { project, path: "lib" }, result: listing(9) },
  { tool: "read_files", args: { project, files: [{ path: "lib/x.ts" }] }, result: readResult("lib/x.ts") },
  { tool: "run_shell", args: { project, command: "make" }, failure: { reason: "execution_failed", stage: "execution" } },
  { tool: "run_shell", args: { project, command: "make" }, result: shellResult },
];

function recordsOf(steps: readonly Step[], who: { clientId: string; subject: string; sessionId: string }, start: number): Array<Init & { callId: string }> {
  return steps.map((s, i) => {
    const def = toolDefinition(s.tool);
    const shape = argumentShape(s.args, def?.inputSchema as ShapeSchema | undefined);
    const size = s.result ? measureResult(s.result, s.projected ?? s.result, s.args) : undefined;
    return {
      callId: randomUUID(),
      ...who,
      tool: s.tool,
      projectCanonicalId: "project" in s.args ? "agent:acme:demo" : "",
      effect: def?.effect ?? "read_only",
      outcome: s.failure ? "failure" : "success",
      reasonCode: s.failure?.reason ?? "",
      failureStage: s.failure?.stage ?? "",
      stateChanged: !s.failure && def?.effect !== "read_only",
      startedAtUnixMs: BigInt(start + i * 3_000),
      durationUs: 1_000,
      stageDurationsUs: { normalization: 20 },
      ...(shape ? { argumentShape: shape } : {}),
      ...(size ? { resultSize: size } : {}),
    };
  });
}

describe("friction report over a recorded scripted session", () => {
  let database: TestDatabase;
  let db: Database;
  const start = Date.now() - 3_600_000;
  const aliceRecords = recordsOf(alice, { clientId: "acme", subject: "alice", sessionId: "wc_sess_alice" }, start);
  const bobRecords = recordsOf(bob, { clientId: "globex", subject: "bob", sessionId: "" }, start + 1_500);
  const ids = (records: ReadonlyArray<{ callId: string }>, ...indices: number[]) => indices.map((i) => records[i]?.callId);

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 2 });
    await migrateAudit(db);
    const audit = createInProcessClient(AuditService, createAudit({ db }));
    // Recorded interleaved, as two callers would be, in small batches.
    const all = [...aliceRecords, ...bobRecords].sort((a, b) => Number(a.startedAtUnixMs) - Number(b.startedAtUnixMs));
    for (let i = 0; i < all.length; i += 5) await audit.recordActions({ records: all.slice(i, i + 5) });
  });
  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it("finds each planted pattern, with the calls that make it up, and nothing else (JSON)", async () => {
    const { stdout } = await run(process.execPath, [cliPath, "friction-report", "--postgres-url", database.url, "--format", "json"]);
    const report = JSON.parse(stdout) as FrictionReport;
    assert.equal(report.records, alice.length + bob.length);
    assert.equal(report.streams, 2);
    const found = report.findings.map((f) => [f.clientId, f.pattern, f.tool, f.callIds]);
    assert.deepEqual(found, [
      ["globex", "metadata_dominated", "list_project_files", ids(bobRecords, 0)],
      ["acme", "discovery_oversized", "list_tools", ids(aliceRecords, 1, 2)],
      ["acme", "schema_rejection_corrected", "run_shell", ids(aliceRecords, 3, 4)],
      ["acme", "failure_reread_retry", "edit_project_files", ids(aliceRecords, 5, 6, 7)],
      ["acme", "metadata_dominated", "list_project_files", ids(aliceRecords, 8)],
      ["acme", "repeated_sequence", "run_process", ids(aliceRecords, 9, 10, 11, 12, 13, 14)],
    ]);
    const by = (p: string, c = "acme") => report.findings.find((f) => f.pattern === p && f.clientId === c)?.detail;
    assert.equal(by("discovery_oversized")?.["selected_tool"], "run_shell");
    assert.equal(by("schema_rejection_corrected")?.["reason_code"], "unknown_field");
    assert.equal(by("schema_rejection_corrected")?.["correction"], "field_renamed_or_retyped");
    assert.equal(by("failure_reread_retry")?.["reason_code"], "stale_read_revision");
    assert.deepEqual(by("repeated_sequence")?.["sequence"], ["run_process", "read_files"]);
    assert.deepEqual(
      report.summary.map((r) => [r.clientId, r.tool, r.pattern, r.count]),
      [
        ["acme", "edit_project_files", "failure_reread_retry", 1],
        ["acme", "list_project_files", "metadata_dominated", 1],
        ["acme", "list_tools", "discovery_oversized", 1],
        ["acme", "run_process", "repeated_sequence", 1],
        ["acme", "run_shell", "schema_rejection_corrected", 1],
        ["globex", "list_project_files", "metadata_dominated", 1],
      ],
    );
    for (const secret of SECRETS) assert.ok(!stdout.includes(secret), `report leaks ${secret}`);
  });

  it("prints a per-tenant, per-tool table, and filters by tenant", async () => {
    const { stdout } = await run(process.execPath, [cliPath, "friction-report", "--postgres-url", database.url, "--tenant", "globex", "--summary-only"]);
    assert.match(stdout, /TENANT\s+TOOL\s+PATTERN\s+FINDINGS\s+CALLS/);
    assert.match(stdout, /globex\s+list_project_files\s+metadata_dominated\s+1\s+1/);
    assert.doesNotMatch(stdout, /acme/);
    const full = await run(process.execPath, [cliPath, "friction-report", "--postgres-url", database.url]);
    assert.match(full.stdout, /6 findings/);
    assert.match(full.stdout, /acme\s+run_shell\s+schema_rejection_corrected\s+1\s+2/);
  });

  it("the standalone webcodex-friction-report command (tools/friction-report) prints the same table", async () => {
    const standalone = join(repoRoot, "tools/friction-report/bin/friction-report.js");
    const args = ["--postgres-url", database.url, "--tenant", "acme", "--summary-only"];
    const [own, cli] = await Promise.all([run(process.execPath, [standalone, ...args]), run(process.execPath, [cliPath, "friction-report", ...args])]);
    assert.match(own.stdout, /acme\s+run_shell\s+schema_rejection_corrected\s+1\s+2/);
    assert.equal(own.stdout, cli.stdout);
  });

  it("the store holds none of the argument values of the session", async () => {
    const columns = await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'audit' AND table_name = 'action_audit'`,
    );
    for (const secret of SECRETS) {
      const where = columns.rows.map((c) => `${c.column_name}::text LIKE $1`).join(" OR ");
      const hits = await db.query(`SELECT call_id FROM audit.action_audit WHERE ${where}`, [`%${secret}%`]);
      assert.equal(hits.rowCount, 0, `${secret} found in audit.action_audit`);
    }
  });
});
