/** edit_project_files through the workspace engine. One concept over 400 lines: one tool's behaviour, case by case. */
import assert from "node:assert/strict";
import { chmod, lstat, readFile, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { expectFailure, readText, revisionOf, tempWorkspace } from "./workspace.test-support.js";
import type { EditAppliedResult, EditDryRunResult, ReplaceExactEdit } from "./types.js";

const replace = (old_text: string, new_text: string, extra: Omit<ReplaceExactEdit, "replace_exact"> = {}): ReplaceExactEdit => ({
  replace_exact: { old_text, new_text },
  ...extra,
});

const FIXTURE = ["const a = 1;", "const b = 1;", "const c = 1;", "let d = 2;", ""].join("\n");

describe("edit_project_files: match cardinality", () => {
  it("replaces every match when expected_match_count equals the observed count", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE });
    const result = (await ws.editProjectFiles({
      changes: [
        { kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 10;", { expected_match_count: 3 })] },
      ],
    })) as EditAppliedResult;
    assert.equal(await readText(root, "a.ts"), FIXTURE.replaceAll("= 1;", "= 10;"));
    assert.equal(result.changed, true);
    assert.equal(result.dry_run, false);
    assert.equal(result.execution_state, "completed");
    assert.deepEqual(result.paths, ["a.ts"]);
    assert.deepEqual(result.change_summary, { files_changed: 1, edits_applied: 1, replacements: 3, created: 0, deleted: 0, moved: 0 });
    assert.equal(result.files[0]?.read_revision, await revisionOf(ws, "a.ts"));
    assert.equal(result.files[0]?.replacements, 3);
  });

  it("count mismatch writes nothing and reports the observed count and match lines", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE });
    const before = await readFile(path.join(root, "a.ts"));
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 2;", { expected_match_count: 2 })] },
        ],
      }),
      ReasonCode.expectedMatchCountMismatch,
    );
    assert.equal(failure.failure_stage, "preflight");
    assert.equal(failure.detail_code, "observed_3");
    assert.equal(failure.state_changed, false);
    assert.deepEqual(failure.evidence, { path: "a.ts", edit_index: 0, expected: 2, match_count: 3, match_lines: [1, 2, 3], change_index: 0 });
    assert.deepEqual(await readFile(path.join(root, "a.ts")), before);
  });

  it("without a count, a repeated old_text fails as not unique with every match line", async () => {
    const { ws } = await tempWorkspace({ "a.ts": FIXTURE });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 2;")] }],
      }),
      ReasonCode.matchNotUnique,
    );
    assert.equal(failure.evidence?.match_count, 3);
    assert.deepEqual(failure.evidence?.match_lines, [1, 2, 3]);
  });

  it("a missing old_text fails as match_not_found", async () => {
    const { ws } = await tempWorkspace({ "a.ts": FIXTURE });
    await expectFailure(
      ws.editProjectFiles({ changes: [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("nope", "x")] }] }),
      ReasonCode.matchNotFound,
    );
  });

  it("occurrence picks the k-th match and rejects one beyond the count", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE });
    await ws.editProjectFiles({
      changes: [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 7;", { occurrence: 2 })] }],
    });
    assert.equal(await readText(root, "a.ts"), FIXTURE.replace("const b = 1;", "const b = 7;"));
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 7;", { occurrence: 3 })] }],
      }),
      ReasonCode.occurrenceOutOfRange,
    );
    assert.equal(failure.evidence?.match_count, 2);
  });

  it("occurrence combined with expected_match_count is rejected as invalid", async () => {
    const { ws } = await tempWorkspace({ "a.ts": FIXTURE });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          {
            kind: "edit",
            path: "a.ts",
            expected_read_revision: await revisionOf(ws, "a.ts"),
            edits: [replace("= 1;", "= 2;", { occurrence: 1, expected_match_count: 3 })],
          },
        ],
      }),
      ReasonCode.invalidValue,
    );
    assert.equal(failure.detail_code, "occurrence_with_expected_match_count");
  });

  it("line_scope counts only matches fully inside its lines", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE });
    await ws.editProjectFiles({
      changes: [
        {
          kind: "edit",
          path: "a.ts",
          expected_read_revision: await revisionOf(ws, "a.ts"),
          edits: [replace("= 1;", "= 5;", { expected_match_count: 2, line_scope: { start_line: 2, end_line: 3 } })],
        },
      ],
    });
    assert.equal(await readText(root, "a.ts"), ["const a = 1;", "const b = 5;", "const c = 5;", "let d = 2;", ""].join("\n"));
  });

  it("a match crossing the line_scope boundary is not counted", async () => {
    const { ws } = await tempWorkspace({ "a.ts": FIXTURE });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          {
            kind: "edit",
            path: "a.ts",
            expected_read_revision: await revisionOf(ws, "a.ts"),
            edits: [replace("1;\nconst c", "x", { line_scope: { start_line: 3, end_line: 4 } })],
          },
        ],
      }),
      ReasonCode.matchNotFound,
    );
    assert.equal(failure.failure_stage, "preflight");
  });
});

describe("edit_project_files: planning against one snapshot", () => {
  it("edits do not see each other's output", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "alpha beta\n" });
    await ws.editProjectFiles({
      changes: [
        { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("alpha", "beta"), replace("beta", "gamma")] },
      ],
    });
    assert.equal(await readText(root, "a.txt"), "beta gamma\n");
  });

  it("overlapping ranges across edits of one file are rejected and nothing is written", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "one two three\n" });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          {
            kind: "edit",
            path: "a.txt",
            expected_read_revision: await revisionOf(ws, "a.txt"),
            edits: [replace("one two", "1 2"), replace("two three", "2 3")],
          },
        ],
      }),
      ReasonCode.overlappingEdits,
    );
    assert.deepEqual(failure.evidence?.edit_indexes, [0, 1]);
    assert.equal(await readText(root, "a.txt"), "one two three\n");
  });

  it("edits overlapping by exactly one byte are rejected; edits that only touch are applied", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "abcdef\n" });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("abc", "X"), replace("cde", "Y")] }],
      }),
      ReasonCode.overlappingEdits,
    );
    assert.deepEqual(failure.evidence?.edit_indexes, [0, 1]);
    assert.equal(await readText(root, "a.txt"), "abcdef\n");
    await ws.editProjectFiles({
      changes: [{ kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("abc", "X"), replace("def", "Y")] }],
    });
    assert.equal(await readText(root, "a.txt"), "XY\n");
  });

  it("$&, $$ and $1 in new_text are written literally", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "price: X\n" });
    await ws.editProjectFiles({
      changes: [{ kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("X", "$& $$ $1 $`")] }],
    });
    assert.equal(await readText(root, "a.txt"), "price: $& $$ $1 $`\n");
  });

  it("an edit whose new_text equals old_text is a no-op that reports changed false", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "same\n" });
    const before = await stat(path.join(root, "a.txt"));
    const revision = await revisionOf(ws, "a.txt");
    const result = (await ws.editProjectFiles({
      changes: [{ kind: "edit", path: "a.txt", expected_read_revision: revision, edits: [replace("same", "same")] }],
    })) as EditAppliedResult;
    assert.equal(result.changed, false);
    assert.equal(result.applied_count, 0);
    assert.equal(result.files[0]?.changed, false);
    assert.equal(result.files[0]?.read_revision, revision);
    assert.equal((await stat(path.join(root, "a.txt"))).ino, before.ino);
  });
});

describe("edit_project_files: guards", () => {
  it("a stale read revision is refused with the current revision in evidence", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "v1\n" });
    const failure = await expectFailure(
      ws.editProjectFiles({ changes: [{ kind: "edit", path: "a.txt", expected_read_revision: "r_0000000000000000", edits: [replace("v1", "v2")] }] }),
      ReasonCode.staleReadRevision,
    );
    assert.equal(failure.evidence?.path, "a.txt");
    assert.equal(failure.evidence?.current_read_revision, await revisionOf(ws, "a.txt"));
    assert.equal(await readText(root, "a.txt"), "v1\n");
  });

  it("create fails with path_exists when the target exists", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "keep\n" });
    await expectFailure(ws.editProjectFiles({ changes: [{ kind: "create", path: "a.txt", content: "new" }] }), ReasonCode.pathExists);
    assert.equal(await readText(root, "a.txt"), "keep\n");
  });

  it("move fails with path_exists when the destination exists", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n", "b.txt": "b\n" });
    await expectFailure(
      ws.editProjectFiles({ changes: [{ kind: "move", path: "a.txt", destination: "b.txt", expected_read_revision: await revisionOf(ws, "a.txt") }] }),
      ReasonCode.pathExists,
    );
    assert.equal(await readText(root, "b.txt"), "b\n");
  });

  it("two changes touching the same file are refused", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "a\n" });
    const revision = await revisionOf(ws, "a.txt");
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.txt", expected_read_revision: revision, edits: [replace("a", "b")] },
          { kind: "delete", path: "./a.txt", expected_read_revision: revision },
        ],
      }),
      ReasonCode.invalidValue,
    );
    assert.equal(failure.detail_code, "duplicate_path");
  });

  it("writes to sensitive paths are refused before anything is written", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n", ".env": "SECRET=1\n" });
    const cases = [".git/config", ".env", "config/.env.local", "keys/server.pem", "home/.ssh/known_hosts", "id_rsa.pub"];
    for (const target of cases) {
      const failure = await expectFailure(
        ws.editProjectFiles({
          changes: [
            { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("a", "b")] },
            { kind: "create", path: target, content: "x" },
          ],
        }),
        ReasonCode.sensitivePath,
      );
      assert.equal(failure.evidence?.path, target);
    }
    await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "move", path: "a.txt", destination: ".git/hooks/pre-commit", expected_read_revision: await revisionOf(ws, "a.txt") }],
      }),
      ReasonCode.sensitivePath,
    );
    assert.equal(await readText(root, "a.txt"), "a\n");
  });

  it("custom sensitive globs replace the defaults but .git stays refused", async () => {
    const { ws } = await tempWorkspace({}, { sensitiveWriteGlobs: ["secrets/**"] });
    await expectFailure(ws.editProjectFiles({ changes: [{ kind: "create", path: "secrets/token", content: "x" }] }), ReasonCode.sensitivePath);
    await expectFailure(ws.editProjectFiles({ changes: [{ kind: "create", path: "sub/.git/HEAD", content: "x" }] }), ReasonCode.sensitivePath);
    await ws.editProjectFiles({ changes: [{ kind: "create", path: ".env", content: "x" }] });
  });

  it("paths escaping the root are refused: '..', absolute and an outward symlink", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a\n" });
    const outside = (await tempWorkspace({ "victim.txt": "untouched\n" })).root;
    await symlink(outside, path.join(root, "out"));
    for (const target of ["../escape.txt", "a/../../escape.txt", path.join(outside, "victim.txt"), "out/victim.txt", "out/new.txt"]) {
      const failure = await expectFailure(ws.editProjectFiles({ changes: [{ kind: "create", path: target, content: "x" }] }), ReasonCode.pathOutsideProject);
      assert.equal(failure.failure_stage, "resolution");
    }
    assert.equal(await readText(outside, "victim.txt"), "untouched\n");
  });
});

describe("edit_project_files: transactions", () => {
  it("a three-file transaction whose third file fails preflight leaves all three unchanged", async () => {
    const { root, ws } = await tempWorkspace({ "a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n" });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("a1", "a2")] },
          { kind: "edit", path: "b.txt", expected_read_revision: await revisionOf(ws, "b.txt"), edits: [replace("b1", "b2")] },
          { kind: "edit", path: "c.txt", expected_read_revision: await revisionOf(ws, "c.txt"), edits: [replace("c9", "c2")] },
        ],
      }),
      ReasonCode.matchNotFound,
    );
    assert.equal(failure.evidence?.change_index, 2);
    assert.equal(failure.state_changed, false);
    assert.deepEqual([await readText(root, "a.txt"), await readText(root, "b.txt"), await readText(root, "c.txt")], ["a1\n", "b1\n", "c1\n"]);
  });

  it("a failure injected after the first file is renamed rolls every change back", async () => {
    let calls = 0;
    const { root, ws } = await tempWorkspace(
      { "a.txt": "a1\n", "b.txt": "b1\n", "gone.txt": "bye\n", "mv.txt": "move me\n" },
      {
        hooks: {
          afterFileApplied: (_path, index) => {
            calls++;
            if (index === 3) throw new Error("injected");
          },
        },
      },
    );
    const before = await Promise.all(["a.txt", "b.txt", "gone.txt", "mv.txt"].map((p) => readFile(path.join(root, p))));
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("a1", "a2")] },
          { kind: "create", path: "new/dir/c.txt", content: "c\n" },
          { kind: "delete", path: "gone.txt", expected_read_revision: await revisionOf(ws, "gone.txt") },
          { kind: "move", path: "mv.txt", destination: "moved/mv.txt", expected_read_revision: await revisionOf(ws, "mv.txt") },
          { kind: "edit", path: "b.txt", expected_read_revision: await revisionOf(ws, "b.txt"), edits: [replace("b1", "b2")] },
        ],
      }),
      ReasonCode.applyFailed,
    );
    assert.equal(calls, 4);
    assert.equal(failure.failure_stage, "apply");
    assert.equal(failure.state_changed, false);
    assert.equal(failure.outcome_unknown, false);
    const after = await Promise.all(["a.txt", "b.txt", "gone.txt", "mv.txt"].map((p) => readFile(path.join(root, p))));
    assert.deepEqual(after, before);
    await assert.rejects(lstat(path.join(root, "new")), { code: "ENOENT" });
    await assert.rejects(lstat(path.join(root, "moved")), { code: "ENOENT" });
  });

  it("a failure right after the first file is renamed restores that file", async () => {
    const { root, ws } = await tempWorkspace(
      { "a.txt": "a1\n", "b.txt": "b1\n" },
      { hooks: { afterFileApplied: () => Promise.reject(new Error("injected")) } },
    );
    await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("a1", "a2")] },
          { kind: "edit", path: "b.txt", expected_read_revision: await revisionOf(ws, "b.txt"), edits: [replace("b1", "b2")] },
        ],
      }),
      ReasonCode.applyFailed,
    );
    assert.equal(await readText(root, "a.txt"), "a1\n");
    assert.equal(await readText(root, "b.txt"), "b1\n");
  });

  it("a file modified by someone else between preflight and apply aborts and rolls back", async () => {
    const { root, ws } = await tempWorkspace(
      { "a.txt": "a1\n", "b.txt": "b1\n" },
      {
        hooks: {
          afterFileApplied: async (appliedPath) => {
            if (appliedPath === "a.txt") await writeFile(path.join(root, "b.txt"), "someone else\n");
          },
        },
      },
    );
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [
          { kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("a1", "a2")] },
          { kind: "edit", path: "b.txt", expected_read_revision: await revisionOf(ws, "b.txt"), edits: [replace("b1", "b2")] },
        ],
      }),
      ReasonCode.applyFailed,
    );
    assert.equal(failure.detail_code, "concurrent_modification");
    assert.equal(failure.state_changed, false);
    assert.equal(await readText(root, "a.txt"), "a1\n");
    assert.equal(await readText(root, "b.txt"), "someone else\n");
  });

  it("create, delete and move apply together and report each file", async () => {
    const { root, ws } = await tempWorkspace({ "gone.txt": "bye\n", "mv.txt": "move me\n" });
    const moveRevision = await revisionOf(ws, "mv.txt");
    const result = (await ws.editProjectFiles({
      changes: [
        { kind: "create", path: "deep/new/c.txt", content: "hello\n" },
        { kind: "delete", path: "gone.txt", expected_read_revision: await revisionOf(ws, "gone.txt") },
        { kind: "move", path: "mv.txt", destination: "sub/moved.txt", expected_read_revision: moveRevision },
      ],
    })) as EditAppliedResult;
    assert.equal(await readText(root, "deep/new/c.txt"), "hello\n");
    await assert.rejects(lstat(path.join(root, "gone.txt")), { code: "ENOENT" });
    assert.equal(await readText(root, "sub/moved.txt"), "move me\n");
    assert.deepEqual(result.paths, ["deep/new/c.txt", "gone.txt", "mv.txt", "sub/moved.txt"]);
    assert.deepEqual(result.change_summary, { files_changed: 3, edits_applied: 0, replacements: 0, created: 1, deleted: 1, moved: 1 });
    assert.equal(result.applied_count, 3);
    assert.equal(result.files[0]?.read_revision, await revisionOf(ws, "deep/new/c.txt"));
    assert.equal("read_revision" in (result.files[1] ?? {}), false);
    assert.deepEqual(result.files[2], {
      path: "mv.txt",
      kind: "move",
      destination: "sub/moved.txt",
      changed: true,
      read_revision: moveRevision,
      replacements: 0,
    });
  });
});

describe("edit_project_files: bytes and modes", () => {
  it("CRLF line endings and a 0o755 mode are preserved", async () => {
    const { root, ws } = await tempWorkspace({ "run.sh": "#!/bin/sh\r\necho one\r\necho two\r\n" });
    await chmod(path.join(root, "run.sh"), 0o755);
    await ws.editProjectFiles({
      changes: [
        { kind: "edit", path: "run.sh", expected_read_revision: await revisionOf(ws, "run.sh"), edits: [replace("echo one\r\n", "echo uno\r\necho eins\r\n")] },
      ],
    });
    assert.equal(await readText(root, "run.sh"), "#!/bin/sh\r\necho uno\r\necho eins\r\necho two\r\n");
    assert.equal((await stat(path.join(root, "run.sh"))).mode & 0o777, 0o755);
  });

  it("an LF old_text against a CRLF file says the line endings differ", async () => {
    const { ws } = await tempWorkspace({ "a.txt": "one\r\ntwo\r\n" });
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "a.txt", expected_read_revision: await revisionOf(ws, "a.txt"), edits: [replace("one\ntwo", "x")] }],
      }),
      ReasonCode.matchNotFound,
    );
    assert.equal(failure.detail_code, "line_ending_mismatch");
  });

  it("edits through a symlink inside the root change the target and keep the link", async () => {
    const { root, ws } = await tempWorkspace({ "real.txt": "v1\n" });
    await symlink("real.txt", path.join(root, "link.txt"));
    await ws.editProjectFiles({
      changes: [{ kind: "edit", path: "link.txt", expected_read_revision: await revisionOf(ws, "link.txt"), edits: [replace("v1", "v2")] }],
    });
    assert.equal(await readText(root, "real.txt"), "v2\n");
    assert.equal((await lstat(path.join(root, "link.txt"))).isSymbolicLink(), true);
  });
});

describe("edit_project_files: dry run", () => {
  it("dry run writes nothing and returns bounded match ranges per edit", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE, "b.txt": "b\n" });
    const beforeA = await readFile(path.join(root, "a.ts"));
    const result = (await ws.editProjectFiles({
      dry_run: true,
      changes: [
        { kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("= 1;", "= 2;", { expected_match_count: 3 })] },
        { kind: "create", path: "c.txt", content: "c\n" },
        { kind: "delete", path: "b.txt", expected_read_revision: await revisionOf(ws, "b.txt") },
      ],
    })) as EditDryRunResult;
    assert.equal(result.dry_run, true);
    assert.equal(result.changed, true);
    assert.deepEqual(result.files[0]?.edits, [
      {
        edit_index: 0,
        match_count: 3,
        match_ranges: [
          { start_line: 1, start_column: 9, end_line: 1, end_column: 12 },
          { start_line: 2, start_column: 9, end_line: 2, end_column: 12 },
          { start_line: 3, start_column: 9, end_line: 3, end_column: 12 },
        ],
      },
    ]);
    assert.deepEqual(await readFile(path.join(root, "a.ts")), beforeA);
    await assert.rejects(lstat(path.join(root, "c.txt")), { code: "ENOENT" });
    assert.equal(await readText(root, "b.txt"), "b\n");
  });

  it("dry run ranges are cut at 50 and say so", async () => {
    const { ws } = await tempWorkspace({ "many.txt": "x\n".repeat(60) });
    const result = (await ws.editProjectFiles({
      dry_run: true,
      changes: [
        { kind: "edit", path: "many.txt", expected_read_revision: await revisionOf(ws, "many.txt"), edits: [replace("x", "y", { expected_match_count: 60 })] },
      ],
    })) as EditDryRunResult;
    const report = result.files[0]?.edits?.[0];
    assert.equal(report?.match_count, 60);
    assert.equal(report?.match_ranges.length, 50);
    assert.equal(report?.ranges_truncated, true);
  });
});

describe("edit_project_files: a stale revision carries the re-read around each anchor", () => {
  it("shows where each old_text occurs now, with the lines around it, and the current revision a retry can use", async () => {
    const { root, ws } = await tempWorkspace({ "n.md": "# Notes\n\nstatus: draft\n" });
    const old = await revisionOf(ws, "n.md");
    await writeFile(path.join(root, "n.md"), "# Notes\n\nstatus: draft\nowner: ops\n");
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "n.md", expected_read_revision: old, edits: [replace("status: draft", "status: final"), replace("gone", "x")] }],
      }),
      ReasonCode.staleReadRevision,
    );
    assert.equal(failure.evidence?.current_read_revision, await revisionOf(ws, "n.md"));
    assert.deepEqual(failure.evidence?.anchors, [
      { edit_index: 0, match_count: 1, excerpts: [{ start_line: 1, text: "# Notes\n\nstatus: draft\nowner: ops\n", match_lines: [3] }] },
      { edit_index: 1, match_count: 0, excerpts: [] },
    ]);
    assert.equal(failure.evidence?.anchors_truncated, undefined);
    assert.equal(await readText(root, "n.md"), "# Notes\n\nstatus: draft\nowner: ops\n", "nothing written");
    const retried = (await ws.editProjectFiles({
      changes: [
        {
          kind: "edit",
          path: "n.md",
          expected_read_revision: failure.evidence?.current_read_revision as string,
          edits: [replace("status: draft", "status: final")],
        },
      ],
    })) as EditAppliedResult;
    assert.equal(retried.changed, true);
  });

  it("merges overlapping and adjacent excerpts: three matches on consecutive lines show each line once, the match lines marked", async () => {
    const text = "a\nb\ncall(x)\ncall(x)\ncall(x)\nc\nd\ne\nf\ng\nh\ncall(x)\ni\n";
    const { root, ws } = await tempWorkspace({ "c.ts": text });
    const old = await revisionOf(ws, "c.ts");
    await writeFile(path.join(root, "c.ts"), text + "tail\n");
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "c.ts", expected_read_revision: old, edits: [replace("call(x)", "call(y)", { expected_match_count: 4 })] }],
      }),
      ReasonCode.staleReadRevision,
    );
    assert.deepEqual(failure.evidence?.anchors, [
      {
        edit_index: 0,
        match_count: 4,
        excerpts: [
          { start_line: 1, text: "a\nb\ncall(x)\ncall(x)\ncall(x)\nc\nd\n", match_lines: [3, 4, 5] },
          { start_line: 10, text: "g\nh\ncall(x)\ni\ntail\n", match_lines: [12] },
        ],
      },
    ]);
    assert.equal(failure.evidence?.anchors_truncated, undefined, "every match is shown");
  });

  it("bounds the excerpts per edit and says so", async () => {
    const text = Array.from({ length: 40 }, (_, i) => `line ${i}${i % 8 === 0 ? " MARK" : ""}`).join("\n") + "\n";
    const { root, ws } = await tempWorkspace({ "m.txt": text });
    const old = await revisionOf(ws, "m.txt");
    await writeFile(path.join(root, "m.txt"), text + "tail\n");
    const failure = await expectFailure(
      ws.editProjectFiles({
        changes: [{ kind: "edit", path: "m.txt", expected_read_revision: old, edits: [replace("MARK", "DONE", { expected_match_count: 5 })] }],
      }),
      ReasonCode.staleReadRevision,
    );
    const [anchor] = failure.evidence?.anchors as Array<{ match_count: number; excerpts: unknown[] }>;
    assert.equal(anchor?.match_count, 5);
    assert.equal(anchor?.excerpts.length, 3);
    assert.equal(failure.evidence?.anchors_truncated, true);
  });

  it("a stale delete or move carries the current revision only", async () => {
    const { root, ws } = await tempWorkspace({ "d.txt": "v1\n" });
    const old = await revisionOf(ws, "d.txt");
    await writeFile(path.join(root, "d.txt"), "v2\n");
    const failure = await expectFailure(
      ws.editProjectFiles({ changes: [{ kind: "delete", path: "d.txt", expected_read_revision: old }] }),
      ReasonCode.staleReadRevision,
    );
    assert.deepEqual(failure.evidence, { path: "d.txt", current_read_revision: await revisionOf(ws, "d.txt"), change_index: 0 });
  });
});

describe("edit_project_files: undo_changes, the exact inverse of an applied call", () => {
  const undoOf = async (ws: Awaited<ReturnType<typeof tempWorkspace>>["ws"], changes: Parameters<typeof ws.editProjectFiles>[0]["changes"]) => {
    const result = (await ws.editProjectFiles({ changes, include_undo: true })) as EditAppliedResult;
    return result.undo_changes;
  };

  it("swaps each edit back, guarded by the new revision; applying it restores the exact bytes", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE, "b.ts": "x\n" });
    const before = await readFile(path.join(root, "a.ts"));
    const undo = await undoOf(ws, [
      {
        kind: "edit",
        path: "a.ts",
        expected_read_revision: await revisionOf(ws, "a.ts"),
        edits: [replace("= 1;", "= 10;", { expected_match_count: 3 }), replace("let d", "var d")],
      },
      { kind: "create", path: "new/c.txt", content: "made\n" },
      { kind: "move", path: "b.ts", destination: "moved/b.ts", expected_read_revision: await revisionOf(ws, "b.ts") },
    ]);
    assert.deepEqual(undo, [
      {
        kind: "edit",
        path: "a.ts",
        expected_read_revision: await revisionOf(ws, "a.ts"),
        edits: [replace("= 10;", "= 1;", { expected_match_count: 3 }), replace("var d", "let d")],
      },
      { kind: "delete", path: "new/c.txt", expected_read_revision: await revisionOf(ws, "new/c.txt") },
      { kind: "move", path: "moved/b.ts", destination: "b.ts", expected_read_revision: await revisionOf(ws, "moved/b.ts") },
    ]);
    await ws.editProjectFiles({ changes: undo ?? [] });
    assert.deepEqual(await readFile(path.join(root, "a.ts")), before);
    assert.equal(await readText(root, "b.ts"), "x\n");
    await assert.rejects(lstat(path.join(root, "new/c.txt")));
  });

  it("picks occurrences when the new text also occurs elsewhere, and re-creates a small deleted text file", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": "a = 1;\nb = 2;\nc = 1;\n", "gone.txt": "bye\n" });
    const undo = await undoOf(ws, [
      { kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("c = 1", "b = 2")] },
      { kind: "delete", path: "gone.txt", expected_read_revision: await revisionOf(ws, "gone.txt") },
    ]);
    assert.deepEqual(undo?.[0], {
      kind: "edit",
      path: "a.ts",
      expected_read_revision: await revisionOf(ws, "a.ts"),
      edits: [replace("b = 2", "c = 1", { occurrence: 2 })],
    });
    assert.deepEqual(undo?.[1], { kind: "create", path: "gone.txt", content: "bye\n" });
    await ws.editProjectFiles({ changes: undo ?? [] });
    assert.equal(await readText(root, "a.ts"), "a = 1;\nb = 2;\nc = 1;\n");
    assert.equal(await readText(root, "gone.txt"), "bye\n");
  });

  it("is absent when an edit deleted text (no exact anchor) and when nothing changed; a later change makes it stale", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": FIXTURE });
    assert.equal(
      await undoOf(ws, [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("let ", "")] }]),
      undefined,
    );
    assert.equal(
      await undoOf(ws, [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("d = 2", "d = 2")] }]),
      undefined,
    );
    const undo = await undoOf(ws, [{ kind: "edit", path: "a.ts", expected_read_revision: await revisionOf(ws, "a.ts"), edits: [replace("d = 2", "d = 3")] }]);
    await writeFile(path.join(root, "a.ts"), (await readText(root, "a.ts")) + "// later\n");
    await expectFailure(ws.editProjectFiles({ changes: undo ?? [] }), ReasonCode.staleReadRevision);
    assert.match(await readText(root, "a.ts"), /d = 3;\n\/\/ later\n$/, "the later change is kept");
  });
});
