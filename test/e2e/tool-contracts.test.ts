/**
 * The tool contract as a Host sees it: every known normalization, every fail-closed input,
 * the discovery surface for every admitted Gateway tool, and follow-ups executed unchanged.
 * Against `webcodex dev` as a real child process, with the official MCP SDK client.
 *
 * One concept over 400 lines: the Host-visible tool contract, one suite against one dev server.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { repeatedFacts, toolDefinition } from "@webcodex/contracts";
import { callTool, executeFollowUp, followUpTargetTool, openDevProject, readRevision, until } from "../support/index.js";
import type { DevProject, ToolOutcome } from "../support/index.js";

const FILES = {
  "README.md": "# contracts\n",
  "src/a.ts": "export const a = 1;\nexport const b = 1;\n",
  "src/deep/b.ts": "export const c = 1;\n",
  ".agents/skills/contracts/SKILL.md": "---\nname: contracts\ndescription: Check the contract suite.\n---\nRun it.\n",
};

interface FollowUp {
  follow_up_kind: string;
  tool: string;
  arguments: Record<string, unknown>;
}

/** Every file below dir, project-relative (what a command that ran anywhere would leave). */
function allFiles(dir: string, root = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === ".git") return [];
    const p = join(dir, e.name);
    return e.isDirectory() ? allFiles(p, root) : [relative(root, p)];
  });
}

describe("tool contracts through a real MCP client (webcodex dev)", () => {
  let dev: DevProject;
  let projectDir: string;
  let client: Client;
  let project: string;
  let directTools: Set<string>;

  const runtime = (tool: string, args: Record<string, unknown>) => callTool(client, "call_runtime_tool", { tool, arguments: args });
  /** Executes a follow-up exactly as returned, refusing any name tools/list does not show. */
  const execute = (followUp: FollowUp) => executeFollowUp(client, followUp);
  const normalization = (outcome: ToolOutcome) =>
    outcome.result["input_normalization"] as { code: string; hint: string; effective?: Record<string, number> } | undefined;
  const revisionOf = (path: string) => readRevision(client, project, path);

  /** A success carries only the fields its ToolDefinition declares (docs/results.md), plus what the gateway adds to any. */
  const assertDeclaredFields = (tool: string, result: Record<string, unknown>) => {
    const declared = new Set([...(toolDefinition(tool)?.resultFields ?? []), "input_normalization", "job_attention", "follow_up"]);
    for (const key of Object.keys(result)) assert.ok(declared.has(key), `${tool}: result field ${key} is declared in its ToolDefinition`);
  };

  /**
   * Every follow-up any result of this suite carries (at any depth: follow_up, undo, a
   * handoff's pending Jobs), and whether a later call ran it exactly as returned (same name,
   * same arguments). The last test runs the ones no test ran.
   */
  const received = new Map<string, { followUp: FollowUp; from: string; executed: boolean }>();
  const collectFollowUps = (value: unknown, from: string): void => {
    if (Array.isArray(value)) return value.forEach((v) => collectFollowUps(v, from));
    if (typeof value !== "object" || value === null) return;
    const v = value as Record<string, unknown>;
    if (typeof v["follow_up_kind"] === "string" && typeof v["tool"] === "string" && typeof v["arguments"] === "object") {
      const key = JSON.stringify([v["tool"], v["arguments"]]);
      if (!received.has(key)) received.set(key, { followUp: v as unknown as FollowUp, from, executed: false });
    }
    for (const child of Object.values(v)) collectFollowUps(child, from);
  };

  /** Every success result this suite receives, by tool: the sample the sparse-result check runs over. */
  const successes: Array<{ tool: string; result: unknown }> = [];

  before(async () => {
    dev = await openDevProject(FILES, { name: "contracts" });
    ({ projectDir, client, project } = dev);
    directTools = new Set((await client.listTools()).tools.map((t) => t.name));
    const callToolOf = client.callTool.bind(client);
    client.callTool = (async (params: { name: string; arguments?: Record<string, unknown> }, ...rest: unknown[]) => {
      const match = received.get(JSON.stringify([params.name, params.arguments ?? {}]));
      if (match) match.executed = true;
      const res = await (callToolOf as (...a: unknown[]) => Promise<{ structuredContent?: unknown }>)(params, ...rest);
      const tool = params.name === "call_runtime_tool" ? String(params.arguments?.["tool"]) : params.name;
      collectFollowUps(res.structuredContent, tool);
      if ((res as { isError?: boolean }).isError !== true && res.structuredContent !== undefined) successes.push({ tool, result: res.structuredContent });
      return res;
    }) as typeof client.callTool;
  });
  after(() => dev?.close());

  describe("each normalization happens in one call and reports its code", () => {
    it("argv alone becomes args (argv_to_args)", async () => {
      const outcome = await runtime("run_process", { project, argv: ["echo", "hi"] });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["stdout"], "hi\n");
      assert.equal(normalization(outcome)?.code, "argv_to_args");
    });

    it("argv and args with identical values canonicalize to args (argv_to_args)", async () => {
      const outcome = await runtime("run_process", { project, argv: ["echo", "same"], args: ["echo", "same"] });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["stdout"], "same\n");
      assert.equal(normalization(outcome)?.code, "argv_to_args");
      assert.ok(!JSON.stringify(normalization(outcome)).includes("same"), "the hint never replays the raw payload");
    });

    it("argv and args with different values fail closed (conflicting_alias) and run nothing", async () => {
      const outcome = await runtime("run_process", { project, argv: ["touch", "ran-argv"], args: ["touch", "ran-args"] });
      assert.equal(outcome.isError, true);
      assert.deepEqual(
        [outcome.result["reason_code"], outcome.result["failure_stage"], outcome.result["state_changed"]],
        ["conflicting_alias", "normalization", false],
      );
      assert.ok(!allFiles(projectDir).some((p) => p.includes("ran-")), "nothing ran");
    });

    it("run_process with exact bash -c becomes run_shell with shell bash (process_shell_to_run_shell)", async () => {
      const outcome = await runtime("run_process", { project, args: ["bash", "-c", "echo ${BASH_VERSION:+bash}"] });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["output"], "bash\n");
      assert.equal(outcome.result["shell"], "bash");
      assert.equal(normalization(outcome)?.code, "process_shell_to_run_shell");
    });

    it("run_process with exact bash -lc becomes a login run_shell (process_bash_login_to_run_shell)", async () => {
      const outcome = await runtime("run_process", { project, args: ["bash", "-lc", "shopt -q login_shell && echo login"] });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["output"], "login\n");
      assert.equal(normalization(outcome)?.code, "process_bash_login_to_run_shell");
    });

    it("run_process with more than the exact shell form runs literally, unnormalized", async () => {
      const outcome = await runtime("run_process", { project, args: ["sh", "-c", "echo $0", "named"] });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["stdout"], "named\n");
      assert.equal(normalization(outcome), undefined);
    });

    const clampCases: Array<[string, () => Promise<ToolOutcome>, Record<string, number>]> = [
      ["run_shell wait_ms", () => callTool(client, "run_shell", { project, command: "echo ok", wait_ms: 99_999_999 }), { wait_ms: 30_000 }],
      ["run_shell timeout_ms", () => callTool(client, "run_shell", { project, command: "echo ok", timeout_ms: 99_999_999 }), { timeout_ms: 600_000 }],
      [
        "read_files max_bytes_per_file",
        () => callTool(client, "read_files", { project, files: [{ path: "README.md" }], max_bytes_per_file: 1e9 }),
        { max_bytes_per_file: 1_048_576 },
      ],
      ["list_project_files max_results", () => runtime("list_project_files", { project, max_results: 1e9 }), { max_results: 10_000 }],
      [
        "search_project_texts per-query max_results",
        () => callTool(client, "search_project_texts", { project, queries: [{ pattern: "const" }, { pattern: "a", max_results: 1e9 }] }),
        { "queries.1.max_results": 2_000 },
      ],
      [
        "read_git_diff_hunks max_hunks and context_lines",
        () => runtime("read_git_diff_hunks", { project, max_hunks: 1e9, context_lines: 1e9 }),
        { max_hunks: 500, context_lines: 20 },
      ],
    ];
    for (const [label, call, effective] of clampCases) {
      it(`${label} above its ceiling is clamped (clamped_to_ceiling) with the effective value`, async () => {
        const outcome = await call();
        assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
        assert.equal(normalization(outcome)?.code, "clamped_to_ceiling");
        assert.deepEqual(normalization(outcome)?.effective, effective);
      });
    }

    it("harmless default spellings (false on a non-selected mode) are accepted without a code", async () => {
      const shell = await callTool(client, "run_shell", { project, command: "echo plain", login: false });
      assert.deepEqual(shell.result, { command_summary: "echo plain", cwd: ".", shell: "sh", output: "plain\n", truncated: false });
      const search = await callTool(client, "search_project_texts", { project, queries: [{ pattern: "a.", regex: false }] });
      assert.equal(search.isError, false);
      assert.equal((search.result["results"] as Array<Record<string, unknown>>)[0]?.["total"], 0, "regex:false keeps the pattern literal");
      assert.equal(normalization(search), undefined);
    });
  });

  describe("fail-closed inputs are rejected with a reason_code and run nothing", () => {
    it("an unknown tool name in a direct tools/call", async () => {
      const outcome = await callTool(client, "read_filez", { project });
      assert.equal(outcome.isError, true);
      assert.deepEqual([outcome.result["reason_code"], outcome.result["failure_stage"], outcome.result["state_changed"]], ["unknown_tool", "admission", false]);
    });

    it("an unknown field on a Direct tool is not fuzzy-corrected", async () => {
      const outcome = await callTool(client, "read_files", { project, file: [{ path: "README.md" }], files: [{ path: "README.md" }] });
      assert.equal(outcome.isError, true);
      assert.deepEqual([outcome.result["reason_code"], outcome.result["failure_stage"]], ["unknown_field", "normalization"]);
      assert.deepEqual((outcome.result["evidence"] as Record<string, unknown>)["field"], "/file");
    });

    for (const [label, tool, args, reason] of [
      ["timeout", "run_shell", { command: "touch ran-timeout", timeout: 5 }, "unknown_field"],
      ["workdir", "run_shell", { command: "touch ran-workdir", workdir: "src" }, "unknown_field"],
      ["command_args", "run_process", { args: ["touch", "ran-command-args"], command_args: ["x"] }, "unknown_field"],
      ["command on run_script", "run_script", { language: "python", code: "open('ran-script','w')", command: "python" }, "unknown_field"],
      ['language "python3"', "run_script", { language: "python3", code: "open('ran-python3','w')" }, "invalid_value"],
    ] as const) {
      it(`${label}: ${reason} at the normalization stage, no file created anywhere`, async () => {
        const outcome = tool === "run_shell" ? await callTool(client, tool, { project, ...args }) : await runtime(tool, { project, ...args });
        assert.equal(outcome.isError, true);
        assert.deepEqual(
          [outcome.result["reason_code"], outcome.result["failure_stage"], outcome.result["state_changed"], outcome.result["outcome_unknown"]],
          [reason, "normalization", false, false],
        );
        assert.ok(!allFiles(projectDir).some((p) => p.includes("ran-")), "nothing ran, in any directory");
      });
    }
  });

  describe("discovery", () => {
    /**
     * Arguments that make each admitted Gateway tool succeed. A tool admitted later without an
     * entry here fails the test below, so the table cannot silently fall behind the catalog.
     */
    const successfulCalls = (
      jobId: () => string,
      sessionId: () => string,
      got: Record<string, Record<string, unknown>>,
      spareTaskId: () => string,
    ): Record<string, () => Record<string, unknown>> => {
      const agent = () => got["create_agent"] ?? {};
      const attempt = () => got["start_agent_task_attempt"] ?? {};
      const tuple = () => ({
        task_id: attempt()["task_id"],
        attempt_id: attempt()["attempt_id"],
        assignee_agent_id: attempt()["assignee_agent_id"],
        attempt_fence: attempt()["attempt_fence"],
        attempt_controller_generation: attempt()["attempt_controller_generation"],
      });
      return {
        list_tools: () => ({}),
        list_skills: () => ({ project }),
        read_skill: () => ({ project, skill: "contracts" }),
        // A cell whose child read stays inside it: one model-visible call.
        run_code_cell: () => ({
          project,
          code: `const found = await tools.list_project_files({ project: ${JSON.stringify(project)}, path: "src" }); text(JSON.stringify(found).length > 0 ? "listed" : "empty");`,
        }),
        get_runtime_status: () => ({ compact: false }),
        list_project_files: () => ({ project, path: "src" }),
        search_file_context: () => ({ project, path: "src/a.ts", pattern: "const" }),
        run_process: () => ({ project, args: ["echo", "process"] }),
        run_script: () => ({ project, language: "python", code: "print('script')" }),
        run_detached_process: () => ({ project, args: ["sh", "-c", "echo detached"] }),
        observe_jobs: () => ({ project, job_ids: [jobId()] }),
        wait_for_job_terminal: () => ({ project, job_id: jobId(), wait_ms: 5_000 }),
        read_workspace_changes: () => ({ project }),
        read_git_diff_hunks: () => ({ project }),
        read_git_review_summary: () => ({ project }),
        create_session: () => ({ project, title: "discovery" }),
        read_session_handoff: () => ({ session_id: sessionId() }),
        // This project defines no validators: a verdict-less result that says so, not a tool failure.
        project_validate: () => ({ project, checks: ["typecheck"], wait_ms: 30_000 }),
        cargo_check: () => ({ project, wait_ms: 30_000 }),
        cargo_test: () => ({ project, wait_ms: 30_000 }),
        go_test: () => ({ project, wait_ms: 30_000 }),
        create_agent: () => ({ name: "discovery" }),
        rotate_agent_continuation_endpoint: () => ({ agent_id: agent()["agent_id"], endpoint_id: agent()["endpoint_id"], expected_controller_generation: 1 }),
        create_agent_task: () => ({ project, title: "discovery", instructions: "", assignee_agent_id: agent()["agent_id"], idempotency_key: "discovery" }),
        list_agent_tasks: () => ({ project }),
        read_agent_task: () => ({ task_id: got["create_agent_task"]?.["task_id"] }),
        stop_agent_task: () => ({ task_id: spareTaskId(), reason: "not needed" }),
        start_agent_task_attempt: () => ({
          task_id: got["create_agent_task"]?.["task_id"],
          assignee_agent_id: agent()["agent_id"],
          idempotency_key: "discovery",
        }),
        heartbeat_agent_task_attempt: () => tuple(),
        start_agent_task_endpoint_continuation: () => ({ attempt_ref: attempt()["attempt_ref"] }),
        reconcile_agent_task_attempt: () => tuple(),
        complete_agent_task_attempt: () => ({ ...tuple(), outcome: "succeeded", summary: "done" }),
        wait_for_agent_events: () => ({ agent_continuation_ref: got["rotate_agent_continuation_endpoint"]?.["agent_continuation_ref"], wait_ms: 0 }),
        close_session: () => ({ session_id: sessionId() }),
        create_project: () => ({ name: "discovery-made", source: { empty: {} } }),
        wait_for_project_ready: () => ({ project: String(got["create_project"]?.["project_id"]), wait_ms: 5_000 }),
        update_project: () => ({ project: String(got["create_project"]?.["project_id"]), visibility: "tenant" }),
        delete_project: () => ({ project: String(got["create_project"]?.["project_id"]) }),
      };
    };

    it("read_tool_manifest gives the exact schema, description and route, and call_runtime_tool succeeds, for every admitted Gateway tool", async () => {
      const { result } = await runtime("list_tools", {});
      const admitted = Object.values(result["categories"] as Record<string, string[]>).flat();
      // Card tools (present_*) are Direct but listed only for MCP App Hosts; this Host reaches them by name.
      const unlistedDirect = admitted.filter((n) => !directTools.has(n) && toolDefinition(n)?.direct !== undefined);
      assert.ok(
        unlistedDirect.every((n) => toolDefinition(n)?.appResource !== undefined),
        unlistedDirect.join(","),
      );
      // mcp_tool succeeds only against a configured upstream MCP server: test/e2e/mcp-gateway.test.ts calls it.
      const gatewayTools = admitted.filter((n) => !directTools.has(n) && toolDefinition(n)?.direct === undefined && n !== "mcp_tool");
      let jobId = "";
      let sessionId = "";
      const got: Record<string, Record<string, unknown>> = {};
      // A second Task (of another Agent) for stop_agent_task.
      const helper = await runtime("create_agent", { name: "helper" });
      const spare = await runtime("create_agent_task", {
        project,
        title: "spare",
        instructions: "",
        assignee_agent_id: helper.result["agent_id"],
        idempotency_key: "spare",
      });
      const calls = successfulCalls(
        () => jobId,
        () => sessionId,
        got,
        () => String(spare.result["task_id"]),
      );
      const order = Object.keys(calls);
      assert.deepEqual([...gatewayTools].sort(), [...order].sort(), "every admitted Gateway tool has a successful call here, and nothing else");
      const instructions = client.getInstructions() ?? "";
      for (const tool of gatewayTools) assert.ok(instructions.includes(tool), `the server instructions name ${tool}`);
      for (const tool of order) {
        const manifest = await callTool(client, "read_tool_manifest", { tool });
        const def = toolDefinition(tool);
        assert.equal(manifest.isError, false, tool);
        assert.deepEqual(manifest.result["input_schema"], def?.inputSchema, `${tool}: the exact registered schema`);
        assert.equal(manifest.result["description"], def?.description, `${tool}: the exact description`);
        assert.deepEqual(manifest.result["route"], { primary: "call_runtime_tool", fallback: null }, tool);

        const outcome = await runtime(tool, calls[tool]?.() ?? {});
        assert.equal(outcome.isError, false, `${tool}: ${JSON.stringify(outcome.result)}`);
        assertDeclaredFields(tool, outcome.result);
        if (tool === "run_detached_process") jobId = String(outcome.result["job_id"]);
        if (tool === "create_session") sessionId = String(outcome.result["session_id"]);
        got[tool] = outcome.result;
      }
      assert.match(jobId, /\S/);
      const status = await runtime("get_runtime_status", {});
      // The Runner of the Project made and deleted above is forgotten with it.
      assert.deepEqual(status.result["runners"], { total: 1, connected: 1, lost: 0, standby: 0 });
    });

    it("Direct tools' successes carry only their declared result fields", async () => {
      const calls: Array<[string, Record<string, unknown>]> = [
        ["list_projects", {}],
        ["read_files", { project, files: [{ path: "README.md" }] }],
        ["search_project_texts", { project, queries: [{ pattern: "const" }] }],
        ["edit_project_files", { project, dry_run: true, changes: [{ kind: "create", path: "declared.txt", content: "x" }] }],
        ["run_shell", { project, command: "echo declared; exit 1" }],
      ];
      for (const [tool, args] of calls) {
        const outcome = await callTool(client, tool, args);
        assert.equal(outcome.isError, false, `${tool}: ${JSON.stringify(outcome.result)}`);
        assertDeclaredFields(tool, outcome.result);
      }
    });

    it("read_tool_manifest on a Direct tool routes direct, with call_runtime_tool as a working fallback", async () => {
      const manifest = await callTool(client, "read_tool_manifest", { tool: "read_files" });
      assert.equal(manifest.isError, false);
      assert.deepEqual(manifest.result["route"], { primary: "direct", fallback: "call_runtime_tool" });
      const viaFallback = await runtime("read_files", { project, files: [{ path: "README.md" }] });
      assert.equal((viaFallback.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "# contracts\n");
    });

    it("call_runtime_tool refuses presentation tools, its own entry points and unknown names", async () => {
      const unknown = await runtime("read_filez", {});
      assert.deepEqual([unknown.isError, unknown.result["reason_code"]], [true, "unknown_tool"]);
      const presentation = await runtime("present_work_result", { project, title: "x" });
      assert.deepEqual([presentation.isError, presentation.result["reason_code"]], [true, "presentation_tool_not_callable"]);
      for (const entry of ["read_tool_manifest", "call_runtime_tool"]) {
        const nested = await runtime(entry, { tool: "read_files" });
        assert.deepEqual([nested.isError, nested.result["reason_code"], nested.result["detail_code"]], [true, "invalid_value", "gateway_entry_point"], entry);
      }
    });

    it("read_tool_manifest and list_tools fail closed on names they do not know", async () => {
      const unknown = await callTool(client, "read_tool_manifest", { tool: "read_filez" });
      assert.deepEqual([unknown.isError, unknown.result["reason_code"]], [true, "unknown_tool"]);
      const category = await runtime("list_tools", { category: "no_such_category" });
      assert.deepEqual([category.isError, category.result["reason_code"]], [true, "invalid_value"]);
    });
  });

  describe("results state only what the runtime can prove", () => {
    it("run_script honours the env its schema accepts", async () => {
      const outcome = await runtime("run_script", {
        project,
        language: "python",
        code: "import os\nprint(os.environ.get('GREETING'))",
        env: { GREETING: "hello" },
      });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      assert.equal(outcome.result["stdout"], "hello\n");
    });

    it("get_runtime_status has no client_id focus it cannot honour: the field fails closed", async () => {
      const outcome = await callTool(client, "get_runtime_status", { client_id: "local" });
      assert.deepEqual([outcome.isError, outcome.result["reason_code"]], [true, "unknown_field"]);
    });
  });

  describe("passive job_attention", () => {
    it("appears once on the first result after a detached Job ends, then not again", async () => {
      const started = await runtime("run_detached_process", { project, args: ["sh", "-c", "sleep 1; exit 3"] });
      assert.equal(started.isError, false, JSON.stringify(started.result));
      const jobId = String(started.result["job_id"]);
      const readme = () => callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
      const during = await readme();
      assert.equal(during.result["job_attention"], undefined, "still running: nothing to report");
      const first = await until("the ended Job's item", async () => ((r) => r.result["job_attention"] !== undefined && r)(await readme()), 10_000, 100);
      assert.deepEqual(first.result["job_attention"], { items: [{ job_id: jobId, state: "completed", exit_code: 3 }] });
      assert.equal((first.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "# contracts\n", "the business result is unchanged");
      const second = await callTool(client, "search_project_texts", { project, queries: [{ pattern: "contracts", output: "count" }] });
      assert.equal(second.result["job_attention"], undefined, "delivered once, not again");
    });
  });

  describe("low-context search", () => {
    it("search_project_texts answers with files or counts only, and with bounded context lines", async () => {
      const outcome = await callTool(client, "search_project_texts", {
        project,
        queries: [
          { pattern: "export const", output: "files" },
          { pattern: "export const", output: "count" },
          { pattern: "b = 1", path: "src/a.ts", context_lines: 9 },
        ],
      });
      assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
      const [files, count, context] = outcome.result["results"] as Array<Record<string, unknown>>;
      assert.deepEqual(files?.["files"], [
        { path: "src/a.ts", match_count: 2 },
        { path: "src/deep/b.ts", match_count: 1 },
      ]);
      assert.ok(!("matches" in (files ?? {})), "no match lines when files were asked for");
      assert.deepEqual([count?.["match_count"], count?.["file_count"]], [3, 2]);
      assert.deepEqual(context?.["matches"], [{ path: "src/a.ts", line: 2, text: "export const b = 1;", before: ["export const a = 1;"] }]);
      assert.equal(normalization(outcome)?.code, "clamped_to_ceiling", "context_lines above 5 is clamped, not rejected");
    });

    it("search_file_context returns the read_revision an edit can use at once", async () => {
      writeFileSync(join(projectDir, "ctx.ts"), "const x = 1;\nuse(x);\nconst y = 2;\n");
      const found = await runtime("search_file_context", { project, path: "ctx.ts", pattern: "use(x)", context_lines: 1 });
      assert.equal(found.isError, false, JSON.stringify(found.result));
      assert.deepEqual(found.result["matches"], [{ line: 2, text: "use(x);", before: ["const x = 1;"], after: ["const y = 2;"] }]);
      const edited = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "ctx.ts",
            expected_read_revision: found.result["read_revision"],
            edits: [{ replace_exact: { old_text: "use(x)", new_text: "use(x, y)" } }],
          },
        ],
      });
      assert.equal(edited.isError, false, JSON.stringify(edited.result));
      assert.equal(readFileSync(join(projectDir, "ctx.ts"), "utf8"), "const x = 1;\nuse(x, y);\nconst y = 2;\n");
      const stale = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "ctx.ts",
            expected_read_revision: found.result["read_revision"],
            edits: [{ replace_exact: { old_text: "y = 2", new_text: "y = 3" } }],
          },
        ],
      });
      assert.equal(stale.result["reason_code"], "stale_read_revision", "the revision is of the content searched: a later change still needs a re-read");
    });
    it("search_project_texts gives each matched file's read_revision, so a guarded edit follows the search at once", async () => {
      writeFileSync(join(projectDir, "uses.ts"), "old(1);\nkeep;\nold(2);\n");
      const found = await callTool(client, "search_project_texts", { project, queries: [{ pattern: "old(", path: "uses.ts" }] });
      assert.equal(found.isError, false, JSON.stringify(found.result));
      const query = (found.result["results"] as Array<Record<string, unknown>>)[0] ?? {};
      const revisions = query["read_revisions"] as Record<string, string>;
      assert.deepEqual(revisions, { "uses.ts": await revisionOf("uses.ts") });
      const edited = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "uses.ts",
            expected_read_revision: revisions["uses.ts"],
            edits: [{ replace_exact: { old_text: "old(", new_text: "new(" }, expected_match_count: 2 }],
          },
        ],
      });
      assert.equal(edited.isError, false, JSON.stringify(edited.result));
      assert.equal(readFileSync(join(projectDir, "uses.ts"), "utf8"), "new(1);\nkeep;\nnew(2);\n");
    });
  });

  describe("follow-ups returned by tools execute unchanged", () => {
    it("a stale revision's failure is the re-read: the current lines around old_text and the revision a retry applies with", async () => {
      writeFileSync(join(projectDir, "notes.md"), "# Notes\n\nstatus: draft\n");
      const first = await revisionOf("notes.md");
      writeFileSync(join(projectDir, "notes.md"), "# Notes\n\nstatus: draft\nowner: ops\n");
      const change = { kind: "edit", path: "notes.md", edits: [{ replace_exact: { old_text: "status: draft", new_text: "status: final" } }] };
      const stale = await callTool(client, "edit_project_files", { project, changes: [{ ...change, expected_read_revision: first }] });
      assert.deepEqual([stale.isError, stale.result["reason_code"]], [true, "stale_read_revision"]);
      const evidence = stale.result["evidence"] as Record<string, unknown>;
      assert.deepEqual(evidence["anchors"], [
        { edit_index: 0, match_count: 1, excerpts: [{ start_line: 1, text: "# Notes\n\nstatus: draft\nowner: ops\n", match_lines: [3] }] },
      ]);
      assert.equal(evidence["current_read_revision"], await revisionOf("notes.md"));
      const retried = await callTool(client, "edit_project_files", {
        project,
        changes: [{ ...change, expected_read_revision: evidence["current_read_revision"] }],
      });
      assert.equal(retried.isError, false, JSON.stringify(retried.result));
      assert.equal(readFileSync(join(projectDir, "notes.md"), "utf8"), "# Notes\n\nstatus: final\nowner: ops\n");
    });

    it("an applied edit's undo (asked for with include_undo), executed unchanged, restores the exact bytes; run after a later change it fails stale", async () => {
      writeFileSync(join(projectDir, "tax.ts"), "export const rate = 0.2;\nexport const other = 0.2;\n");
      const before = readFileSync(join(projectDir, "tax.ts"), "utf8");
      const edit = (rev: unknown) =>
        callTool(client, "edit_project_files", {
          project,
          changes: [
            { kind: "edit", path: "tax.ts", expected_read_revision: rev, edits: [{ replace_exact: { old_text: "rate = 0.2", new_text: "rate = 0.25" } }] },
            { kind: "create", path: "made.txt", content: "x\n" },
          ],
          include_undo: true,
        });
      const edited = await edit(await revisionOf("tax.ts"));
      assert.equal(edited.isError, false, JSON.stringify(edited.result));
      assertDeclaredFields("edit_project_files", edited.result);
      const undo = edited.result["undo"] as FollowUp;
      assert.deepEqual([undo.follow_up_kind, undo.tool], ["fallback_recovery", "edit_project_files"]);
      const undone = await execute(undo);
      assert.equal(undone.isError, false, JSON.stringify(undone.result));
      assert.equal(readFileSync(join(projectDir, "tax.ts"), "utf8"), before);
      assert.ok(!readdirSync(projectDir).includes("made.txt"), "the created file is gone again");
      // The undo of the undo redoes; after a later change to the file, it is stale and writes nothing.
      const redo = undone.result["undo"] as FollowUp;
      writeFileSync(join(projectDir, "tax.ts"), before + "// later\n");
      const refused = await execute(redo);
      assert.deepEqual([refused.isError, refused.result["reason_code"]], [true, "stale_read_revision"]);
      assert.equal(readFileSync(join(projectDir, "tax.ts"), "utf8"), before + "// later\n");
    });

    it("a match_not_found carries the current revision and the nearest lines: the corrected edit applies without a re-read", async () => {
      writeFileSync(join(projectDir, "near.ts"), "export function area(r: number) {\n  return Math.PI * r * r;\n}\n");
      const revision = await revisionOf("near.ts");
      const missed = await callTool(client, "edit_project_files", {
        project,
        changes: [
          { kind: "edit", path: "near.ts", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "return Math.PI*r*r;", new_text: "x" } }] },
        ],
      });
      assert.deepEqual([missed.isError, missed.result["reason_code"], missed.result["failure_stage"]], [true, "match_not_found", "preflight"]);
      const evidence = missed.result["evidence"] as { current_read_revision: string; nearest: Array<{ start_line: number; text: string }> };
      assert.equal(evidence.current_read_revision, revision);
      assert.deepEqual(evidence.nearest[0], { start_line: 2, text: "  return Math.PI * r * r;" });
      assert.equal(followUpTargetTool(missed.result["follow_up"] as FollowUp), "read_files");
      const corrected = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "near.ts",
            expected_read_revision: evidence.current_read_revision,
            edits: [{ replace_exact: { old_text: evidence.nearest[0]?.text.trim() ?? "", new_text: "return Math.PI * r ** 2;" } }],
          },
        ],
      });
      assert.equal(corrected.isError, false, JSON.stringify(corrected.result));
      assert.match(readFileSync(join(projectDir, "near.ts"), "utf8"), /r \*\* 2/);
    });

    it("a wrong field name through call_runtime_tool names the accepted fields; its read_tool_manifest follow-up, executed unchanged, shows args required", async () => {
      const wrong = await runtime("run_process", { project, command: "ls -la" });
      assert.deepEqual([wrong.isError, wrong.result["reason_code"], wrong.result["failure_stage"]], [true, "missing_field", "normalization"]);
      const evidence = wrong.result["evidence"] as { field: string; accepted_fields: string[]; required_fields: string[] };
      assert.equal(evidence.field, "/args");
      assert.ok(evidence.accepted_fields.includes("args") && evidence.required_fields.includes("args"), JSON.stringify(evidence));
      const manifest = await execute(wrong.result["follow_up"] as FollowUp);
      assert.equal(manifest.isError, false, JSON.stringify(manifest.result));
      assert.deepEqual((manifest.result["input_schema"] as { required: string[] }).required, ["project", "args"]);
      const unknown = await runtime("run_process", { project, args: ["true"], command: "ls" });
      assert.deepEqual([unknown.result["reason_code"], (unknown.result["evidence"] as { field: string }).field], ["unknown_field", "/command"]);
      assert.ok(((unknown.result["evidence"] as { accepted_fields: string[] }).accepted_fields ?? []).includes("args"));
    });

    it("the re-read after a stale revision returns the current revision", async () => {
      const stale = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "src/a.ts",
            expected_read_revision: "r_0000000000000000",
            edits: [{ replace_exact: { old_text: "a = 1", new_text: "a = 2" } }],
          },
        ],
      });
      assert.equal(stale.result["reason_code"], "stale_read_revision");
      const followUp = stale.result["follow_up"] as FollowUp;
      assert.equal(followUp.follow_up_kind, "fallback_recovery");
      const reread = await execute(followUp);
      assert.equal(reread.isError, false, JSON.stringify(reread.result));
      const item = (reread.result["items"] as Array<Record<string, unknown>>)[0];
      assert.equal(item?.["read_revision"], (stale.result["evidence"] as Record<string, unknown>)["current_read_revision"]);
    });

    it("the re-read after a count mismatch shows the lines that matched", async () => {
      const mismatch = await callTool(client, "edit_project_files", {
        project,
        changes: [
          {
            kind: "edit",
            path: "src/a.ts",
            expected_read_revision: await revisionOf("src/a.ts"),
            edits: [{ replace_exact: { old_text: "= 1;", new_text: "= 2;" }, expected_match_count: 5 }],
          },
        ],
      });
      assert.equal(mismatch.result["reason_code"], "expected_match_count_mismatch");
      const reread = await execute(mismatch.result["follow_up"] as FollowUp);
      assert.equal(reread.isError, false, JSON.stringify(reread.result));
      const content = String((reread.result["items"] as Array<Record<string, unknown>>)[0]?.["content"]);
      const lines = content.split("\n");
      for (const line of (mismatch.result["evidence"] as Record<string, number[]>)["match_lines"] ?? []) assert.match(lines[line - 1] ?? "", /= 1;/);
    });

    it("an unknown project ref carries list_projects, which executed unchanged lists the current refs", async () => {
      const unknown = await callTool(client, "read_files", { project: "~p99", files: [{ path: "README.md" }] });
      assert.deepEqual([unknown.isError, unknown.result["reason_code"]], [true, "project_not_found"]);
      const followUp = unknown.result["follow_up"] as FollowUp;
      assert.deepEqual([followUp.follow_up_kind, followUp.tool], ["fallback_recovery", "list_projects"]);
      const listed = await execute(followUp);
      assert.ok((listed.result["projects"] as Array<Record<string, unknown>>).some((p) => p["project_ref"] === project));
    });

    it("observe_jobs and the git review tools record into a Session; a closed Session refuses calls with create_session as recovery", async () => {
      const created = await runtime("create_session", { project, title: "review" });
      const ref = String(created.result["session_ref"]);
      for (const [tool, args] of [
        ["read_workspace_changes", {}],
        ["read_git_diff_hunks", {}],
        ["read_git_review_summary", {}],
        ["observe_jobs", { job_ids: ["job_none"] }],
      ] as const) {
        const outcome = await runtime(tool, { project, session_id: ref, ...args });
        assert.equal(outcome.isError, false, `${tool}: ${JSON.stringify(outcome.result)}`);
      }
      const handoff = await runtime("read_session_handoff", { session_id: ref });
      assert.deepEqual((handoff.result["tools"] as Array<Record<string, unknown>>).map((t) => t["tool"]).sort(), [
        "observe_jobs",
        "read_git_diff_hunks",
        "read_git_review_summary",
        "read_workspace_changes",
      ]);
      const closed = await runtime("close_session", { session_id: ref });
      assert.deepEqual(closed.result, { session_id: created.result["session_id"], state: "closed" });
      assert.deepEqual((await runtime("close_session", { session_id: ref })).result["closed_now"], false, "closing twice is a no-op");
      const refused = await callTool(client, "read_files", { project, session_id: ref, files: [{ path: "README.md" }] });
      assert.deepEqual([refused.isError, refused.result["detail_code"]], [true, "session_closed"]);
      const fresh = await execute(refused.result["follow_up"] as FollowUp);
      assert.equal(fresh.isError, false, JSON.stringify(fresh.result));
      assert.notEqual(fresh.result["session_id"], created.result["session_id"]);
      assert.equal((await runtime("read_session_handoff", { session_id: ref })).result["state"], "closed", "a closed Session keeps its handoff");
    });

    it("an unknown session carries create_session (fallback_recovery), which executed unchanged starts a usable Session", async () => {
      const unknown = await callTool(client, "read_files", { project, session_id: "~s999", files: [{ path: "README.md" }] });
      assert.deepEqual([unknown.isError, unknown.result["detail_code"]], [true, "session_not_found"]);
      const followUp = unknown.result["follow_up"] as FollowUp;
      assert.equal(followUp.follow_up_kind, "fallback_recovery");
      assert.equal(followUpTargetTool(followUp), "create_session");
      const created = await execute(followUp);
      assert.equal(created.isError, false, JSON.stringify(created.result));
      const again = await callTool(client, "read_files", { project, session_id: created.result["session_ref"], files: [{ path: "README.md" }] });
      assert.equal(again.isError, false, JSON.stringify(again.result));
    });

    it("a pending run's wait_for_job_terminal follow-up, executed unchanged, ends with the output", async () => {
      writeFileSync(join(projectDir, "slow.sh"), "sleep 1\necho slow\n");
      const pending = await callTool(client, "run_shell", { project, command: "sh slow.sh", wait_ms: 50 });
      assert.equal(pending.result["execution_state"], "pending", JSON.stringify(pending.result));
      const followUp = pending.result["follow_up"] as FollowUp;
      assert.equal(followUp.tool, "call_runtime_tool", "a Gateway target is generated as the wrapper a tools/list-only Host can call");
      assert.equal(followUpTargetTool(followUp), "wait_for_job_terminal");
      assert.ok(!directTools.has("wait_for_job_terminal"));
      let next = await execute(followUp);
      while (next.result["execution_state"] === "pending") next = await execute(next.result["follow_up"] as FollowUp);
      assert.equal(next.result["output"], "slow\n");
      assert.equal(readFileSync(join(projectDir, "slow.sh"), "utf8"), "sleep 1\necho slow\n");
    });
  });

  describe("every follow-up the suite received", () => {
    it("runs exactly as returned through a client that knows only tools/list: admitted and valid, never refused for its name or arguments", async () => {
      assert.ok(received.size >= 8, `follow-ups received across the suite: ${received.size}`);
      const kinds = new Set([...received.values()].map((r) => followUpTargetTool(r.followUp)));
      for (const tool of ["read_files", "list_projects", "create_session", "wait_for_job_terminal", "edit_project_files"])
        assert.ok(kinds.has(tool), `a follow-up to ${tool} was received`);
      // Running one may return another (an undo's own undo, a wait pending again): to a fixed point.
      for (let round = 0; round < 5 && [...received.values()].some((r) => !r.executed); round++) {
        for (const entry of [...received.values()]) {
          if (entry.executed) continue;
          const outcome = await execute(entry.followUp);
          entry.executed = true;
          const stage = outcome.result["failure_stage"];
          assert.ok(
            !outcome.isError || (stage !== "admission" && stage !== "normalization"),
            `${entry.from} → ${followUpTargetTool(entry.followUp)}: ${JSON.stringify(outcome.result)}`,
          );
        }
      }
      assert.deepEqual(
        [...received.values()].filter((r) => !r.executed).map((r) => r.from),
        [],
      );
    });
  });
  it("no field of any success result this suite received repeats another field's fact", () => {
    assert.ok(new Set(successes.map((s) => s.tool)).size >= 10, `results of many tools were checked: ${[...new Set(successes.map((s) => s.tool))].join(", ")}`);
    const repeated = successes.flatMap(({ tool, result }) => repeatedFacts(result).map((r) => `${tool}: ${r}`));
    assert.deepEqual([...new Set(repeated)], []);
  });
});
