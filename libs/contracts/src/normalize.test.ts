import { test } from "node:test";
import assert from "node:assert/strict";
import { ARGV_ALIASED, MAX_ACCEPTED_FIELDS, isToolInputNormalizationCode, normalizationHints, normalizeToolCall } from "./normalize.js";
import type { ArgvAliased, NormalizeResult } from "./normalize.js";

const all = { isAdmitted: () => true };
const ok = (r: NormalizeResult) => {
  assert.ok(r.ok, JSON.stringify(r));
  return r;
};
const rejected = (r: NormalizeResult, reason: string, detail?: string) => {
  assert.ok(!r.ok, "rejected");
  assert.equal(r.failure.reason_code, reason);
  if (detail) assert.equal(r.failure.detail_code, detail);
  assert.equal(r.failure.state_changed, false);
  // Which tools exist and are admitted is decided at admission; the arguments at normalization.
  assert.equal(r.failure.failure_stage, reason === "unknown_tool" || reason === "tool_not_admitted" ? "admission" : "normalization");
  return r.failure;
};

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <T extends true>(): T | undefined => undefined;

test("the tools whose argv is an alias of args, read from the catalog, are run_process and run_detached_process", () => {
  assert.deepEqual([...ARGV_ALIASED].sort(), ["run_detached_process", "run_process"]);
  expectType<Equal<ArgvAliased, "run_process" | "run_detached_process">>();
});

test("argv alone canonicalizes to args and reports argv_to_args", () => {
  const r = ok(normalizeToolCall("run_process", { project: "~p1", argv: ["ls", "-la"] }, all));
  assert.deepEqual(r.arguments, { project: "~p1", args: ["ls", "-la"] });
  assert.equal(r.normalization?.code, "argv_to_args");
});

test("argv and args with identical values canonicalize; different values fail closed", () => {
  ok(normalizeToolCall("run_process", { project: "~p1", argv: ["ls"], args: ["ls"] }, all));
  rejected(normalizeToolCall("run_process", { project: "~p1", argv: ["ls"], args: ["pwd"] }, all), "conflicting_alias");
});

test("exact sh -c and bash -c become run_shell; bash -lc becomes a login shell", () => {
  const sh = ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "echo hi"] }, all));
  assert.equal(sh.tool, "run_shell");
  assert.deepEqual(sh.arguments, { project: "~p1", command: "echo hi", shell: "sh" });
  assert.equal(sh.normalization?.code, "process_shell_to_run_shell");
  const login = ok(normalizeToolCall("run_process", { project: "~p1", args: ["bash", "-lc", "make"] }, all));
  assert.deepEqual(login.arguments, { project: "~p1", command: "make", shell: "bash", login: true });
  assert.equal(login.normalization?.code, "process_bash_login_to_run_shell");
});

test("a run_shell rewrite carries the literal run_process call, canonicalized without the rewrite code", () => {
  const login = ok(normalizeToolCall("run_process", { project: "~p1", args: ["bash", "-lc", "make"], timeout_ms: 9_999_999 }, all));
  assert.equal(login.tool, "run_shell");
  assert.deepEqual(login.literal, {
    tool: "run_process",
    arguments: { project: "~p1", args: ["bash", "-lc", "make"], timeout_ms: 600_000 },
    normalization: { code: "clamped_to_ceiling", hint: login.literal?.normalization?.hint, effective: { timeout_ms: 600_000 } },
  });
  const alias = ok(normalizeToolCall("run_process", { project: "~p1", argv: ["sh", "-c", "ls"] }, all));
  assert.deepEqual(
    [alias.normalization?.code, alias.literal?.tool, alias.literal?.normalization?.code],
    ["process_shell_to_run_shell", "run_process", "argv_to_args"],
  );
  const plain = ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "ls"] }, all));
  assert.equal(plain.literal?.normalization, undefined, "the literal call reports no code when nothing else was normalized");
  assert.equal(ok(normalizeToolCall("run_process", { project: "~p1", args: ["ls"] }, all)).literal, undefined, "no rewrite, no literal");
});

test("a shell rewrite that would lose stdin, or is not admitted, stays run_process", () => {
  assert.equal(ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "cat"], stdin: "x" }, all)).tool, "run_process");
  assert.equal(
    ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "ls"] }, { isAdmitted: (t) => t !== "run_shell" })).tool,
    "run_process",
  );
  assert.equal(ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "ls", "extra"] }, all)).tool, "run_process");
});

test("a timeout above its ceiling is clamped and the effective value reported", () => {
  const r = ok(normalizeToolCall("run_shell", { project: "~p1", command: "true", timeout_ms: 9_999_999, wait_ms: 100 }, all));
  assert.equal(r.arguments["timeout_ms"], 600_000);
  assert.equal(r.arguments["wait_ms"], 100);
  assert.deepEqual(r.normalization, { code: "clamped_to_ceiling", hint: r.normalization?.hint, effective: { timeout_ms: 600_000 } });
});

test("nested limits clamp per item", () => {
  const r = ok(
    normalizeToolCall(
      "search_project_texts",
      {
        project: "~p1",
        queries: [
          { pattern: "a", max_results: 5 },
          { pattern: "b", max_results: 50_000 },
        ],
      },
      all,
    ),
  );
  assert.equal((r.arguments["queries"] as Array<Record<string, unknown>>)[1]?.["max_results"], 2_000);
  assert.deepEqual(r.normalization?.effective, { "queries.1.max_results": 2_000 });
});

test("only one code is reported, by precedence", () => {
  const r = ok(normalizeToolCall("run_process", { project: "~p1", argv: ["sh", "-c", "ls"], timeout_ms: 10_000_000 }, all));
  assert.equal(r.normalization?.code, "process_shell_to_run_shell");
  assert.deepEqual(r.normalization?.effective, { timeout_ms: 600_000 });
});

test("timeout, workdir, command_args and command on run_script fail closed as unknown fields", () => {
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: "ls", timeout: 5 }, all), "unknown_field");
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: "ls", workdir: "src" }, all), "unknown_field");
  rejected(normalizeToolCall("run_process", { project: "~p1", args: ["ls"], command_args: ["-l"] }, all), "unknown_field");
  rejected(normalizeToolCall("run_script", { project: "~p1", language: "python", code: "1", command: "python" }, all), "unknown_field");
});

test('language "python3" is not an alias of "python"', () => {
  rejected(normalizeToolCall("run_script", { project: "~p1", language: "python3", code: "print(1)" }, all), "invalid_value", "enum");
});

test("unknown tools and tools not admitted are rejected without fuzzy matching", () => {
  rejected(normalizeToolCall("read_file", { project: "~p1" }, all), "unknown_tool");
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: "ls" }, { isAdmitted: () => false }), "tool_not_admitted");
});

test("an unknown or missing field names the fields accepted there (bounded) and follows up with the tool's manifest", () => {
  const unknown = rejected(normalizeToolCall("run_process", { project: "~p1", args: ["ls"], command: "ls -la" }, all), "unknown_field");
  assert.equal(unknown.evidence?.["field"], "/command");
  const accepted = unknown.evidence?.["accepted_fields"] as string[];
  assert.ok(accepted.includes("args") && accepted.includes("project") && !accepted.includes("command"), JSON.stringify(accepted));
  assert.deepEqual(unknown.follow_up, { follow_up_kind: "fallback_recovery", tool: "read_tool_manifest", arguments: { tool: "run_process" } });
  // Nested: the names accepted by the object that holds the field, not the top level.
  const nested = rejected(
    normalizeToolCall("edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "a", content: "x", mode: "644" }] }, all),
    "unknown_field",
  );
  assert.equal(nested.evidence?.["field"], "/changes/0/mode");
  assert.deepEqual(nested.evidence?.["accepted_fields"], ["kind", "path", "content"]);
  // A shell-style guess at run_process: args is missing, and the evidence names it.
  const missing = rejected(normalizeToolCall("run_process", { project: "~p1", command: "ls -la" }, all), "missing_field");
  assert.ok((missing.evidence?.["accepted_fields"] as string[]).includes("args"));
  assert.equal(missing.evidence?.["field"], "/args");
  assert.deepEqual(missing.evidence?.["required_fields"], ["project", "args"]);
  assert.equal((missing.follow_up?.arguments as { tool?: string }).tool, "run_process");
});

test("occurrence with expected_match_count is rejected; reversed ranges too", () => {
  const edit = { replace_exact: { old_text: "a", new_text: "b" }, occurrence: 1, expected_match_count: 2 };
  rejected(
    normalizeToolCall("edit_project_files", { project: "~p1", changes: [{ kind: "edit", path: "a", expected_read_revision: "r", edits: [edit] }] }, all),
    "invalid_value",
    "occurrence_with_expected_match_count",
  );
  rejected(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", start_line: 5, end_line: 2 }] }, all), "invalid_value", "range_reversed");
});

test("null on an optional field means omitted, at any depth; on a required field it is rejected", () => {
  const r = ok(normalizeToolCall("run_shell", { project: "~p1", command: "ls", cwd: null, session_id: null }, all));
  assert.deepEqual(r.arguments, { project: "~p1", command: "ls" });
  assert.equal(r.normalization, undefined, "a default spelling reports no code");
  const read = ok(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", start_line: null, end_line: null }], max_bytes_per_file: null }, all));
  assert.deepEqual(read.arguments, { project: "~p1", files: [{ path: "a" }] });
  const edit = { replace_exact: { old_text: "a", new_text: "b" }, occurrence: null, expected_match_count: 2, line_scope: null };
  const change = ok(
    normalizeToolCall(
      "edit_project_files",
      { project: "~p1", dry_run: null, changes: [{ kind: "edit", path: "a", expected_read_revision: "r", edits: [edit] }] },
      all,
    ),
  );
  assert.deepEqual(
    change.arguments["changes"],
    [{ kind: "edit", path: "a", expected_read_revision: "r", edits: [{ replace_exact: { old_text: "a", new_text: "b" }, expected_match_count: 2 }] }],
    "occurrence: null does not collide with expected_match_count",
  );
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: null }, all), "invalid_value");
  rejected(normalizeToolCall("read_files", { project: "~p1", files: [{ path: null }] }, all), "invalid_value");
  rejected(normalizeToolCall("edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "a", content: null }] }, all), "invalid_value");
});

test("null never hides an unknown field or a map value", () => {
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: "ls", timeout: null }, all), "unknown_field");
  rejected(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", line: null }] }, all), "unknown_field");
  rejected(normalizeToolCall("run_shell", { project: "~p1", command: "ls", env: { A: null } }, all), "invalid_value");
});

test("dropping nulls never adds or displaces the one reported normalization code", () => {
  assert.equal(ok(normalizeToolCall("run_process", { project: "~p1", argv: ["ls"], cwd: null }, all)).normalization?.code, "argv_to_args");
  assert.equal(
    ok(normalizeToolCall("run_shell", { project: "~p1", command: "ls", timeout_ms: 9_999_999, wait_ms: null }, all)).normalization?.code,
    "clamped_to_ceiling",
  );
  const rewrite = ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "cat"], stdin: null }, all));
  assert.deepEqual(
    [rewrite.tool, rewrite.normalization?.code],
    ["run_shell", "process_shell_to_run_shell"],
    "stdin: null is no stdin, so the rewrite stays lossless",
  );
});

test("normalization does not modify the caller's arguments", () => {
  const raw = { project: "~p1", files: [{ path: "a", start_line: null }], max_bytes_per_file: null };
  const before = structuredClone(raw);
  ok(normalizeToolCall("read_files", raw, all));
  assert.deepEqual(raw, before);
});

test("an explicit default (dry_run false) is accepted as is", () => {
  const r = ok(normalizeToolCall("edit_project_files", { project: "~p1", dry_run: false, changes: [{ kind: "create", path: "a.txt", content: "x" }] }, all));
  assert.equal(r.normalization, undefined);
});

test("edits past the 1024 cardinality bound are rejected, not clamped", () => {
  const edit = { replace_exact: { old_text: "a", new_text: "b" }, expected_match_count: 1025 };
  rejected(
    normalizeToolCall("edit_project_files", { project: "~p1", changes: [{ kind: "edit", path: "a", expected_read_revision: "r", edits: [edit] }] }, all),
    "invalid_value",
    "maximum",
  );
});

test("refusals before validation: arguments must be an object (absent means {}); withheld is unknown; each names the tool", () => {
  assert.deepEqual(ok(normalizeToolCall("list_projects", undefined, all)).arguments, {});
  for (const bad of [null, [], "x", 3]) {
    const f = rejected(normalizeToolCall("list_projects", bad, all), "invalid_value", "arguments_not_object");
    assert.equal(f.evidence, undefined);
  }
  const withheld = rejected(
    normalizeToolCall("run_shell", { project: "~p1", command: "ls" }, { isAdmitted: () => true, isWithheld: () => true }),
    "unknown_tool",
    "unknown_tool",
  );
  assert.deepEqual(withheld.evidence, { tool: "run_shell" });
  assert.equal(normalizeToolCall("run_shell", { project: "~p1", command: "ls" }, { isAdmitted: () => true, isWithheld: () => false }).ok, true);
  const unadmitted = rejected(
    normalizeToolCall("run_shell", { project: "~p1", command: "ls" }, { isAdmitted: () => false }),
    "tool_not_admitted",
    "not_admitted",
  );
  assert.deepEqual(unadmitted.evidence, { tool: "run_shell" });
  const differ = rejected(normalizeToolCall("run_process", { project: "~p1", argv: ["a"], args: ["b"] }, all), "conflicting_alias", "argv_args_differ");
  assert.deepEqual(differ.evidence, { field: "/argv" });
  const wrongType = rejected(normalizeToolCall("run_shell", { project: "~p1", command: 5 }, all), "invalid_value");
  assert.equal(wrongType.evidence?.["field"], "/command");
  assert.equal(wrongType.follow_up, undefined, "only unknown and missing fields follow up with the manifest");
});

test("accepted and required field lists are bounded to MAX_ACCEPTED_FIELDS; an unknown field lists no required fields", () => {
  const unknown = rejected(normalizeToolCall("run_process", { project: "~p1", args: ["ls"], nope: 1 }, all), "unknown_field");
  assert.equal(unknown.evidence?.["required_fields"], undefined);
  assert.equal(unknown.evidence?.["accepted_fields_truncated"], undefined);
  const accepted = unknown.evidence?.["accepted_fields"] as string[];
  assert.ok(accepted.length > 0 && accepted.length <= MAX_ACCEPTED_FIELDS);
});

test("cross-field checks name the offending field", () => {
  const edits = (edit: Record<string, unknown>) => ({
    project: "~p1",
    changes: [
      { kind: "create", path: "b", content: "x" },
      { kind: "edit", path: "a", expected_read_revision: "r", edits: [{ replace_exact: { old_text: "a", new_text: "b" } }, edit] },
    ],
  });
  const both = rejected(
    normalizeToolCall("edit_project_files", edits({ replace_exact: { old_text: "c", new_text: "d" }, occurrence: 1, expected_match_count: 2 }), all),
    "invalid_value",
    "occurrence_with_expected_match_count",
  );
  assert.deepEqual(both.evidence, { field: "/changes/1/edits/1/occurrence" });
  ok(normalizeToolCall("edit_project_files", edits({ replace_exact: { old_text: "c", new_text: "d" }, occurrence: 1 }), all));
  ok(normalizeToolCall("edit_project_files", edits({ replace_exact: { old_text: "c", new_text: "d" }, expected_match_count: 2 }), all));
  const reversed = rejected(
    normalizeToolCall("edit_project_files", edits({ replace_exact: { old_text: "c", new_text: "d" }, line_scope: { start_line: 5, end_line: 4 } }), all),
    "invalid_value",
    "line_scope_reversed",
  );
  assert.deepEqual(reversed.evidence, { field: "/changes/1/edits/1/line_scope" });
  ok(normalizeToolCall("edit_project_files", edits({ replace_exact: { old_text: "c", new_text: "d" }, line_scope: { start_line: 5, end_line: 5 } }), all));

  const range = rejected(
    normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a" }, { path: "b", start_line: 3, end_line: 2 }] }, all),
    "invalid_value",
    "range_reversed",
  );
  assert.deepEqual(range.evidence, { field: "/files/1/end_line" });
  ok(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", start_line: 3, end_line: 3 }] }, all));
  ok(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", start_line: 3 }] }, all));
  ok(normalizeToolCall("read_files", { project: "~p1", files: [{ path: "a", end_line: 1 }] }, all));

  const login = rejected(
    normalizeToolCall("run_shell", { project: "~p1", command: "ls", login: true, shell: "sh" }, all),
    "invalid_value",
    "login_requires_bash",
  );
  assert.deepEqual(login.evidence, { field: "/login" });
  ok(normalizeToolCall("run_shell", { project: "~p1", command: "ls", login: true, shell: "bash" }, all));
  ok(normalizeToolCall("run_shell", { project: "~p1", command: "ls", login: false, shell: "sh" }, all));

  const files = (f: Record<string, unknown>) => normalizeToolCall("import_host_files", { project: "~p1", files: [{ path: "ok", content: "x" }, f] }, all);
  for (const f of [{ path: "b" }, { path: "b", content: "x", content_base64: "eA==" }]) {
    const xor = rejected(files(f), "invalid_value", "content_xor_content_base64");
    assert.deepEqual(xor.evidence, { field: "/files/1" });
  }
  ok(files({ path: "b", content_base64: "eA==" }));
});

test("a value at its ceiling is kept and reports no code; clamps reach only the named path", () => {
  const at = ok(normalizeToolCall("run_shell", { project: "~p1", command: "true", timeout_ms: 600_000 }, all));
  assert.equal(at.normalization, undefined);
  const nested = ok(normalizeToolCall("search_project_texts", { project: "~p1", queries: [{ pattern: "a", max_results: 2_000 }] }, all));
  assert.equal(nested.normalization, undefined);
  assert.deepEqual(ok(normalizeToolCall("search_project_texts", { project: "~p1", queries: [{ pattern: "a" }] }, all)).arguments, {
    project: "~p1",
    queries: [{ pattern: "a" }],
  });
  const r = ok(normalizeToolCall("search_project_texts", { project: "~p1", queries: [{ pattern: "a", max_results: 2_001, context_lines: 9 }] }, all));
  assert.deepEqual(r.normalization?.effective, { "queries.0.max_results": 2_000, "queries.0.context_lines": 5 });
  assert.equal(r.normalization?.hint, normalizationHints.clamped_to_ceiling);
});

test("only exact shell forms are rewritten: a third argument that is empty, another flag or another program stays run_process", () => {
  for (const args of [
    ["sh", "-c", ""],
    ["zsh", "-c", "ls"],
    ["sh", "-lc", "ls"],
    ["bash", "-x", "ls"],
    ["sh", "-c"],
    ["sh", "-c", "ls", "x"],
  ]) {
    const r = ok(normalizeToolCall("run_process", { project: "~p1", args }, all));
    assert.equal(r.tool, "run_process", JSON.stringify(args));
  }
  const sh = ok(normalizeToolCall("run_process", { project: "~p1", args: ["sh", "-c", "ls"] }, all));
  assert.deepEqual([sh.tool, sh.arguments], ["run_shell", { project: "~p1", command: "ls", shell: "sh" }]);
  assert.equal(sh.normalization?.hint, normalizationHints.process_shell_to_run_shell);
  const login = ok(normalizeToolCall("run_process", { project: "~p1", args: ["bash", "-lc", "ls"] }, all));
  assert.equal(login.normalization?.hint, normalizationHints.process_bash_login_to_run_shell);
  const argv = ok(normalizeToolCall("run_process", { project: "~p1", argv: ["ls"] }, all));
  assert.equal(argv.normalization?.hint, normalizationHints.argv_to_args);
  for (const hint of Object.values(normalizationHints)) assert.ok(hint.length > 20, hint);
});

test("normalization codes are recognised only by name", () => {
  assert.equal(isToolInputNormalizationCode("argv_to_args"), true);
  assert.equal(isToolInputNormalizationCode("clamped_to_ceiling"), true);
  assert.equal(isToolInputNormalizationCode("nope"), false);
  assert.equal(isToolInputNormalizationCode(undefined), false);
  assert.equal(isToolInputNormalizationCode(["argv_to_args"]), false);
});

test("nulls are dropped inside arrays of objects and the selected union branch only; a value that is not an object is kept", () => {
  const r = ok(
    normalizeToolCall(
      "edit_project_files",
      {
        project: "~p1",
        changes: [{ kind: "edit", path: "a", expected_read_revision: "r", edits: [{ replace_exact: { old_text: "a", new_text: "b" }, occurrence: null }] }],
      },
      all,
    ),
  );
  assert.deepEqual(r.arguments["changes"], [
    { kind: "edit", path: "a", expected_read_revision: "r", edits: [{ replace_exact: { old_text: "a", new_text: "b" } }] },
  ]);
  // content is required in the create branch: its null is kept, so validation refuses it.
  rejected(normalizeToolCall("edit_project_files", { project: "~p1", changes: [{ kind: "create", path: "a", content: null }] }, all), "invalid_value");
  const args = { project: "~p1", args: ["ls", "-la"] };
  assert.equal(ok(normalizeToolCall("run_process", args, all)).arguments["args"], args.args, "nothing to drop: the same array");
});
