/**
 * End to end against `webcodex dev` (embedded mode) as a real child process, with the
 * official MCP SDK client over Streamable HTTP.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, statSync, chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  callTool,
  connectMcp,
  createProjectDir,
  executeFollowUp,
  followUpTargetTool,
  hostPids,
  readRevision,
  sleepTag,
  startDevServer,
  tempDir,
  until,
} from "../support/index.js";
import type { DevServer, FollowUpCall } from "../support/index.js";

const FILES = {
  "README.md": "# demo\n",
  "src/config.ts": "export const a = 1;\nexport const b = 1;\nexport const c = 1;\n",
  "src/windows.txt": "one\r\ntwo\r\nthree\r\n",
  "scripts/run.sh": "#!/bin/sh\necho run\n",
  "src/money.ts": "const price = 1;\n",
};

describe("embedded mode (webcodex dev) through a real MCP client", () => {
  let projectDir: string;
  let dataDir: string;
  let server: DevServer;
  let client: Client;
  let project: string;

  before(async () => {
    projectDir = createProjectDir(FILES, { name: "demo" });
    chmodSync(join(projectDir, "scripts/run.sh"), 0o755);
    dataDir = tempDir("wcx-data-");
    server = await startDevServer({ projectDir, dataDir });
    client = await connectMcp(server.mcpUrl, server.token);
    const listed = await callTool(client, "list_projects", {});
    const projects = listed.result["projects"] as Array<Record<string, string>>;
    assert.equal(projects.length, 1);
    project = projects[0]?.["project_ref"] ?? "";
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  it("lists Direct tools by rank plus the two gateway entry points", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.deepEqual(names.slice(0, 5), ["read_files", "search_project_texts", "edit_project_files", "run_shell", "list_projects"]);
    assert.deepEqual(names.slice(-2), ["read_tool_manifest", "call_runtime_tool"]);
    assert.ok(!names.includes("run_process"), "Gateway tools are not listed directly");
  });

  it("issues a durable project_ref and the canonical id", async () => {
    const { result } = await callTool(client, "list_projects", {});
    assert.deepEqual(result, { projects: [{ project_ref: "~p1", project_id: "agent:local:demo", name: "demo", runner_state: "ready" }] });
  });

  it("reads a file range with a read_revision, omitting per-item success on a complete batch", async () => {
    const { isError, result } = await callTool(client, "read_files", {
      project,
      files: [{ path: "src/config.ts", start_line: 2, end_line: 2 }, { path: "README.md" }],
    });
    assert.equal(isError, false);
    const items = result["items"] as Array<Record<string, unknown>>;
    assert.equal(items[0]?.["content"], "export const b = 1;\n");
    assert.match(String(items[0]?.["read_revision"]), /^r_[0-9a-f]{16}$/);
    assert.ok(!("success" in (items[0] ?? {})) && !("error" in (items[0] ?? {})));
  });

  it("the canonical id works as project selector; an unknown ref fails closed", async () => {
    assert.equal((await callTool(client, "read_files", { project: "agent:local:demo", files: [{ path: "README.md" }] })).isError, false);
    const unknown = await callTool(client, "read_files", { project: "~p99", files: [{ path: "README.md" }] });
    assert.equal(unknown.isError, true);
    assert.equal(unknown.result["reason_code"], "project_not_found");
  });

  it("refuses path escapes by .., absolute path and symlink, per item", async () => {
    const { result } = await callTool(client, "read_files", { project, files: [{ path: "../etc/passwd" }, { path: "/etc/passwd" }, { path: "README.md" }] });
    const items = result["items"] as Array<Record<string, Record<string, unknown>>>;
    assert.equal(items[0]?.["error"]?.["reason_code"], "path_outside_project");
    assert.equal(items[1]?.["error"]?.["reason_code"], "path_outside_project");
    assert.equal((items[2] as unknown as Record<string, unknown>)["success"], true, "a partial batch keeps full envelopes");
  });

  describe("execution", () => {
    it("echo through run_process, run_shell and run_script", async () => {
      const p = await callTool(client, "call_runtime_tool", { tool: "run_process", arguments: { project, args: ["echo", "a"] } });
      assert.equal(p.result["stdout"], "a\n");
      const s = await callTool(client, "run_shell", { project, command: "echo b" });
      assert.deepEqual(
        s.result,
        { command_summary: "echo b", cwd: ".", shell: "sh", output: "b\n", truncated: false },
        "synchronous exit-zero shell success is compact",
      );
      const py = await callTool(client, "call_runtime_tool", { tool: "run_script", arguments: { project, language: "python", code: "print('c')" } });
      assert.equal(py.result["stdout"], "c\n");
    });

    it("a failing command stays rich", async () => {
      const { isError, result } = await callTool(client, "run_shell", { project, command: "echo out; echo err >&2; exit 3" });
      assert.equal(isError, false, "a completed process is an observation, not a tool failure");
      assert.equal(result["exit_code"], 3);
      assert.equal(result["timed_out"], false);
      assert.equal(result["execution_state"], "completed");
      assert.equal(result["output"], "out\nerr\n");
      assert.ok(
        !("stdout" in result) && !("stderr" in result) && !("state" in result) && !("effective" in result),
        "output once, one state field, no limits that did not matter",
      );
    });

    it("sleep past wait_ms returns pending with a follow-up that, executed unchanged, yields the output", async () => {
      const first = await callTool(client, "run_shell", { project, command: "sleep 3; echo done", wait_ms: 200 });
      assert.equal(first.result["execution_state"], "pending");
      const followUp = first.result["follow_up"] as FollowUpCall;
      assert.equal(followUp.follow_up_kind, "mechanically_followable");
      assert.equal(followUpTargetTool(followUp), "wait_for_job_terminal");
      let next = await executeFollowUp(client, followUp);
      while (next.result["execution_state"] === "pending") next = await executeFollowUp(client, next.result["follow_up"]);
      assert.equal(next.result["output"], "done\n");
      const replay = await executeFollowUp(client, followUp);
      assert.deepEqual(replay.result, next.result, "keyed replay returns the same terminal result");
    });

    it("MCP cancellation of a running call stops its process group (in-process transports carry the abort too)", async () => {
      const controller = new AbortController();
      // A Job runs in a pid namespace of its own: its processes are found on the host by a tag.
      const tag = sleepTag();
      const call = client.callTool({ name: "run_shell", arguments: { project, command: `sleep ${tag}`, wait_ms: 25_000 } }, undefined, {
        signal: controller.signal,
      });
      await until("the Job's process to run", () => hostPids(tag).length > 0, 10_000);
      controller.abort();
      await assert.rejects(call);
      await until("no orphan: the cancelled Job's processes are gone", () => hostPids(tag).length === 0, 5_000);
    });

    it("20 concurrent jobs in one project all reach a correct terminal state", async () => {
      // 20 is above the project concurrency limit (16): the calls beyond it queue for a slot.
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => callTool(client, "run_shell", { project, command: `sleep 0.$((${i} % 5)); echo job-${i}` })),
      );
      results.forEach((r, i) => {
        assert.equal(r.isError, false, JSON.stringify(r.result));
        assert.equal(r.result["output"], `job-${i}\n`);
      });
    });
  });

  describe("guarded edits", () => {
    const revisionOf = (path: string) => readRevision(client, project, path);
    const edit = (path: string, revision: string, edits: unknown[], dry_run = false) =>
      callTool(client, "edit_project_files", { project, dry_run, changes: [{ kind: "edit", path, expected_read_revision: revision, edits }] });

    it("a count mismatch writes nothing and reports the observed count and match lines", async () => {
      const before = readFileSync(join(projectDir, "src/config.ts"), "utf8");
      const { isError, result } = await edit("src/config.ts", await revisionOf("src/config.ts"), [
        { replace_exact: { old_text: "= 1;", new_text: "= 2;" }, expected_match_count: 2 },
      ]);
      assert.equal(isError, true);
      assert.equal(result["reason_code"], "expected_match_count_mismatch");
      assert.equal(result["detail_code"], "observed_3");
      assert.deepEqual((result["evidence"] as Record<string, unknown>)["match_lines"], [1, 2, 3]);
      assert.equal(followUpTargetTool(result["follow_up"]), "read_files");
      assert.equal((await executeFollowUp(client, result["follow_up"])).isError, false);
      assert.equal(readFileSync(join(projectDir, "src/config.ts"), "utf8"), before);
    });

    it("the exact count replaces every match, with compact success", async () => {
      const { isError, result } = await edit("src/config.ts", await revisionOf("src/config.ts"), [
        { replace_exact: { old_text: "= 1;", new_text: "= 2;" }, expected_match_count: 3 },
      ]);
      assert.equal(isError, false, JSON.stringify(result));
      assert.ok(!("changed" in result) && !("paths" in result), "files is the one place for the paths and whether they changed");
      assert.ok(!("dry_run" in result) && !("execution_state" in result) && !("undo" in result));
      assert.equal((result["change_summary"] as Record<string, unknown>)["replacements"], 3);
      const [file] = result["files"] as Array<Record<string, unknown>>;
      assert.ok(
        file && !("replacements" in file) && typeof file["read_revision"] === "string",
        "the file carries its revision, not the summary's counts again",
      );
      assert.equal(readFileSync(join(projectDir, "src/config.ts"), "utf8"), "export const a = 2;\nexport const b = 2;\nexport const c = 2;\n");
    });

    it("a stale revision is refused with the current revision as evidence", async () => {
      const { result } = await edit("src/config.ts", "r_0000000000000000", [{ replace_exact: { old_text: "a = 2", new_text: "a = 3" } }]);
      assert.equal(result["reason_code"], "stale_read_revision");
      assert.equal((result["evidence"] as Record<string, unknown>)["current_read_revision"], await revisionOf("src/config.ts"));
    });

    it("dry run reports match ranges and writes nothing; $& and $$ are literal", async () => {
      const rev = await revisionOf("src/money.ts");
      const dry = await edit("src/money.ts", rev, [{ replace_exact: { old_text: "1", new_text: "$&$$" } }], true);
      assert.equal(dry.isError, false);
      assert.equal(readFileSync(join(projectDir, "src/money.ts"), "utf8"), "const price = 1;\n");
      const real = await edit("src/money.ts", rev, [{ replace_exact: { old_text: "1", new_text: "$&$$" } }]);
      assert.equal(real.isError, false);
      assert.equal(readFileSync(join(projectDir, "src/money.ts"), "utf8"), "const price = $&$$;\n");
    });

    it("CRLF and file mode are preserved", async () => {
      await edit("src/windows.txt", await revisionOf("src/windows.txt"), [{ replace_exact: { old_text: "two", new_text: "TWO" } }]);
      assert.equal(readFileSync(join(projectDir, "src/windows.txt"), "utf8"), "one\r\nTWO\r\nthree\r\n");
      await edit("scripts/run.sh", await revisionOf("scripts/run.sh"), [{ replace_exact: { old_text: "echo run", new_text: "echo ran" } }]);
      assert.equal(statSync(join(projectDir, "scripts/run.sh")).mode & 0o777, 0o755);
    });

    it("a three-file change whose third file fails preflight leaves all three unchanged", async () => {
      writeFileSync(join(projectDir, "f1.txt"), "x\n");
      writeFileSync(join(projectDir, "f2.txt"), "x\n");
      const [r1, r2] = [await revisionOf("f1.txt"), await revisionOf("f2.txt")];
      const { isError, result } = await callTool(client, "edit_project_files", {
        project,
        changes: [
          { kind: "edit", path: "f1.txt", expected_read_revision: r1, edits: [{ replace_exact: { old_text: "x", new_text: "y" } }] },
          { kind: "edit", path: "f2.txt", expected_read_revision: r2, edits: [{ replace_exact: { old_text: "x", new_text: "y" } }] },
          { kind: "create", path: "README.md", content: "exists already" },
        ],
      });
      assert.equal(isError, true);
      assert.equal(result["reason_code"], "path_exists");
      assert.equal(readFileSync(join(projectDir, "f1.txt"), "utf8"), "x\n");
      assert.equal(readFileSync(join(projectDir, "f2.txt"), "utf8"), "x\n");
      assert.equal(readFileSync(join(projectDir, "README.md"), "utf8"), "# demo\n");
    });

    it("git review sees the edits", async () => {
      const { isError, result } = await callTool(client, "call_runtime_tool", { tool: "read_workspace_changes", arguments: { project } });
      assert.equal(isError, false);
      const paths = (result["changes"] as Array<Record<string, unknown>>).map((c) => c["path"]);
      assert.ok(paths.includes("src/config.ts"));
      const hunks = await callTool(client, "call_runtime_tool", { tool: "read_git_diff_hunks", arguments: { project, paths: ["src/config.ts"] } });
      assert.equal((hunks.result["hunks"] as unknown[]).length, 1);
    });
  });

  describe("search", () => {
    it("runs several queries in one call; a missing path is path_not_found", async () => {
      const { result } = await callTool(client, "search_project_texts", {
        project,
        queries: [{ pattern: "export const" }, { pattern: "c\\s*=", regex: true }, { pattern: "x", path: "nope" }],
      });
      const results = result["results"] as Array<Record<string, unknown>>;
      assert.equal(results[0]?.["total"], 3);
      assert.equal(results[1]?.["total"], 1);
      assert.equal((results[2]?.["error"] as Record<string, unknown>)["reason_code"], "path_not_found");
    });
  });
  describe("workflow sessions", () => {
    const runtime = (tool: string, args: Record<string, unknown>) => callTool(client, "call_runtime_tool", { tool, arguments: args });
    const handoff = async (sessionId: string) => {
      const { isError, result } = await runtime("read_session_handoff", { session_id: sessionId });
      assert.equal(isError, false, JSON.stringify(result));
      return result as Record<string, unknown> & {
        calls: { total: number; failed: number };
        read: Record<string, number>;
        changed: Record<string, number>;
        run: Record<string, number>;
        pending_jobs: Array<Record<string, unknown>>;
        tools: Array<Record<string, unknown>>;
        recent_calls: Array<Record<string, unknown>>;
      };
    };

    it("a session_ref works as session_id on read, edit and run, and the handoff lists what was read, changed, run and pending", async () => {
      writeFileSync(join(projectDir, "notes.txt"), "draft\n");
      const created = await runtime("create_session", { project, title: "session e2e" });
      assert.equal(created.isError, false, JSON.stringify(created.result));
      const ref = String(created.result["session_ref"]);
      const id = String(created.result["session_id"]);
      assert.match(ref, /^~s\d+$/);
      assert.match(id, /^wc_sess_[0-9a-f]{32}$/);
      assert.deepEqual(Object.keys(created.result).sort(), ["session_id", "session_ref"]);

      const read = await callTool(client, "read_files", { project, session_id: ref, files: [{ path: "notes.txt" }, { path: "README.md" }] });
      assert.equal(read.isError, false, JSON.stringify(read.result));
      const revision = String((read.result["items"] as Array<Record<string, unknown>>)[0]?.["read_revision"]);
      // The canonical wc_sess_* selects the same Session.
      const edited = await callTool(client, "edit_project_files", {
        project,
        session_id: id,
        changes: [{ kind: "edit", path: "notes.txt", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "draft", new_text: "final" } }] }],
      });
      assert.equal(edited.isError, false, JSON.stringify(edited.result));
      assert.equal(readFileSync(join(projectDir, "notes.txt"), "utf8"), "final\n");
      const ran = await callTool(client, "run_shell", { project, session_id: ref, command: "echo ran" });
      assert.equal(ran.result["output"], "ran\n");
      const slow = await callTool(client, "run_shell", { project, session_id: ref, command: "sleep 2; echo slow", wait_ms: 100 });
      assert.equal(slow.result["execution_state"], "pending", JSON.stringify(slow.result));
      const followUp = slow.result["follow_up"] as FollowUpCall;
      assert.equal((followUp.arguments["arguments"] as Record<string, unknown>)["session_id"], ref, "the pending follow-up stays in the same Session");

      const mid = await handoff(ref);
      assert.deepEqual([mid.session_ref, mid.session_id, mid.project, mid.state, mid.title], [ref, id, "agent:local:demo", "open", "session e2e"]);
      assert.deepEqual(mid.calls, { total: 4, failed: 0 });
      assert.deepEqual(mid.read, { calls: 1, paths: 2, failed: 0 }, "what was read");
      assert.deepEqual(mid.changed, { calls: 1, paths: 1, failed: 0 }, "what was changed");
      assert.deepEqual(mid.run, { calls: 2, failed: 0 }, "what was run");
      assert.deepEqual(
        mid.pending_jobs.map((j) => [j["job_id"], j["tool"]]),
        [[slow.result["job_id"], "run_shell"]],
        "what is pending",
      );
      assert.deepEqual(
        mid.recent_calls.map((c) => [c["tool"], c["outcome"]]),
        [
          ["read_files", "success"],
          ["edit_project_files", "success"],
          ["run_shell", "success"],
          ["run_shell", "pending"],
        ],
        "the latest calls, oldest first",
      );
      const editedRevision = ((edited.result["files"] as Array<Record<string, unknown>>)[0] ?? {})["read_revision"];
      assert.deepEqual(
        mid["paths"],
        [
          { path: "notes.txt", read_revision: editedRevision, changed: true },
          { path: "README.md", read_revision: (read.result["items"] as Array<Record<string, unknown>>)[1]?.["read_revision"] },
        ],
        "each path once, with its latest revision",
      );
      assert.deepEqual(
        mid["commands"],
        [
          { tool: "run_shell", command: "sleep 2; echo slow", outcome: "pending" },
          { tool: "run_shell", command: "echo ran", outcome: "success", exit_code: 0 },
        ],
        "the commands with their outcomes",
      );
      assert.ok(!JSON.stringify(mid).includes("final") && !JSON.stringify(mid).includes("draft"), "never file contents");
      // The pending Job's follow-up in the handoff collects it, executed exactly as given.
      const handoffFollowUp = mid.pending_jobs[0]?.["follow_up"];
      assert.equal(followUpTargetTool(handoffFollowUp), "wait_for_job_terminal");

      // Executing the follow-up unchanged records the Job's terminal state in the Session.
      let next = await executeFollowUp(client, handoffFollowUp);
      while (next.result["execution_state"] === "pending") next = await executeFollowUp(client, next.result["follow_up"]);
      assert.equal(next.result["output"], "slow\n");
      const done = await handoff(id);
      assert.deepEqual(done.pending_jobs, []);
      assert.ok(done.calls.total >= 5);
    });

    it("only a call's own session_id selects a Session: calls without one in the same MCP session are not recorded", async () => {
      const created = await runtime("create_session", { project });
      const ref = String(created.result["session_ref"]);
      await callTool(client, "read_files", { project, session_id: ref, files: [{ path: "README.md" }] });
      await callTool(client, "read_files", { project, files: [{ path: "README.md" }] });
      await callTool(client, "run_shell", { project, command: "true" });
      assert.equal((await handoff(ref)).calls.total, 1);
    });

    it("an unknown session_id fails closed before dispatch: nothing is written or run", async () => {
      writeFileSync(join(projectDir, "guarded.txt"), "keep\n");
      const revision = await readRevision(client, project, "guarded.txt");
      for (const sessionId of ["~s999", "wc_sess_00000000000000000000000000000000"]) {
        const edit = await callTool(client, "edit_project_files", {
          project,
          session_id: sessionId,
          changes: [
            { kind: "edit", path: "guarded.txt", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "keep", new_text: "lost" } }] },
          ],
        });
        const run = await callTool(client, "run_shell", { project, session_id: sessionId, command: "touch ran-without-session" });
        for (const outcome of [edit, run]) {
          assert.equal(outcome.isError, true, JSON.stringify(outcome.result));
          assert.deepEqual(
            [outcome.result["reason_code"], outcome.result["detail_code"], outcome.result["state_changed"]],
            ["invalid_value", "session_not_found", false],
          );
        }
        const missing = await runtime("read_session_handoff", { session_id: sessionId });
        assert.deepEqual([missing.isError, missing.result["detail_code"]], [true, "session_not_found"]);
      }
      assert.equal(readFileSync(join(projectDir, "guarded.txt"), "utf8"), "keep\n");
      assert.equal(existsSync(join(projectDir, "ran-without-session")), false);
      const malformed = await callTool(client, "read_files", { project, session_id: "s1", files: [{ path: "README.md" }] });
      assert.deepEqual([malformed.isError, malformed.result["detail_code"]], [true, "invalid_session_selector"]);
    });
  });
});
