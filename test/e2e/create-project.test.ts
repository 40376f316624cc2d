/**
 * create_project from git through the real path (MCP SDK client → `webcodex dev` → gateway →
 * ref-resolver + broker → an in-process Runner that clones): a repository served by a
 * `git daemon` and by `git http-backend` behind HTTP Basic auth, both started here. Pending,
 * then ready (the follow-up executed exactly as returned) with the files readable; a bad URL,
 * a missing ref and a refused credential each fail with a structured reason and leave no
 * project behind; the clone credential appears in no result, log line or audit row.
 * delete_project removes the Project and its workspace; `--project DIR` keeps working.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createPgliteDatabase } from "@webcodex/platform";
import {
  callTool,
  connectMcp,
  createBareRepo,
  executeFollowUp,
  createProjectDir,
  startDevServer,
  startGitDaemon,
  startGitHttpServer,
  tempDir,
} from "../support/index.js";
import type { DevServer, GitServer, ToolOutcome } from "../support/index.js";

const SECRET = "clone-secret-Zx81-do-not-leak";
const TOKENS = { acme: "acme-dev-token-0123456789abcdef", wrong: "wrong-dev-token-0123456789abcde" };

describe("create_project from git (embedded)", { timeout: 240_000 }, () => {
  let daemon: GitServer;
  let httpGit: Awaited<ReturnType<typeof startGitHttpServer>>;
  let server: DevServer;
  let dataDir: string;
  let acme: Client;
  let wrong: Client;
  const results: unknown[] = [];

  const call = async (client: Client, tool: string, args: Record<string, unknown>): Promise<ToolOutcome> => {
    const outcome = await callTool(client, "call_runtime_tool", { tool, arguments: args });
    results.push(outcome);
    return outcome;
  };
  const ids = async (client: Client) =>
    ((await callTool(client, "list_projects", {})).result["projects"] as Array<Record<string, string>>).map((p) => p["project_id"]).sort();
  const workspaces = () => (existsSync(join(dataDir, "workspaces")) ? readdirSync(join(dataDir, "workspaces")) : []);

  before(async () => {
    const base = tempDir("wcx-git-repos-");
    createBareRepo(
      base,
      "app",
      { "README.md": "# app from git\n", "src/main.ts": "export const main = 1;\n" },
      { feature: { "FEATURE.md": "only on feature\n" } },
    );
    daemon = await startGitDaemon(base);
    httpGit = await startGitHttpServer(base, { username: "clone-bot", password: SECRET });
    const dir = tempDir("wcx-create-cfg-");
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        tokens: [
          { token: TOKENS.acme, client_id: "acme", subject: "alice" },
          { token: TOKENS.wrong, client_id: "wrong", subject: "eve" },
        ],
      }),
    );
    writeFileSync(
      join(dir, "git-credentials.json"),
      JSON.stringify({
        tenants: {
          acme: { username: "clone-bot", password: SECRET, url_prefix: `${httpGit.url}/` },
          wrong: { username: "clone-bot", password: "not-the-secret" },
        },
      }),
    );
    dataDir = tempDir("wcx-create-data-");
    server = await startDevServer({
      projectDir: createProjectDir({ "LOCAL.md": "local dir\n" }, { name: "local-dir" }),
      dataDir,
      tokensFile: join(dir, "tokens.json"),
      // The test git servers listen on loopback, which a clone may reach only when the operator allows it.
      env: { WEBCODEX_GIT_CREDENTIALS_FILE: join(dir, "git-credentials.json"), WEBCODEX_LOG_LEVEL: "debug", WEBCODEX_CLONE_ALLOW_HOSTS: "127.0.0.1" },
    });
    [acme, wrong] = await Promise.all([connectMcp(server.mcpUrl, TOKENS.acme), connectMcp(server.mcpUrl, TOKENS.wrong)]);
  });
  after(async () => {
    await Promise.all([acme?.close(), wrong?.close()]);
    await server?.stop();
    await Promise.all([daemon?.close(), httpGit?.close()]);
  });

  it("git daemon: pending, then ready through the returned follow-up, with the repository's files readable", async () => {
    const pending = await call(acme, "create_project", { name: "from-daemon", source: { git: { url: `${daemon.url}/app.git` } }, wait_ms: 0 });
    assert.deepEqual(pending, {
      isError: false,
      result: {
        project_id: "agent:acme:from-daemon",
        project_state: "pending",
        follow_up: {
          follow_up_kind: "mechanically_followable",
          tool: "call_runtime_tool",
          arguments: { tool: "wait_for_project_ready", arguments: { project: "agent:acme:from-daemon" } },
        },
      },
    });
    let outcome: ToolOutcome = pending;
    for (let i = 0; i < 20 && outcome.result["project_state"] === "pending"; i++) {
      outcome = await executeFollowUp(acme, outcome.result["follow_up"]);
      results.push(outcome);
    }
    assert.equal(outcome.isError, false, JSON.stringify(outcome.result));
    assert.equal(outcome.result["project_id"], "agent:acme:from-daemon");
    const ref = String(outcome.result["project_ref"]);
    const read = await callTool(acme, "read_files", { project: ref, files: [{ path: "README.md" }, { path: "src/main.ts" }] });
    const items = read.result["items"] as Array<Record<string, string>>;
    assert.deepEqual(
      items.map((i) => i["content"]),
      ["# app from git\n", "export const main = 1;\n"],
    );
    assert.ok((await ids(acme)).includes("agent:acme:from-daemon"));
  });

  it("git over HTTP with the tenant's credential and a ref: ready, on that branch", async () => {
    const ready = await call(acme, "create_project", {
      name: "from-http",
      source: { git: { url: `${httpGit.url}/app.git`, ref: "feature" } },
      visibility: "tenant",
    });
    assert.equal(ready.isError, false, JSON.stringify(ready.result));
    assert.match(String(ready.result["project_ref"]), /^~p\d+$/);
    assert.ok(httpGit.requests.authorized > 0, "the clone authenticated");
    const read = await callTool(acme, "read_files", { project: ready.result["project_ref"], files: [{ path: "FEATURE.md" }] });
    assert.equal((read.result["items"] as Array<Record<string, string>>)[0]?.["content"], "only on feature\n");
  });

  it("a bad URL, a missing ref and a refused credential each fail with a structured reason and leave no project behind", async () => {
    const before = workspaces().length;
    const cases: Array<[Client, Record<string, unknown>, string, string]> = [
      [acme, { name: "bad-url", source: { git: { url: `${daemon.url}/no-such-repo.git` } } }, "repository_unreachable", "agent:acme:bad-url"],
      [acme, { name: "bad-ref", source: { git: { url: `${daemon.url}/app.git`, ref: "no-such-branch" } } }, "ref_not_found", "agent:acme:bad-ref"],
      [wrong, { name: "refused", source: { git: { url: `${httpGit.url}/app.git` } } }, "authentication_failed", "agent:wrong:refused"],
    ];
    for (const [client, args, detail, id] of cases) {
      const failed = await call(client, "create_project", args);
      assert.deepEqual(
        [failed.isError, failed.result["reason_code"], failed.result["detail_code"], failed.result["state_changed"]],
        [true, "clone_failed", detail, false],
        JSON.stringify(failed.result),
      );
      assert.ok(!(await ids(client)).includes(id), `${id} is not listed`);
      const addressed = await callTool(client, "list_project_files", { project: id });
      assert.equal(addressed.result["reason_code"], "project_not_found");
    }
    assert.ok(httpGit.requests.refused > 0, "the server refused the wrong credential");
    assert.equal(workspaces().length, before, "no workspace (or partial clone) was left in the data dir");
    // A URL carrying credentials, or another scheme, is refused before anything is cloned.
    for (const url of [`http://clone-bot:${SECRET}@127.0.0.1:1/app.git`, "file:///etc"]) {
      const refused = await call(acme, "create_project", { name: "refused-url", source: { git: { url } } });
      assert.deepEqual([refused.result["reason_code"], refused.result["state_changed"]], ["invalid_value", false], JSON.stringify(refused.result));
    }
    // The failed name is free again for its owner.
    const retry = await call(acme, "create_project", { name: "bad-ref", source: { empty: {} } });
    assert.equal(retry.isError, false, JSON.stringify(retry.result));
  });

  it("delete_project removes the Project and its workspace; --project DIR keeps working", async () => {
    const count = workspaces().length;
    const deleted = await call(acme, "delete_project", { project: "agent:acme:bad-ref" });
    assert.deepEqual(deleted.result, { project_id: "agent:acme:bad-ref" });
    assert.ok(!(await ids(acme)).includes("agent:acme:bad-ref"));
    assert.equal(workspaces().length, count - 1);
    assert.equal((await callTool(acme, "list_project_files", { project: "agent:acme:bad-ref" })).result["reason_code"], "project_not_found");
    const local = await callTool(acme, "read_files", { project: "agent:acme:local-dir", files: [{ path: "LOCAL.md" }] });
    assert.equal((local.result["items"] as Array<Record<string, string>>)[0]?.["content"], "local dir\n");
  });

  it("the credential appears in no result, log line or audit row", async () => {
    const needles = [SECRET, Buffer.from(`clone-bot:${SECRET}`).toString("base64")];
    const haystacks: Array<[string, string]> = [
      ["results", JSON.stringify(results)],
      ["logs", server.output()],
    ];
    await Promise.all([acme.close(), wrong.close()]);
    await server.stop();
    haystacks.push(["logs", server.output()]);
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    try {
      const rows = (await db.query("SELECT * FROM audit.action_audit")).rows;
      assert.ok(
        rows.some((r) => JSON.stringify(r).includes("create_project")),
        "create_project calls were audited",
      );
      haystacks.push(["audit", JSON.stringify(rows)]);
    } finally {
      await db.close();
    }
    assert.ok(server.output().length > 1000, "debug logs were captured");
    for (const [where, text] of haystacks) for (const needle of needles) assert.ok(!text.includes(needle), `the credential leaked into ${where}`);
  });
});
