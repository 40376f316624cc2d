/**
 * The Runner's guarded edit engine as a Host sees it, through a real MCP client against
 * `webcodex dev`: every refusal writes nothing and carries the evidence for the next call.
 * (The failure injected mid-apply needs a test hook, so it is covered by the Runner's unit
 * tests: edit-project-files.test.ts.)
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, openDevProject, readRevision, tempDir } from "../support/index.js";
import type { DevProject } from "../support/index.js";

const FILES = {
  "README.md": "# edits\n",
  "src/dup.ts": "let x = 1;\nlet y = 1;\nlet z = 1;\nlet w = 1;\n",
  "src/pair.ts": "alpha beta gamma\n",
  "src/old.ts": "export const old = true;\n",
  "src/gone.ts": "export const gone = true;\n",
  "secrets/prod.env": "TOKEN=1\n",
};

describe("the edit engine through a real MCP client (webcodex dev)", () => {
  let dev: DevProject;
  let projectDir: string;
  let outsideDir: string;
  let client: Client;
  let project: string;

  const read = (path: string) => readFileSync(join(projectDir, path), "utf8");
  const revisionOf = (path: string) => readRevision(client, project, path);
  const editOne = async (path: string, edits: unknown[], options: { dry_run?: boolean } = {}) =>
    callTool(client, "edit_project_files", { project, ...options, changes: [{ kind: "edit", path, expected_read_revision: await revisionOf(path), edits }] });

  before(async () => {
    outsideDir = tempDir("wcx-outside-");
    writeFileSync(join(outsideDir, "target.txt"), "outside\n");
    dev = await openDevProject(FILES, {
      name: "edits",
      env: { WEBCODEX_RUNNER_SENSITIVE_WRITE_GLOBS: "secrets/**" },
      prepare: (dir) => symlinkSync(outsideDir, join(dir, "escape")),
    });
    ({ projectDir, client, project } = dev);
  });
  after(() => dev?.close());

  it("without a count, a repeated old_text fails as not unique, with every match line", async () => {
    const { isError, result } = await editOne("src/dup.ts", [{ replace_exact: { old_text: "= 1;", new_text: "= 2;" } }]);
    assert.equal(isError, true);
    assert.deepEqual([result["reason_code"], result["failure_stage"], result["state_changed"]], ["match_not_unique", "preflight", false]);
    const evidence = result["evidence"] as Record<string, unknown>;
    assert.deepEqual([evidence["match_count"], evidence["match_lines"]], [4, [1, 2, 3, 4]]);
    assert.equal(read("src/dup.ts"), FILES["src/dup.ts"]);
  });

  it("occurrence selects one match; combined with expected_match_count it is rejected and nothing is written", async () => {
    const both = await editOne("src/dup.ts", [{ replace_exact: { old_text: "= 1;", new_text: "= 2;" }, occurrence: 2, expected_match_count: 4 }]);
    assert.deepEqual([both.isError, both.result["reason_code"], both.result["state_changed"]], [true, "invalid_value", false]);
    assert.equal(read("src/dup.ts"), FILES["src/dup.ts"]);
    const one = await editOne("src/dup.ts", [{ replace_exact: { old_text: "= 1;", new_text: "= 2;" }, occurrence: 2 }]);
    assert.equal(one.isError, false, JSON.stringify(one.result));
    assert.equal(read("src/dup.ts"), "let x = 1;\nlet y = 2;\nlet z = 1;\nlet w = 1;\n");
  });

  it("line_scope narrows the counted matches: a count right inside the scope replaces only there", async () => {
    const wrong = await editOne("src/dup.ts", [
      { replace_exact: { old_text: "= 1;", new_text: "= 3;" }, expected_match_count: 3, line_scope: { start_line: 3, end_line: 4 } },
    ]);
    assert.deepEqual([wrong.result["reason_code"], wrong.result["detail_code"]], ["expected_match_count_mismatch", "observed_2"]);
    assert.deepEqual((wrong.result["evidence"] as Record<string, unknown>)["match_lines"], [3, 4]);
    const right = await editOne("src/dup.ts", [
      { replace_exact: { old_text: "= 1;", new_text: "= 3;" }, expected_match_count: 2, line_scope: { start_line: 3, end_line: 4 } },
    ]);
    assert.equal(right.isError, false, JSON.stringify(right.result));
    assert.equal(read("src/dup.ts"), "let x = 1;\nlet y = 2;\nlet z = 3;\nlet w = 3;\n");
  });

  it("overlapping edits in one file change are rejected and nothing is written", async () => {
    const { isError, result } = await editOne("src/pair.ts", [
      { replace_exact: { old_text: "alpha beta", new_text: "A B" } },
      { replace_exact: { old_text: "beta gamma", new_text: "B G" } },
    ]);
    assert.deepEqual([isError, result["reason_code"], result["state_changed"]], [true, "overlapping_edits", false]);
    assert.deepEqual((result["evidence"] as Record<string, unknown>)["edit_indexes"], [0, 1]);
    assert.equal(read("src/pair.ts"), FILES["src/pair.ts"]);
  });

  it("a dry run returns match_count and match_ranges and writes nothing", async () => {
    const { isError, result } = await editOne("src/pair.ts", [{ replace_exact: { old_text: "beta", new_text: "BETA" } }], { dry_run: true });
    assert.equal(isError, false, JSON.stringify(result));
    const file = (result["files"] as Array<Record<string, unknown>>)[0];
    assert.deepEqual((file?.["edits"] as unknown[])[0], {
      edit_index: 0,
      match_count: 1,
      match_ranges: [{ start_line: 1, start_column: 7, end_line: 1, end_column: 10 }],
    });
    assert.equal(read("src/pair.ts"), FILES["src/pair.ts"]);
  });

  it("create, delete and move apply together and report each file with its new revision", async () => {
    const { isError, result } = await callTool(client, "edit_project_files", {
      project,
      changes: [
        { kind: "create", path: "src/new.ts", content: "export const created = 1;\n" },
        { kind: "delete", path: "src/gone.ts", expected_read_revision: await revisionOf("src/gone.ts") },
        { kind: "move", path: "src/old.ts", destination: "src/moved/renamed.ts", expected_read_revision: await revisionOf("src/old.ts") },
      ],
    });
    assert.equal(isError, false, JSON.stringify(result));
    assert.equal(read("src/new.ts"), "export const created = 1;\n");
    assert.equal(existsSync(join(projectDir, "src/gone.ts")), false);
    assert.equal(existsSync(join(projectDir, "src/old.ts")), false);
    assert.equal(read("src/moved/renamed.ts"), "export const old = true;\n");
    // Each fact once: a file per path the call left (a move under its destination), a delete counted.
    const files = result["files"] as Array<Record<string, unknown>>;
    assert.deepEqual(
      files.map((f) => f["path"]),
      ["src/new.ts", "src/moved/renamed.ts"],
    );
    assert.equal((result["change_summary"] as Record<string, unknown>)["deleted"], 1);
    assert.equal(files[1]?.["read_revision"], await revisionOf("src/moved/renamed.ts"));
    assert.equal(files[0]?.["read_revision"], await revisionOf("src/new.ts"), "the reported revision guards the next edit");
  });

  for (const [label, path] of [
    ["a .. escape", "../outside.txt"],
    ["an absolute path", "/tmp/absolute-write.txt"],
    ["a symlink out of the workspace", "escape/target.txt"],
  ] as const) {
    it(`${label} is refused for writes (path_outside_project) and for reads`, async () => {
      const created = await callTool(client, "edit_project_files", { project, changes: [{ kind: "create", path, content: "escaped\n" }] });
      assert.deepEqual([created.isError, created.result["reason_code"], created.result["state_changed"]], [true, "path_outside_project", false]);
      const readBack = await callTool(client, "read_files", { project, files: [{ path }] });
      const item = (readBack.result["items"] as Array<Record<string, Record<string, unknown>>>)[0];
      assert.equal(item?.["error"]?.["reason_code"] ?? readBack.result["reason_code"], "path_outside_project");
    });
  }

  it("nothing was written outside the workspace", () => {
    assert.equal(readFileSync(join(outsideDir, "target.txt"), "utf8"), "outside\n");
    assert.equal(existsSync(join(projectDir, "..", "outside.txt")), false);
    assert.equal(existsSync("/tmp/absolute-write.txt"), false);
  });

  it("writes to .git internals and to the configured sensitive globs are refused; reads of them still work", async () => {
    const git = await callTool(client, "edit_project_files", { project, changes: [{ kind: "create", path: ".git/hooks/pre-commit", content: "#!/bin/sh\n" }] });
    assert.deepEqual([git.isError, git.result["reason_code"]], [true, "sensitive_path"]);
    assert.equal(existsSync(join(projectDir, ".git/hooks/pre-commit")), false);
    const secret = await editOne("secrets/prod.env", [{ replace_exact: { old_text: "TOKEN=1", new_text: "TOKEN=2" } }]);
    assert.deepEqual([secret.isError, secret.result["reason_code"]], [true, "sensitive_path"]);
    assert.equal(read("secrets/prod.env"), "TOKEN=1\n");
    const readBack = await callTool(client, "read_files", { project, files: [{ path: "secrets/prod.env" }] });
    assert.equal((readBack.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "TOKEN=1\n");
  });

  it("read_git_review_summary reports the edited, created, moved and deleted files", async () => {
    const { isError, result } = await callTool(client, "call_runtime_tool", { tool: "read_git_review_summary", arguments: { project } });
    assert.equal(isError, false, JSON.stringify(result));
    const paths = JSON.stringify(result);
    for (const path of ["src/dup.ts", "src/new.ts", "src/gone.ts", "src/moved/renamed.ts"]) assert.ok(paths.includes(path), `${path} in ${paths}`);
  });
});

describe("a Runner without apply_text_edit_expected_match_count (webcodex dev)", () => {
  let dev: DevProject;
  let projectDir: string;
  let client: Client;
  let project: string;

  before(async () => {
    dev = await openDevProject(
      { "a.txt": "x x x\n" },
      { name: "older", env: { WEBCODEX_RUNNER_DISABLED_CAPABILITIES: "apply_text_edit_expected_match_count" } },
    );
    ({ projectDir, client, project } = dev);
  });
  after(() => dev?.close());

  it("a bulk edit is rejected before dispatch; a plain edit keeps working", async () => {
    const revision = await readRevision(client, project, "a.txt");
    const bulk = await callTool(client, "edit_project_files", {
      project,
      changes: [
        {
          kind: "edit",
          path: "a.txt",
          expected_read_revision: revision,
          edits: [{ replace_exact: { old_text: "x", new_text: "y" }, expected_match_count: 3 }],
        },
      ],
    });
    assert.equal(bulk.isError, true);
    assert.deepEqual([bulk.result["reason_code"], bulk.result["state_changed"], bulk.result["outcome_unknown"]], ["capability_missing", false, false]);
    assert.notEqual(bulk.result["failure_stage"], "apply");
    assert.equal(readFileSync(join(projectDir, "a.txt"), "utf8"), "x x x\n");
    const plain = await callTool(client, "edit_project_files", {
      project,
      changes: [{ kind: "edit", path: "a.txt", expected_read_revision: revision, edits: [{ replace_exact: { old_text: "x x x", new_text: "y y y" } }] }],
    });
    assert.equal(plain.isError, false, JSON.stringify(plain.result));
    assert.equal(readFileSync(join(projectDir, "a.txt"), "utf8"), "y y y\n");
  });
});
