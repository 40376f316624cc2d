/**
 * Reads, listings and searches as a Host sees them, through a real MCP client against
 * `webcodex dev`: batched and bounded, .gitignore-aware, honest about truncation, and
 * byte-faithful (binary detected, line endings kept).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { callTool, openDevProject } from "../support/index.js";
import type { DevProject } from "../support/index.js";

const many = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`gen/file-${String(i).padStart(2, "0")}.txt`, `needle ${i}\n`]));
const FILES = {
  ".gitignore": "build/\n*.log\n",
  "README.md": "# reads\n",
  "src/app.ts": "export function Start() {}\nexport function start() {}\n",
  "src/util.ts": "export const util = 1;\n",
  "src/crlf.txt": "one\r\ntwo\r\n",
  "build/out.js": "needle in build\n",
  "debug.log": "needle in log\n",
  ...many,
};

describe("reads, listings and searches through a real MCP client (webcodex dev)", () => {
  let dev: DevProject;
  let projectDir: string;
  let client: Client;
  let project: string;

  before(async () => {
    // The ignored files (build/, *.log) are on disk but not committed; so is the binary file.
    dev = await openDevProject(FILES, {
      name: "reads",
      prepare: (dir) => writeFileSync(join(dir, "logo.bin"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x01, 0xff])),
    });
    ({ projectDir, client, project } = dev);
  });
  after(() => dev?.close());

  it("read_files batches files and ranges, keeps CRLF, and reports binary files instead of their bytes", async () => {
    const { isError, result } = await callTool(client, "read_files", {
      project,
      files: [{ path: "src/crlf.txt" }, { path: "logo.bin" }, { path: "src/app.ts", start_line: 2, end_line: 2 }],
    });
    assert.equal(isError, false, JSON.stringify(result));
    const [crlf, binary, range] = result["items"] as Array<Record<string, unknown>>;
    assert.equal(crlf?.["content"], "one\r\ntwo\r\n");
    assert.equal(crlf?.["line_ending"], "crlf");
    assert.equal(binary?.["binary"], true);
    assert.equal(binary?.["size_bytes"], 8);
    assert.ok(!("content" in (binary ?? {})), "no bytes of a binary file in the answer");
    assert.equal(range?.["content"], "export function start() {}\n");
  });

  it("a byte budget cuts honestly and the continuation reassembles the file exactly, through an over-long line", async () => {
    const original = "short\n" + "x".repeat(300) + "\n" + "tail line\n";
    writeFileSync(join(projectDir, "long.txt"), original);
    let assembled = "";
    let next: Record<string, unknown> = { path: "long.txt" };
    for (let call = 0; call < 20; call++) {
      const { isError, result } = await callTool(client, "read_files", { project, files: [next], max_bytes_per_file: 128 });
      assert.equal(isError, false, JSON.stringify(result));
      const item = (result["items"] as Array<Record<string, unknown>>)[0] ?? {};
      assembled += String(item["content"]);
      if (item["truncated"] !== true) break;
      assert.equal(item["truncated_by"], "max_bytes_per_file");
      next = { path: "long.txt", start_line: item["next_start_line"], ...(item["next_start_column"] ? { start_column: item["next_start_column"] } : {}) };
    }
    assert.equal(assembled, original);
  });

  it("a missing file is path_not_found for that item only", async () => {
    const { result } = await callTool(client, "read_files", { project, files: [{ path: "nope.txt" }, { path: "README.md" }] });
    const [missing, present] = result["items"] as Array<Record<string, Record<string, unknown>>>;
    assert.equal(missing?.["error"]?.["reason_code"], "path_not_found");
    assert.equal((present as unknown as Record<string, unknown>)["content"], "# reads\n");
  });

  it("list_project_files is .gitignore-aware, takes a glob, and states total and truncation", async () => {
    const all = await callTool(client, "call_runtime_tool", { tool: "list_project_files", arguments: { project } });
    const paths = all.result["paths"] as string[];
    assert.ok(paths.includes("src/app.ts") && paths.includes(".gitignore"));
    assert.ok(!paths.some((p) => p.startsWith("build/") || p.endsWith(".log")), "ignored files are not listed");
    const globbed = await callTool(client, "call_runtime_tool", { tool: "list_project_files", arguments: { project, glob: "src/*.ts" } });
    assert.deepEqual(globbed.result["paths"], ["src/app.ts", "src/util.ts"]);
    const bounded = await callTool(client, "call_runtime_tool", { tool: "list_project_files", arguments: { project, path: "gen", max_results: 5 } });
    assert.deepEqual([(bounded.result["paths"] as string[]).length, bounded.result["total"], bounded.result["truncated"]], [5, 30, true]);
    assert.equal((bounded.result["paths"] as string[])[0], "gen/file-00.txt", "the first of the sorted listing, not whatever came first");
    const missing = await callTool(client, "call_runtime_tool", { tool: "list_project_files", arguments: { project, path: "no/such/dir" } });
    assert.deepEqual([missing.isError, missing.result["reason_code"]], [true, "path_not_found"]);
  });

  it("search_project_texts: literal by default, regex on request, case, globs, ignore rules, and exact totals with truncation", async () => {
    const { isError, result } = await callTool(client, "search_project_texts", {
      project,
      queries: [
        { pattern: "start()" },
        { pattern: "start\\(\\)", regex: true, case_sensitive: false },
        { pattern: "needle", glob: "gen/**", max_results: 3 },
        { pattern: "needle in" },
        { pattern: "util", path: "src" },
      ],
    });
    assert.equal(isError, false, JSON.stringify(result));
    const [literal, regex, bounded, ignored, scoped] = result["results"] as Array<Record<string, unknown>>;
    assert.deepEqual(
      (literal?.["matches"] as Array<Record<string, unknown>>).map((m) => [m["path"], m["line"]]),
      [["src/app.ts", 2]],
      "literal and case-sensitive by default",
    );
    assert.equal(regex?.["total"], 2);
    assert.deepEqual([bounded?.["total"], (bounded?.["matches"] as unknown[]).length, bounded?.["truncated"]], [30, 3, true]);
    assert.equal(ignored?.["total"], 0, "matches in ignored files are not reported");
    assert.equal(scoped?.["total"], 1);
  });

  it("an invalid regex fails that query with a reason, not the batch", async () => {
    const { result } = await callTool(client, "search_project_texts", { project, queries: [{ pattern: "(", regex: true }, { pattern: "util" }] });
    const [bad, good] = result["results"] as Array<Record<string, unknown>>;
    assert.equal((bad?.["error"] as Record<string, unknown>)["reason_code"], "invalid_value");
    assert.ok(Number(good?.["total"]) >= 1);
  });
});
