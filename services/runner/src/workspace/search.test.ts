import assert from "node:assert/strict";
import { chmod, writeFile } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { describe, it } from "node:test";
import { ReasonCode } from "@webcodex/contracts";
import { expectFailure, git, tempDir, tempWorkspace } from "./workspace.test-support.js";
import { SEARCH_COUNT_CEILING } from "./search-texts.js";
import { verifyMatches } from "./search-context.js";
import { createPathPolicy } from "./path-policy.js";
import type { SearchQuerySuccess, Workspace, SearchQuery } from "./types.js";

const TREE = {
  ".gitignore": "ignored/\n*.log\n",
  "src/a.ts": "export const Foo = 1;\nconst foo = Foo + 1;\n",
  "src/b.ts": "// a.b literal, not a regex\nfoo(bar)\n",
  "docs/readme.md": "Foo docs\n",
  ".hidden/config": "foo hidden\n",
  "ignored/skip.ts": "foo ignored\n",
  "debug.log": "foo log\n",
};

async function search(ws: Workspace, query: SearchQuery): Promise<SearchQuerySuccess> {
  const [result] = (await ws.searchProjectTexts({ queries: [query] })).results;
  assert.ok(result?.success === true, JSON.stringify(result));
  return result as SearchQuerySuccess;
}

async function searchAny(ws: Workspace, query: SearchQuery): Promise<Record<string, unknown>> {
  const [result] = (await ws.searchProjectTexts({ queries: [query] })).results;
  assert.ok(result?.success === true, JSON.stringify(result));
  return result as unknown as Record<string, unknown>;
}

describe("list_project_files", () => {
  it("lists sorted paths, includes hidden files, respects .gitignore and skips .git", async () => {
    const { root, ws } = await tempWorkspace(TREE);
    git(root, "init", "-q");
    const result = await ws.listProjectFiles({});
    assert.deepEqual(result.paths, [".gitignore", ".hidden/config", "docs/readme.md", "src/a.ts", "src/b.ts"]);
    assert.deepEqual([result.total, result.truncated], [5, false]);
  });

  it("respects .gitignore even when the workspace is not a git repository", async () => {
    const { ws } = await tempWorkspace(TREE);
    const result = await ws.listProjectFiles({});
    assert.equal(result.paths.includes("ignored/skip.ts"), false);
    assert.equal(result.paths.includes("debug.log"), false);
  });

  it("filters by path and glob and bounds the listing with an exact total", async () => {
    const { ws } = await tempWorkspace(TREE);
    assert.deepEqual((await ws.listProjectFiles({ path: "src" })).paths, ["src/a.ts", "src/b.ts"]);
    assert.deepEqual((await ws.listProjectFiles({ glob: "*.md" })).paths, ["docs/readme.md"]);
    const bounded = await ws.listProjectFiles({ max_results: 2 });
    assert.deepEqual(bounded, { paths: [".gitignore", ".hidden/config"], total: 5, truncated: true });
  });

  it("returns the first max_results of the fully sorted listing", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 60; i++) files[`d${i % 7}/f${String(i).padStart(2, "0")}.txt`] = "x";
    const { ws } = await tempWorkspace(files);
    const all = Object.keys(files).sort();
    const result = await ws.listProjectFiles({ max_results: 10 });
    assert.deepEqual(result.paths, all.slice(0, 10));
    assert.deepEqual([result.total, result.truncated], [60, true]);
  });

  it("a missing list path is path_not_found", async () => {
    const { ws } = await tempWorkspace(TREE);
    await expectFailure(ws.listProjectFiles({ path: "nope" }), ReasonCode.pathNotFound);
  });
});

describe("search_project_texts", () => {
  it("searches literally by default: regex metacharacters match themselves", async () => {
    const { ws } = await tempWorkspace(TREE);
    const literal = await search(ws, { pattern: "foo(bar)" });
    assert.deepEqual(literal.matches, [{ path: "src/b.ts", line: 2, text: "foo(bar)" }]);
    assert.equal((await search(ws, { pattern: "a.b" })).total, 1);
  });

  it("searches by regex on request", async () => {
    const { ws } = await tempWorkspace(TREE);
    const result = await search(ws, { pattern: "^(export )?const \\w+", regex: true });
    assert.deepEqual(
      result.matches.map((m) => `${m.path}:${m.line}`),
      ["src/a.ts:1", "src/a.ts:2"],
    );
  });

  it("is case sensitive by default and insensitive on request", async () => {
    const { ws } = await tempWorkspace(TREE);
    assert.deepEqual(
      (await search(ws, { pattern: "Foo" })).matches.map((m) => `${m.path}:${m.line}`),
      ["docs/readme.md:1", "src/a.ts:1", "src/a.ts:2"],
    );
    const insensitive = await search(ws, { pattern: "foo", case_sensitive: false });
    assert.deepEqual(
      insensitive.matches.map((m) => `${m.path}:${m.line}`),
      [".hidden/config:1", "docs/readme.md:1", "src/a.ts:1", "src/a.ts:2", "src/b.ts:2"],
    );
  });

  it("respects .gitignore and never searches .git", async () => {
    const { root, ws } = await tempWorkspace(TREE);
    git(root, "init", "-q");
    const result = await search(ws, { pattern: "foo" });
    const paths = result.matches.map((m) => m.path);
    assert.equal(paths.includes("ignored/skip.ts"), false);
    assert.equal(paths.includes("debug.log"), false);
    assert.equal(
      paths.some((p) => p.startsWith(".git/")),
      false,
    );
  });

  it("filters by path and glob", async () => {
    const { ws } = await tempWorkspace(TREE);
    assert.deepEqual(
      (await search(ws, { pattern: "foo", path: "src" })).matches.map((m) => m.path),
      ["src/a.ts", "src/b.ts"],
    );
    assert.deepEqual(
      (await search(ws, { pattern: "oo", glob: "*.md" })).matches.map((m) => m.path),
      ["docs/readme.md"],
    );
    assert.deepEqual((await search(ws, { pattern: "Foo", path: "src/a.ts" })).matches.length, 2);
  });

  it("bounds matches by max_results while reporting the exact total", async () => {
    const { ws } = await tempWorkspace({ "many.txt": "hit\n".repeat(30), "more.txt": "hit\n".repeat(5) });
    const result = await search(ws, { pattern: "hit", max_results: 10 });
    assert.equal(result.matches.length, 10);
    assert.equal(result.total, 35);
    assert.equal(result.truncated, true);
    assert.equal(result.total_is_lower_bound, undefined);
    assert.deepEqual(
      result.matches.map((m) => m.line),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
    assert.equal(result.matches[0]?.path, "many.txt");
  });

  it("cuts long match lines to 500 characters and strips CR", async () => {
    const { ws } = await tempWorkspace({ "long.txt": "x".repeat(3000) + "needle\n", "crlf.txt": "needle here\r\n" });
    const result = await search(ws, { pattern: "needle" });
    const long = result.matches.find((m) => m.path === "long.txt");
    assert.equal(long?.text.length, 500);
    assert.equal(long?.text_truncated, true);
    assert.equal(result.matches.find((m) => m.path === "crlf.txt")?.text, "needle here");
  });

  it("reports a missing search path as path_not_found per query, not a process failure", async () => {
    const { ws } = await tempWorkspace(TREE);
    const { results } = await ws.searchProjectTexts({
      queries: [
        { pattern: "foo", path: "no/such/dir" },
        { pattern: "Foo", path: "docs" },
      ],
    });
    assert.ok(results[0]?.success === false);
    assert.equal(results[0].error.reason_code, "path_not_found");
    assert.equal(results[0].error.failure_stage, "resolution");
    assert.ok(results[1]?.success === true);
    assert.equal((results[1] as SearchQuerySuccess).total, 1);
  });

  it("reports an invalid regex as invalid_value with detail invalid_regex", async () => {
    const { ws } = await tempWorkspace(TREE);
    const [result] = (await ws.searchProjectTexts({ queries: [{ pattern: "foo(", regex: true }] })).results;
    assert.ok(result?.success === false);
    assert.equal(result.error.reason_code, "invalid_value");
    assert.equal(result.error.detail_code, "invalid_regex");
  });

  it("stops counting at the ceiling and says the total is a lower bound", async () => {
    const { ws } = await tempWorkspace({ "huge.txt": "hit\n".repeat(SEARCH_COUNT_CEILING + 10) });
    const result = await search(ws, { pattern: "hit", max_results: 3 });
    assert.equal(result.total_is_lower_bound, true);
    assert.equal(result.truncated, true);
    assert.ok(result.total >= 3 && result.total <= SEARCH_COUNT_CEILING);
    assert.deepEqual(
      result.matches.map((m) => m.line),
      [1, 2, 3],
    );
  });

  it("a search whose rg is killed by a signal after some output says its total is a lower bound", async () => {
    const dir = await tempDir();
    // Stands in for rg: prints one match in rg's --null framing, then dies by SIGKILL.
    const fakeRg = path.join(dir, "rg-killed");
    await writeFile(fakeRg, "#!/bin/sh\nprintf './src/a.ts\\0003:const foo = 1;\\n'\nkill -KILL $$\n", { mode: 0o755 });
    const { ws } = await tempWorkspace(TREE, { rgPath: fakeRg });
    const result = await search(ws, { pattern: "foo" });
    assert.deepEqual(result.matches, [{ path: "src/a.ts", line: 3, text: "const foo = 1;" }]);
    assert.equal(result.total, 1);
    assert.equal(result.total_is_lower_bound, true, "rg did not finish: more matches may exist");
    assert.equal(result.search_errors, undefined);

    // Killed before printing anything: nothing is known, so the query fails rather than claiming 0.
    const silentRg = path.join(dir, "rg-silent");
    await writeFile(silentRg, "#!/bin/sh\nkill -KILL $$\n", { mode: 0o755 });
    const silent = await tempWorkspace(TREE, { rgPath: silentRg });
    const [failed] = (await silent.ws.searchProjectTexts({ queries: [{ pattern: "foo" }] })).results;
    assert.ok(failed?.success === false);
    assert.equal(failed.error.detail_code, "rg_failed");
    assert.equal((failed.error.evidence as Record<string, unknown>)["signal"], "SIGKILL");
  });

  it("returns independent queries in request order", async () => {
    const { ws } = await tempWorkspace(TREE);
    const { results } = await ws.searchProjectTexts({ queries: [{ pattern: "docs" }, { pattern: "zzz-nothing" }, { pattern: "../x", path: "../x" }] });
    assert.deepEqual(
      results.map((r) => (r.success ? (r as SearchQuerySuccess).total : r.error.reason_code)),
      [1, 0, "path_outside_project"],
    );
  });
});

describe("rg timeout", () => {
  async function slowRg(script: string): Promise<string> {
    const dir = await tempDir();
    const file = path.join(dir, "rg");
    await writeFile(file, `#!/bin/sh\n${script}\n`);
    await chmod(file, 0o755);
    return file;
  }

  it("an rg that never finishes is killed at its timeout: nothing found is a failure, something found is a lower bound", async () => {
    const silent = await tempWorkspace({ "a.txt": "x\n" }, { rgPath: await slowRg("exec sleep 30"), rgTimeoutMs: 300 });
    const started = Date.now();
    await expectFailure(silent.ws.listProjectFiles({}), ReasonCode.executionFailed);
    const [search] = (await silent.ws.searchProjectTexts({ queries: [{ pattern: "x" }] })).results;
    assert.ok(search && !search.success && search.error.detail_code === "rg_timed_out", JSON.stringify(search));
    assert.ok(Date.now() - started < 10_000, "rg was not left running");

    const partial = await tempWorkspace({ "a.txt": "x\n" }, { rgPath: await slowRg("echo a.txt; exec sleep 30"), rgTimeoutMs: 300 });
    const listed = await partial.ws.listProjectFiles({});
    assert.deepEqual(listed.paths, ["a.txt"]);
    assert.equal(listed.total_is_lower_bound, true);
  });
});

describe("low-context search", () => {
  const MANY = {
    "src/a.ts": "one\nfoo 1\ntwo\nthree\nfoo 2\nfour\n",
    "src/b.ts": "foo only\n",
    "src/c.ts": "nothing\n",
  };

  it("output files lists matching files with counts, bounded by max_results", async () => {
    const { ws } = await tempWorkspace(MANY);
    const r = await searchAny(ws, { pattern: "foo", output: "files" });
    assert.deepEqual(r["files"], [
      { path: "src/a.ts", match_count: 2 },
      { path: "src/b.ts", match_count: 1 },
    ]);
    assert.deepEqual([r["file_count"], r["match_count"], r["truncated"], "matches" in r], [2, 3, false, false]);
    const cut = await searchAny(ws, { pattern: "foo", output: "files", max_results: 1 });
    assert.deepEqual([cut["files"], cut["file_count"], cut["truncated"]], [[{ path: "src/a.ts", match_count: 2 }], 2, true]);
  });

  it("output count returns only the counts", async () => {
    const { ws } = await tempWorkspace(MANY);
    const r = await searchAny(ws, { pattern: "foo", output: "count" });
    assert.deepEqual(r, { success: true, error: null, match_count: 3, file_count: 2 });
  });

  it("context_lines adds bounded lines before and after each match; out of range or with files output fails closed", async () => {
    const { ws } = await tempWorkspace(MANY);
    const r = await search(ws, { pattern: "foo", context_lines: 1, path: "src/a.ts" });
    assert.deepEqual(r.matches, [
      { path: "src/a.ts", line: 2, text: "foo 1", before: ["one"], after: ["two"] },
      { path: "src/a.ts", line: 5, text: "foo 2", before: ["three"], after: ["four"] },
    ]);
    for (const bad of [
      { pattern: "foo", context_lines: 6 },
      { pattern: "foo", output: "count" as const, context_lines: 1 },
    ]) {
      const [res] = (await ws.searchProjectTexts({ queries: [bad] })).results;
      assert.equal(res?.success, false, JSON.stringify(bad));
    }
  });

  it("search_file_context returns the matches with context and the read_revision read_files reports", async () => {
    const { ws } = await tempWorkspace(MANY);
    const r = await ws.searchFileContext({ path: "src/a.ts", pattern: "foo", context_lines: 2, max_matches: 1 });
    const [item] = (await ws.readFiles({ files: [{ path: "src/a.ts" }] })).items;
    assert.equal(r.read_revision, (item as { read_revision: string }).read_revision);
    assert.deepEqual(r, {
      path: "src/a.ts",
      read_revision: r.read_revision,
      total_lines: 6,
      match_count: 2,
      matches: [{ line: 2, text: "foo 1", before: ["one"], after: ["two", "three"] }],
      truncated: true,
    });
    const regex = await ws.searchFileContext({ path: "src/a.ts", pattern: "^foo \\d$", regex: true, context_lines: 0 });
    assert.deepEqual(
      regex.matches.map((m) => m.line),
      [2, 5],
    );
    await expectFailure(ws.searchFileContext({ path: "src/missing.ts", pattern: "x" }), ReasonCode.pathNotFound);
    await expectFailure(ws.searchFileContext({ path: "../x", pattern: "x" }), ReasonCode.pathOutsideProject);
  });

  it("matches carry the read_revision of each matched file, proven against the content read, so a guarded edit can follow", async () => {
    const { root, ws } = await tempWorkspace({ "a.ts": "use(1);\nx\nuse(2);\n", "b.ts": "use(3);\n", "c.ts": "nothing\n" });
    const revision = async (p: string) => ((await ws.readFiles({ files: [{ path: p }] })).items[0] as { read_revision: string }).read_revision;
    const found = await search(ws, { pattern: "use(" });
    assert.deepEqual(found.read_revisions, { "a.ts": await revision("a.ts"), "b.ts": await revision("b.ts") });
    const edited = await ws.editProjectFiles({
      changes: [
        {
          kind: "edit",
          path: "a.ts",
          expected_read_revision: found.read_revisions?.["a.ts"] as string,
          edits: [{ replace_exact: { old_text: "use(", new_text: "run(" }, expected_match_count: 2 }],
        },
      ],
    });
    assert.equal(edited.changed, true);
    // Regex and case-insensitive queries prove the listed lines; a cut listing still proves what it lists.
    assert.deepEqual((await search(ws, { pattern: "run\\(\\d\\)", regex: true })).read_revisions, { "a.ts": await revision("a.ts") });
    assert.deepEqual(Object.keys((await search(ws, { pattern: "USE", case_sensitive: false })).read_revisions ?? {}), ["b.ts"]);
    assert.deepEqual((await search(ws, { pattern: "run(", max_results: 1 })).read_revisions, { "a.ts": await revision("a.ts") });
    // No revision for a file above the revision read ceiling, nor from files/count output.
    await writeFile(path.join(root, "big.ts"), "use(9);\n" + "y\n".repeat(600_000));
    assert.equal((await search(ws, { pattern: "use(9)" })).read_revisions, undefined, "a file above the revision read ceiling gets none");
    assert.equal((await searchAny(ws, { pattern: "use(", output: "files" }))["read_revisions"], undefined);
  });

  it("a file that changed after rg saw it gets no read_revision: listed lines and the recount must hold in the content read", async () => {
    const { root } = await tempWorkspace({ "a.ts": "use(1);\nuse(2);\n" });
    const resolver = await createPathPolicy(root).open();
    const listed = [
      { path: "a.ts", line: 1, text: "use(1);" },
      { path: "a.ts", line: 2, text: "use(2);" },
    ];
    assert.deepEqual(
      Object.keys(
        await verifyMatches(
          resolver,
          listed.map((m) => ({ ...m })),
          { contextLines: 0, fixedString: "use(", perFile: new Map([["a.ts", 2]]) },
        ),
      ),
      ["a.ts"],
    );
    assert.deepEqual(
      await verifyMatches(
        resolver,
        listed.map((m) => ({ ...m })),
        { contextLines: 0, fixedString: "use(", perFile: new Map([["a.ts", 3]]) },
      ),
      {},
      "rg counted a match the content read lacks",
    );
    assert.deepEqual(
      await verifyMatches(resolver, [{ path: "a.ts", line: 2, text: "use(3);" }], { contextLines: 1 }),
      {},
      "a listed line the content read does not hold",
    );
  });
});

describe("special files", () => {
  it("a FIFO named as the search or list path is not_a_file at once (rg never waits on it)", async () => {
    const { ws, root } = await tempWorkspace(TREE);
    execFileSync("mkfifo", [path.join(root, "pipe")]);
    const started = performance.now();
    const [result] = (await ws.searchProjectTexts({ queries: [{ pattern: "foo", path: "pipe" }] })).results;
    assert.equal(JSON.stringify(result).includes(ReasonCode.notAFile), true, JSON.stringify(result));
    await expectFailure(ws.listProjectFiles({ path: "pipe" }), ReasonCode.notAFile);
    assert.ok(performance.now() - started < 5_000);
  });
});
