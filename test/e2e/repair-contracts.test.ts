/**
 * One concept over 400 lines: the repair contract, table-driven over the write tools.
 * The repair contract as a Host sees it, against `webcodex dev` through the MCP SDK client:
 * - every failure of a write tool that the runtime can locate (a path, a line, a revision)
 *   carries the evidence that repairs it, and the repaired call, built from that evidence
 *   alone (no re-read, no listing), succeeds; the table covers every write tool of the catalog;
 * - every admitted tool succeeds with exactly the fields its manifest calls required;
 * - a read-only caller's instructions and tools/list name no tool it may not call.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { MCP_ANNOTATION_DEFAULTS, admittedTools, toolAnnotations, toolDefinition, toolDefinitions } from "@webcodex/contracts";
import { callTool, connectMcp, createProjectDir, firstProjectRef, readRevision, startDevServer, tempDir } from "../support/index.js";
import type { DevServer, ToolOutcome } from "../support/index.js";

const def = (tool: string) => toolDefinition(tool) ?? assert.fail(`no tool ${tool}`);

const TOKENS = { full: "repair-full-token-0123456789abcdef", reader: "repair-reader-token-0123456789abc" };

/** Every file below dir with its bytes (.git aside): a failed write must leave this unchanged. */
function snapshot(dir: string, root = dir): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === ".git") continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) for (const [k, v] of snapshot(p, root)) out.set(k, v);
    else out.set(relative(root, p), readFileSync(p, "latin1"));
  }
  return out;
}

type Evidence = Record<string, unknown>;

/** One locatable failure: the call that fails, what it fails with, and the call its evidence repairs it into. */
interface RepairCase {
  label: string;
  /** Files written into the project before the call (unique names per case). */
  files?: Record<string, string>;
  call: (ctx: CaseContext) => Promise<Record<string, unknown>>;
  reason: string;
  /** The path the evidence must name (the failure is located). */
  path: string;
  /** The evidence keys that carry the repair. */
  repairKeys: string[];
  /**
   * The corrected calls (in order), built from the failed arguments and the evidence only;
   * absent when no call can repair it (the message says why).
   */
  repair?: (args: Record<string, unknown>, evidence: Evidence) => Record<string, unknown> | Array<Record<string, unknown>>;
  /** What the project holds after the repaired call. */
  after?: Record<string, string | null>;
}

interface CaseContext {
  project: string;
  revision: (path: string) => Promise<string>;
  root: string;
}

const editOf = (path: string, revision: string, oldText: string, newText: string, extra: Record<string, unknown> = {}) => ({
  kind: "edit",
  path,
  expected_read_revision: revision,
  edits: [{ replace_exact: { old_text: oldText, new_text: newText }, ...extra }],
});
const firstChange = (args: Record<string, unknown>) => (args["changes"] as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
const withChange = (args: Record<string, unknown>, patch: Record<string, unknown>) => ({ ...args, changes: [{ ...firstChange(args), ...patch }] });
const firstEdit = (args: Record<string, unknown>) => (firstChange(args)["edits"] as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
const withEdit = (args: Record<string, unknown>, patch: Record<string, unknown>) => withChange(args, { edits: [{ ...firstEdit(args), ...patch }] });

/**
 * The write tools' locatable failures, by tool. Keyed by every tool of the catalog whose effect is
 * workspace_write: a write tool added later without cases here fails the test below.
 */
const CASES: Record<string, RepairCase[]> = {
  edit_project_files: [
    {
      label: "stale revision: current_read_revision and the current lines around old_text",
      files: { "stale.md": "status: draft\n" },
      call: async ({ project, revision, root }) => {
        const old = await revision("stale.md");
        writeFileSync(join(root, "stale.md"), "# title\nstatus: draft\n");
        return { project, changes: [editOf("stale.md", old, "status: draft", "status: final")] };
      },
      reason: "stale_read_revision",
      path: "stale.md",
      repairKeys: ["current_read_revision", "anchors"],
      repair: (args, ev) => withChange(args, { expected_read_revision: ev["current_read_revision"] }),
      after: { "stale.md": "# title\nstatus: final\n" },
    },
    {
      label: "match_not_found: current_read_revision and the nearest lines",
      files: { "near.ts": "export function area(r: number) {\n  return Math.PI * r * r;\n}\n" },
      call: async ({ project, revision }) => ({
        project,
        changes: [editOf("near.ts", await revision("near.ts"), "return Math.PI*r*r;", "return Math.PI * r ** 2;")],
      }),
      reason: "match_not_found",
      path: "near.ts",
      repairKeys: ["current_read_revision", "nearest"],
      repair: (args, ev) => {
        const nearest = (ev["nearest"] as Array<{ text: string }>)[0]?.text.trim() ?? "";
        return withChange(withEdit(args, { replace_exact: { old_text: nearest, new_text: "return Math.PI * r ** 2;" } }), {
          expected_read_revision: ev["current_read_revision"],
        });
      },
      after: { "near.ts": "export function area(r: number) {\n  return Math.PI * r ** 2;\n}\n" },
    },
    {
      label: "match_not_unique: the match lines, to pick one by occurrence",
      files: { "twice.ts": "let a = 1;\nlet b = 1;\n" },
      call: async ({ project, revision }) => ({ project, changes: [editOf("twice.ts", await revision("twice.ts"), "= 1;", "= 2;")] }),
      reason: "match_not_unique",
      path: "twice.ts",
      repairKeys: ["match_count", "match_lines"],
      repair: (args, ev) => withEdit(args, { occurrence: (ev["match_lines"] as number[]).indexOf(2) + 1 }),
      after: { "twice.ts": "let a = 1;\nlet b = 2;\n" },
    },
    {
      label: "expected_match_count_mismatch: the observed count",
      files: { "count.ts": "x = 1;\ny = 1;\nz = 1;\n" },
      call: async ({ project, revision }) => ({
        project,
        changes: [editOf("count.ts", await revision("count.ts"), "= 1;", "= 0;", { expected_match_count: 2 })],
      }),
      reason: "expected_match_count_mismatch",
      path: "count.ts",
      repairKeys: ["match_count", "match_lines"],
      repair: (args, ev) => withEdit(args, { expected_match_count: ev["match_count"] }),
      after: { "count.ts": "x = 0;\ny = 0;\nz = 0;\n" },
    },
    {
      label: "occurrence_out_of_range: the match count and lines",
      files: { "occ.ts": "f();\nf();\n" },
      call: async ({ project, revision }) => ({ project, changes: [editOf("occ.ts", await revision("occ.ts"), "f();", "g();", { occurrence: 3 })] }),
      reason: "occurrence_out_of_range",
      path: "occ.ts",
      repairKeys: ["match_count", "match_lines"],
      repair: (args, ev) => withEdit(args, { occurrence: ev["match_count"] }),
      after: { "occ.ts": "f();\ng();\n" },
    },
    {
      label: "a missing file to edit: the nearest directory and its entries most like the name",
      files: { "lib/parser.ts": "export const parse = 1;\n", "lib/other.ts": "x\n" },
      call: async ({ project, revision }) => ({ project, changes: [editOf("lib/parsre.ts", await revision("lib/parser.ts"), "parse = 1", "parse = 2")] }),
      reason: "path_not_found",
      path: "lib/parsre.ts",
      repairKeys: ["existing_parent", "similar_paths"],
      repair: (args, ev) => withChange(args, { path: (ev["similar_paths"] as string[])[0] }),
      after: { "lib/parser.ts": "export const parse = 2;\n" },
    },
    {
      label: "a missing directory on the way to delete: the nearest existing directory's entries",
      files: { "pkg/src/index.ts": "export {};\n" },
      call: async ({ project, revision }) => ({
        project,
        changes: [{ kind: "delete", path: "pkg/scr/index.ts", expected_read_revision: await revision("pkg/src/index.ts") }],
      }),
      reason: "path_not_found",
      path: "pkg/scr/index.ts",
      repairKeys: ["existing_parent", "similar_paths"],
      repair: (args, ev) => withChange(args, { path: `${(ev["similar_paths"] as string[])[0]}index.ts` }),
      after: { "pkg/src/index.ts": null },
    },
    {
      label: "a create over an existing file: its current_read_revision, to edit it instead",
      files: { "exists.txt": "old\n" },
      call: async ({ project }) => ({ project, changes: [{ kind: "create", path: "exists.txt", content: "new\n" }] }),
      reason: "path_exists",
      path: "exists.txt",
      repairKeys: ["current_read_revision"],
      repair: (args, ev) => ({ ...args, changes: [editOf("exists.txt", String(ev["current_read_revision"]), "old\n", "new\n")] }),
      after: { "exists.txt": "new\n" },
    },
    {
      label: "a move onto an existing file: the destination's current_read_revision, to delete it, then move",
      files: { "from.txt": "from\n", "to.txt": "to\n" },
      call: async ({ project, revision }) => ({
        project,
        changes: [{ kind: "move", path: "from.txt", destination: "to.txt", expected_read_revision: await revision("from.txt") }],
      }),
      reason: "path_exists",
      path: "to.txt",
      repairKeys: ["current_read_revision"],
      repair: (args, ev) => [{ ...args, changes: [{ kind: "delete", path: "to.txt", expected_read_revision: ev["current_read_revision"] }] }, args],
      after: { "from.txt": null, "to.txt": "from\n" },
    },
    {
      label: "an absolute path inside the project: the project-relative path to retry with",
      files: { "abs.txt": "a\n" },
      call: async ({ project, revision, root }) => ({ project, changes: [editOf(join(root, "abs.txt"), await revision("abs.txt"), "a", "b")] }),
      reason: "path_outside_project",
      path: "@root/abs.txt",
      repairKeys: ["project_path"],
      repair: (args, ev) => withChange(args, { path: ev["project_path"] }),
      after: { "abs.txt": "b\n" },
    },
    {
      label: "a path above the project: located, and the message states the rule (no call can reach outside)",
      call: async ({ project }) => ({ project, changes: [{ kind: "create", path: "../escape.txt", content: "x" }] }),
      reason: "path_outside_project",
      path: "../escape.txt",
      repairKeys: [],
    },
    {
      label: "a directory named as the file to edit: the message names the listing",
      files: { "adir/inner.txt": "i\n" },
      call: async ({ project, revision }) => ({ project, changes: [editOf("adir", await revision("adir/inner.txt"), "i", "j")] }),
      reason: "not_a_file",
      path: "adir",
      repairKeys: [],
    },
  ],
  import_host_files: [
    {
      label: "an import over an existing file: its current_read_revision, to overwrite it",
      files: { "imported.txt": "before\n" },
      call: async ({ project }) => ({ project, files: [{ path: "imported.txt", content: "after\n" }] }),
      reason: "path_exists",
      path: "imported.txt",
      repairKeys: ["current_read_revision"],
      repair: (args, ev) => ({
        ...args,
        files: [{ ...(args["files"] as Array<Record<string, unknown>>)[0], overwrite: true, expected_read_revision: ev["current_read_revision"] }],
      }),
      after: { "imported.txt": "after\n" },
    },
    {
      label: "a guarded import of a file that is not there: the entries most like its name",
      files: { "conf/app.json": "{}\n" },
      call: async ({ project, revision }) => ({
        project,
        files: [{ path: "conf/App.json", content: '{"a":1}\n', overwrite: true, expected_read_revision: await revision("conf/app.json") }],
      }),
      reason: "path_not_found",
      path: "conf/App.json",
      repairKeys: ["existing_parent", "similar_paths"],
      repair: (args, ev) => ({ ...args, files: [{ ...(args["files"] as Array<Record<string, unknown>>)[0], path: (ev["similar_paths"] as string[])[0] }] }),
      after: { "conf/app.json": '{"a":1}\n' },
    },
    {
      label: "an import below a file: the path that blocks it",
      files: { "plain.txt": "p\n" },
      call: async ({ project }) => ({ project, files: [{ path: "plain.txt/child.txt", content: "c\n" }] }),
      reason: "path_exists",
      path: "plain.txt/child.txt",
      repairKeys: ["blocking_path"],
    },
    {
      label: "an absolute path inside the project: the project-relative path to retry with",
      call: async ({ project, root }) => ({ project, files: [{ path: join(root, "abs-import.txt"), content: "x\n" }] }),
      reason: "path_outside_project",
      path: "@root/abs-import.txt",
      repairKeys: ["project_path"],
      repair: (args, ev) => ({ ...args, files: [{ ...(args["files"] as Array<Record<string, unknown>>)[0], path: ev["project_path"] }] }),
      after: { "abs-import.txt": "x\n" },
    },
  ],
};

describe("repair contracts through a real MCP client (webcodex dev)", { timeout: 240_000 }, () => {
  let server: DevServer;
  let full: Client;
  let reader: Client;
  let project = "";
  let root = "";

  before(async () => {
    const dir = tempDir("wcx-repair-cfg-");
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: TOKENS.full, client_id: "local", subject: "writer" },
          { token: TOKENS.reader, client_id: "local", subject: "reader", admission_profile: "read_only" },
        ],
      }),
    );
    root = createProjectDir(
      {
        "README.md": "# repair\n",
        "src/a.ts": "export const a = 1;\n",
        ".agents/skills/repair/SKILL.md": "---\nname: repair\ndescription: Repair things.\n---\nDo it.\n",
      },
      { name: "repair" },
    );
    // A tenant catalog skill: read_skill's required field alone (no project) reaches it.
    mkdirSync(join(dir, "catalogs/local/catalogued"), { recursive: true });
    writeFileSync(join(dir, "catalogs/local/catalogued/SKILL.md"), "---\nname: catalogued\ndescription: A tenant skill.\n---\nUse it.\n");
    server = await startDevServer({
      projectDir: root,
      dataDir: tempDir("wcx-repair-data-"),
      tokensFile: join(dir, "tokens.json"),
      env: { WEBCODEX_SKILL_CATALOGS_DIR: join(dir, "catalogs") },
    });
    [full, reader] = await Promise.all([connectMcp(server.mcpUrl, TOKENS.full), connectMcp(server.mcpUrl, TOKENS.reader)]);
    project = await firstProjectRef(full);
  });
  after(async () => {
    await Promise.all([full?.close(), reader?.close()]);
    await server?.stop();
  });

  describe("every locatable failure of a write tool carries the evidence that repairs it", () => {
    it("the table covers exactly the catalog's write tools", () => {
      const writeTools = toolDefinitions()
        .filter((d) => d.implemented && d.effect === "workspace_write")
        .map((d) => d.name)
        .sort();
      assert.deepEqual(Object.keys(CASES).sort(), writeTools);
    });

    for (const [tool, cases] of Object.entries(CASES)) {
      for (const c of cases) {
        it(`${tool}: ${c.label}`, async () => {
          for (const [path, content] of Object.entries(c.files ?? {})) {
            mkdirSync(join(root, path, ".."), { recursive: true });
            writeFileSync(join(root, path), content);
          }
          const ctx: CaseContext = { project, root, revision: (path) => readRevision(full, project, path) };
          const args = await c.call(ctx);
          const before = snapshot(root);
          // Direct tools by their own name, others through call_runtime_tool: as a tools/list-only Host.
          const call = (a: Record<string, unknown>): Promise<ToolOutcome> =>
            toolDefinition(tool)?.direct !== undefined ? callTool(full, tool, a) : callTool(full, "call_runtime_tool", { tool, arguments: a });
          const failed = await call(args);
          assert.equal(failed.isError, true, JSON.stringify(failed.result));
          assert.deepEqual([failed.result["reason_code"], failed.result["state_changed"]], [c.reason, false], JSON.stringify(failed.result));
          assert.deepEqual(snapshot(root), before, "a failed write changes nothing");
          const evidence = (failed.result["evidence"] ?? {}) as Evidence;
          // Located: the path as the caller wrote it, and which change.
          assert.equal(evidence["path"], c.path.replace("@root", root), JSON.stringify(evidence));
          assert.equal(typeof evidence["change_index"], "number", JSON.stringify(evidence));
          // Said: what the evidence means or what to run, for a model that has nothing else.
          assert.ok(
            typeof failed.result["message"] === "string" || failed.result["follow_up"] !== undefined || c.repairKeys.length > 0,
            JSON.stringify(failed.result),
          );
          if (c.repairKeys.length === 0) assert.equal(typeof failed.result["message"], "string", "a failure no evidence repairs says why");
          for (const key of c.repairKeys) assert.ok(evidence[key] !== undefined, `${key} in ${JSON.stringify(evidence)}`);
          if (c.repair === undefined) return;
          const repairs = c.repair(args, evidence);
          for (const repair of Array.isArray(repairs) ? repairs : [repairs]) {
            const repaired = await call(repair);
            assert.equal(repaired.isError, false, `the call repaired from the evidence alone succeeds: ${JSON.stringify(repaired.result)}`);
          }
          for (const [path, content] of Object.entries(c.after ?? {})) {
            if (content === null) assert.throws(() => statSync(join(root, path)), `${path} is gone`);
            else assert.equal(readFileSync(join(root, path), "utf8"), content, path);
          }
        });
      }
    }
  });

  describe("every tool succeeds with exactly the fields its manifest calls required", () => {
    /**
     * For each tool a call holding only its manifest's required fields, in an order where later
     * calls use what earlier ones returned (`got`). The test checks each call's field names
     * against the manifest, so the table cannot hold an optional field; a tool admitted later
     * without an entry fails the coverage check.
     */
    const requiredOnly = (got: Record<string, Record<string, unknown>>): Array<[string, () => Record<string, unknown>]> => {
      const agent = () => got["create_agent"] ?? {};
      const attempt = () => got["start_agent_task_attempt"] ?? {};
      const tuple = () => ({
        task_id: attempt()["task_id"],
        attempt_id: attempt()["attempt_id"],
        assignee_agent_id: attempt()["assignee_agent_id"],
        attempt_fence: attempt()["attempt_fence"],
        attempt_controller_generation: attempt()["attempt_controller_generation"],
      });
      const made = () => String(got["create_project"]?.["project_id"]);
      return [
        ["list_projects", () => ({})],
        ["list_tools", () => ({})],
        ["read_tool_manifest", () => ({ tool: "read_files" })],
        ["call_runtime_tool", () => ({ tool: "list_tools", arguments: {} })],
        ["get_runtime_status", () => ({})],
        ["list_skills", () => ({})],
        ["read_skill", () => ({ skill: "catalogued" })],
        ["read_files", () => ({ project, files: [{ path: "README.md" }] })],
        ["list_project_files", () => ({ project })],
        ["search_project_texts", () => ({ project, queries: [{ pattern: "repair" }] })],
        ["search_file_context", () => ({ project, path: "src/a.ts", pattern: "const" })],
        ["run_code_cell", () => ({ project, code: 'text("cell");' })],
        ["edit_project_files", () => ({ project, changes: [{ kind: "create", path: "required-only.txt", content: "r\n" }] })],
        ["import_host_files", () => ({ project, files: [{ path: "required-import.txt", content: "i\n" }] })],
        ["run_shell", () => ({ project, command: "echo shell" })],
        ["run_process", () => ({ project, args: ["echo", "process"] })],
        ["run_script", () => ({ project, language: "python", code: "print('script')" })],
        ["run_detached_process", () => ({ project, args: ["echo", "detached"] })],
        ["observe_jobs", () => ({ project, job_ids: [String(got["run_detached_process"]?.["job_id"])] })],
        ["wait_for_job_terminal", () => ({ project, job_id: String(got["run_detached_process"]?.["job_id"]) })],
        ["present_job_terminal_continuation", () => ({ project, job_id: String(got["run_detached_process"]?.["job_id"]) })],
        ["project_validate", () => ({ project })],
        ["cargo_check", () => ({ project })],
        ["cargo_test", () => ({ project })],
        ["go_test", () => ({ project })],
        ["read_workspace_changes", () => ({ project })],
        ["read_git_diff_hunks", () => ({ project })],
        ["read_git_review_summary", () => ({ project })],
        ["create_session", () => ({ project })],
        ["read_session_handoff", () => ({ session_id: got["create_session"]?.["session_id"] })],
        ["close_session", () => ({ session_id: got["create_session"]?.["session_id"] })],
        ["present_work_result", () => ({ project, title: "done", summary: "required fields only" })],
        ["present_goal_plan", () => ({ goal: "required fields only", steps: [{ title: "call", state: "completed" }] })],
        ["create_agent", () => ({ name: "required-only" })],
        [
          "rotate_agent_continuation_endpoint",
          () => ({ agent_id: agent()["agent_id"], endpoint_id: agent()["endpoint_id"], expected_controller_generation: agent()["controller_generation"] }),
        ],
        ["wait_for_agent_events", () => ({})],
        ["present_agent_continuation", () => ({})],
        [
          "create_agent_task",
          () => ({ project, title: "required", instructions: "", assignee_agent_id: agent()["agent_id"], idempotency_key: "required-only" }),
        ],
        ["list_agent_tasks", () => ({})],
        ["read_agent_task", () => ({ task_id: got["create_agent_task"]?.["task_id"] })],
        [
          "start_agent_task_attempt",
          () => ({ task_id: got["create_agent_task"]?.["task_id"], assignee_agent_id: agent()["agent_id"], idempotency_key: "required-only" }),
        ],
        ["heartbeat_agent_task_attempt", () => tuple()],
        ["reconcile_agent_task_attempt", () => tuple()],
        ["start_agent_task_endpoint_continuation", () => ({})],
        ["complete_agent_task_attempt", () => ({ ...tuple(), outcome: "succeeded", summary: "done" })],
        ["stop_agent_task", () => ({ task_id: got["spare_task"]?.["task_id"], reason: "not needed" })],
        ["create_project", () => ({ name: "required-made", source: { empty: {} } })],
        ["wait_for_project_ready", () => ({ project: made() })],
        ["update_project", () => ({ project: made(), visibility: "tenant" })],
        ["delete_project", () => ({ project: made() })],
      ];
    };

    /**
     * Tools that take one of two selectors (a ref, or an explicit tuple): a JSON Schema for a
     * Host's tool list cannot say "one of" at its top level, so no selector field is required in
     * the manifest. With the required fields alone such a call fails at normalization with
     * missing_field, a message naming every selector field and the manifest as follow-up; with
     * one selector added it succeeds.
     */
    const SELECTOR_TOOLS: Record<string, { fields: string[]; add: (got: Record<string, Record<string, unknown>>) => Record<string, unknown> }> = {
      wait_for_agent_events: {
        fields: ["agent_id", "agent_continuation_ref"],
        add: (got) => ({ agent_continuation_ref: got["rotate_agent_continuation_endpoint"]?.["agent_continuation_ref"] }),
      },
      present_agent_continuation: {
        fields: ["agent_continuation_ref", "agent_id", "endpoint_id", "expected_controller_generation"],
        add: (got) => ({ agent_continuation_ref: got["rotate_agent_continuation_endpoint"]?.["agent_continuation_ref"] }),
      },
      start_agent_task_endpoint_continuation: {
        fields: ["attempt_ref", "task_id", "attempt_id", "assignee_agent_id", "attempt_fence", "attempt_controller_generation"],
        add: (got) => ({ attempt_ref: got["start_agent_task_attempt"]?.["attempt_ref"] }),
      },
    };

    it("for every admitted tool, a call with only its manifest's required fields succeeds", async () => {
      const listed = await callTool(full, "call_runtime_tool", { tool: "list_tools", arguments: {} });
      const admitted = new Set(Object.values(listed.result["categories"] as Record<string, string[]>).flat());
      for (const t of (await full.listTools()).tools) admitted.add(t.name);
      const got: Record<string, Record<string, unknown>> = {};
      const calls = requiredOnly(got);
      // A Task of another Agent for stop_agent_task (the table's own Task completes).
      const helper = await callTool(full, "call_runtime_tool", { tool: "create_agent", arguments: { name: "spare" } });
      got["spare_task"] = (
        await callTool(full, "call_runtime_tool", {
          tool: "create_agent_task",
          arguments: { project, title: "spare", instructions: "", assignee_agent_id: helper.result["agent_id"], idempotency_key: "spare" },
        })
      ).result;
      // mcp_tool needs a configured upstream MCP server (test/e2e/mcp-gateway.test.ts calls it).
      assert.deepEqual(
        calls.map(([tool]) => tool).sort(),
        [...admitted].filter((t) => t !== "mcp_tool").sort(),
        "every admitted tool has a call here, and nothing else",
      );
      const failures: string[] = [];
      for (const [tool, args] of calls) {
        const manifest = await callTool(full, "read_tool_manifest", { tool });
        const required = ((manifest.result["input_schema"] as { required?: string[] } | undefined)?.required ?? []).slice().sort();
        const a = args();
        assert.deepEqual(Object.keys(a).sort(), required, `${tool}: the call holds exactly the manifest's required fields`);
        const direct = (await full.listTools()).tools.some((t) => t.name === tool) || toolDefinition(tool)?.category === "presentation";
        const run = (x: Record<string, unknown>) => (direct ? callTool(full, tool, x) : callTool(full, "call_runtime_tool", { tool, arguments: x }));
        let outcome = await run(a);
        const selector = SELECTOR_TOOLS[tool];
        if (selector !== undefined) {
          assert.deepEqual([outcome.isError, outcome.result["reason_code"], outcome.result["failure_stage"]], [true, "missing_field", "normalization"], tool);
          for (const field of selector.fields)
            assert.match(String(outcome.result["message"]), new RegExp(`\\b${field}\\b`), `${tool}: the message names ${field}`);
          assert.deepEqual((outcome.result["follow_up"] as { tool: string; arguments: unknown }).arguments, { tool }, `${tool}: its manifest as follow-up`);
          // What required cannot say, the description does.
          for (const field of selector.fields) assert.match(def(tool).description, new RegExp(`\\b${field}\\b`), `${tool}: the description names ${field}`);
          outcome = await run({ ...a, ...selector.add(got) });
        }
        if (outcome.isError) failures.push(`${tool} ${JSON.stringify(a)}: ${JSON.stringify(outcome.result)}`);
        got[tool] = outcome.result;
      }
      assert.deepEqual(failures, []);
    });
  });

  describe("a read-only caller", () => {
    it("is told of no tool it may not call: its instructions and tools/list name no write, run or state-changing tool", async () => {
      const instructions = reader.getInstructions() ?? "";
      assert.match(instructions, /read_files/, "the instructions still teach reading");
      const forbidden = toolDefinitions().filter((d) => d.effect !== "read_only" && d.effectByTarget !== true);
      assert.ok(forbidden.some((d) => d.name === "edit_project_files") && forbidden.some((d) => d.name === "run_shell"));
      for (const def of forbidden)
        assert.ok(!new RegExp(`\\b${def.name}\\b`).test(instructions), `${def.name} is named to a read-only caller: ${instructions}`);
      const listed = (await reader.listTools()).tools.map((t) => t.name);
      for (const def of forbidden) assert.ok(!listed.includes(def.name), `${def.name} is listed to a read-only caller`);
      // The full caller of the same server is taught the edit workflow: the filter is per caller.
      assert.match(full.getInstructions() ?? "", /edit_project_files/);
      // And a write by name is refused at admission, changing nothing.
      const before = snapshot(root);
      const refused = await callTool(reader, "edit_project_files", { project, changes: [{ kind: "create", path: "reader.txt", content: "x" }] });
      assert.deepEqual([refused.isError, refused.result["failure_stage"]], [true, "admission"], JSON.stringify(refused.result));
      assert.deepEqual(snapshot(root), before);
    });
  });

  describe("annotations a Host reads in tools/list", () => {
    it("are the catalog's effect for every listed tool, per caller: call_runtime_tool is not read-only for a full caller and is for a read-only one", async () => {
      for (const [client, admissionProfile] of [
        [full, "full"],
        [reader, "read_only"],
      ] as const) {
        const admitted = admittedTools({ admissionProfile, hostProfile: "generic" });
        const listed = (await client.listTools()).tools;
        assert.ok(listed.length >= 5);
        for (const t of listed) {
          const d = def(t.name);
          // What a Host reads: the stated hints over MCP's defaults for the ones left out.
          const shown = { ...MCP_ANNOTATION_DEFAULTS, ...(t.annotations ?? {}) } as Record<string, unknown>;
          const expected = toolAnnotations(d, admitted) as unknown as Record<string, unknown>;
          // destructiveHint and idempotentHint mean something only when readOnlyHint is false (MCP spec).
          const hints =
            expected["readOnlyHint"] === true ? ["readOnlyHint", "openWorldHint"] : ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
          for (const hint of hints) assert.equal(shown[hint], expected[hint], `${admissionProfile}: ${t.name} ${hint}`);
          if (d.forwards !== true && d.effectByTarget !== true)
            assert.equal(shown["readOnlyHint"], d.effect === "read_only", `${admissionProfile}: ${t.name} readOnlyHint is its effect`);
          if (d.effect === "workspace_write" || d.effect === "process_execution") assert.equal(shown["destructiveHint"], true, `${t.name} destructive`);
        }
        const forwarder = listed.find((t) => t.name === "call_runtime_tool");
        assert.ok(forwarder, "call_runtime_tool is listed");
        const shown = { ...MCP_ANNOTATION_DEFAULTS, ...(forwarder.annotations ?? {}) } as Record<string, unknown>;
        if (admissionProfile === "full")
          assert.deepEqual([shown["readOnlyHint"], shown["destructiveHint"]], [false, true], "it runs run_process and delete_project");
        else assert.equal(shown["readOnlyHint"], true, "it reaches read-only tools only");
      }
    });
  });
});
