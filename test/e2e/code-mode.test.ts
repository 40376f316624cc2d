/**
 * Code Mode end to end (`webcodex dev` as a real process, real MCP clients): one
 * run_code_cell searches, reads the ranges it found, greps the callers of what it read and
 * texts a 10-line answer: one model-visible call, whose every child call is an audit row with
 * the cell as parent. Exposure: Direct for a Host whose token selects Code Mode, through
 * call_runtime_tool for the others; read_tool_manifest gives the cell's TypeScript API.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createPgliteDatabase } from "@webcodex/platform";
import { callTool, connectMcp, createProjectDir, firstProjectRef, startDevServer, tempDir } from "../support/index.js";
import type { DevServer } from "../support/index.js";

const TOKENS = { code: "codemode-dev-token-0123456789abcdef", plain: "plainhost-dev-token-0123456789abcd" };

const FILES = {
  "src/config.ts": [
    "export interface Config { name: string; port: number }",
    "",
    "export function parseConfig(text: string): Config {",
    "  const [name, port] = text.split(':');",
    "  return { name: name ?? '', port: Number(port) };",
    "}",
    "",
  ].join("\n"),
  "src/server.ts": "import { parseConfig } from './config.js';\nexport const cfg = parseConfig('web:80');\n",
  "src/cli.ts": "import { parseConfig } from './config.js';\nconsole.log(parseConfig(process.argv[2] ?? ''));\n",
  "README.md": "# demo\n",
};

/** The cell a model would write: each step depends on the one before; only the answer is texted. */
const CELL = `
const found = await tools.search_project_texts({ queries: [{ pattern: "export function parseConfig" }] });
const hit = found.results[0].matches[0];
const read = await tools.read_files({ files: [{ path: hit.path, start_line: hit.line, end_line: hit.line + 3 }] });
const body = read.items[0].content.split("\\n").filter(Boolean);
const callers = await tools.search_project_texts({ queries: [{ pattern: "parseConfig(", output: "files" }] });
const files = callers.results[0].files.map((f) => f.path).filter((p) => p !== hit.path).sort();
text("definition: " + hit.path + ":" + hit.line);
for (const line of body) text("  " + line.trim());
text("callers (" + files.length + "):");
for (const f of files) text("  " + f);
text("done");
`;

describe("Code Mode through webcodex dev", { timeout: 240_000 }, () => {
  let server: DevServer;
  let dataDir: string;
  let code: Client;
  let plain: Client;
  let cellResult: { isError: boolean; result: Record<string, unknown> };
  let rows: Array<Record<string, unknown>> = [];
  let listedCode: string[] = [];
  let listedPlain: string[] = [];
  let manifest: Record<string, unknown> = {};
  let refused: { isError: boolean; result: Record<string, unknown> };
  let handoff: Record<string, unknown> = {};
  let cellContent: Array<{ type: string; text?: string }> = [];

  before(async () => {
    const dir = tempDir("wcx-codemode-");
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: TOKENS.code, client_id: "local", subject: "coder", host_profile: "code_mode" },
          { token: TOKENS.plain, client_id: "local", subject: "plain" },
        ],
      }),
    );
    dataDir = tempDir("wcx-codemode-data-");
    server = await startDevServer({ projectDir: createProjectDir(FILES, { name: "codemode" }), dataDir, tokensFile: join(dir, "tokens.json") });
    [code, plain] = await Promise.all([connectMcp(server.mcpUrl, TOKENS.code), connectMcp(server.mcpUrl, TOKENS.plain)]);
    listedCode = (await code.listTools()).tools.map((t) => t.name);
    listedPlain = (await plain.listTools()).tools.map((t) => t.name);
    manifest = (await callTool(plain, "read_tool_manifest", { tool: "run_code_cell" })).result;
    const [codeProject, plainProject] = await Promise.all([firstProjectRef(code), firstProjectRef(plain)]);
    const session = await callTool(code, "call_runtime_tool", { tool: "create_session", arguments: { project: codeProject, title: "cell" } });
    assert.equal(session.isError, false, JSON.stringify(session.result));
    const sessionRef = String(session.result["session_ref"]);
    // One direct call in the Session first: it has no parent.
    await callTool(code, "read_files", { project: codeProject, session_id: sessionRef, files: [{ path: "README.md" }] });
    const raw = await code.callTool({ name: "run_code_cell", arguments: { project: codeProject, code: CELL, session_id: sessionRef } });
    cellResult = { isError: raw.isError === true, result: (raw.structuredContent ?? {}) as Record<string, unknown> };
    cellContent = raw.content as Array<{ type: string; text?: string }>;
    handoff = (await callTool(code, "call_runtime_tool", { tool: "read_session_handoff", arguments: { session_id: sessionRef } })).result;
    refused = await callTool(plain, "call_runtime_tool", {
      tool: "run_code_cell",
      arguments: { project: plainProject, code: `text("before"); await tools.edit_project_files({ changes: [] });` },
    });
    await Promise.all([code.close(), plain.close()]);
    await server.stop();
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      rows = (await db.query<Record<string, unknown>>("SELECT call_id, tool, outcome, summary FROM audit.action_audit ORDER BY started_at, call_id")).rows;
    } finally {
      await db.close();
    }
  });
  after(async () => {
    await server?.stop();
  });

  it("a cell searches, reads what it found and greps its callers, answering in 10 lines from one call", () => {
    assert.equal(cellResult.isError, false, JSON.stringify(cellResult.result));
    const { text, truncated, child_calls, elapsed_ms } = cellResult.result;
    assert.equal(
      text,
      [
        "definition: src/config.ts:3",
        "  export function parseConfig(text: string): Config {",
        "  const [name, port] = text.split(':');",
        "  return { name: name ?? '', port: Number(port) };",
        "  }",
        "callers (2):",
        "  src/cli.ts",
        "  src/server.ts",
        "done",
        "",
      ].join("\n"),
    );
    assert.equal(String(text).split("\n").length, 10);
    // What the model reads is the answer itself, once: not a JSON copy of the structured result.
    assert.deepEqual(cellContent, [{ type: "text", text }]);
    assert.equal(truncated, false);
    assert.equal(child_calls, 3);
    assert.equal(typeof elapsed_ms, "number");
  });

  it("every child call is an audit row whose parent is the cell's call", () => {
    const cells = rows.filter((r) => r["tool"] === "run_code_cell");
    assert.equal(cells.length, 2);
    const first = cells[0] as Record<string, unknown>;
    const children = rows.filter((r) => (r["summary"] as Record<string, unknown>)["parent_call_id"] === first["call_id"]);
    assert.deepEqual(
      children.map((r) => [r["tool"], r["outcome"]]),
      [
        ["search_project_texts", "success"],
        ["read_files", "success"],
        ["search_project_texts", "success"],
      ],
    );
    // The refused effectful name never reached the pipeline: the second cell has no children.
    const second = cells[1] as Record<string, unknown>;
    assert.equal(rows.filter((r) => (r["summary"] as Record<string, unknown>)["parent_call_id"] === second["call_id"]).length, 0);
    assert.equal(second["outcome"], "failure");
  });

  it("the Session handoff lists the cell's child calls with the cell's call id as their parent", () => {
    const cell = rows.find((r) => r["tool"] === "run_code_cell") as Record<string, unknown>;
    assert.equal(typeof cell["call_id"], "string");
    const recent = (handoff["recent_calls"] as Array<Record<string, unknown>>).map((c) => [c["tool"], c["outcome"], c["parent_call_id"]]);
    assert.deepEqual(recent, [
      ["read_files", "success", undefined],
      ["search_project_texts", "success", cell["call_id"]],
      ["read_files", "success", cell["call_id"]],
      ["search_project_texts", "success", cell["call_id"]],
    ]);
  });

  it("an effectful tool named in a cell fails inside it as tool_not_admitted, with the text so far", () => {
    assert.equal(refused.isError, true);
    assert.equal(refused.result["reason_code"], "execution_failed");
    assert.equal(refused.result["outcome_unknown"], false);
    assert.equal(refused.result["state_changed"], false);
    const evidence = refused.result["evidence"] as Record<string, unknown>;
    assert.equal(evidence["child_reason_code"], "tool_not_admitted");
    assert.equal(evidence["text"], "before\n");
    assert.equal(evidence["line"], 1);
  });

  it("is Direct for the Host that selects Code Mode and reached through call_runtime_tool by others", () => {
    assert.ok(listedCode.includes("run_code_cell"));
    assert.ok(!listedPlain.includes("run_code_cell"));
  });

  it("read_tool_manifest gives the cell's TypeScript API, generated from the read-only tools' schemas", () => {
    const declaration = String(manifest["declaration"]);
    assert.match(declaration, /declare const tools: \{/);
    assert.match(declaration, /read_files\(args: \{/);
    assert.match(declaration, /search_project_texts\(args: \{/);
    assert.match(declaration, /declare function text\(value: unknown\): void;/);
    assert.doesNotMatch(declaration, /edit_project_files|run_shell|create_session/);
  });
});
