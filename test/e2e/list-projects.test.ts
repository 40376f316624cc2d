/**
 * Bounded discovery through real MCP SDK clients, on the distributed stack (real Postgres and
 * Redis, ref-resolver over Connect RPC) with 1,000 Projects of one tenant and on `webcodex dev`:
 * - list_projects without arguments answers in under 4 KB (the whole MCP result: structured
 *   content and its text rendering), most recently used first, says how many Projects it left
 *   out, and following next_cursor exactly as returned walks the rest with no gap or duplicate,
 *   also when use order changes mid-walk;
 * - the name filter (case-insensitive substring); another principal's private Projects never
 *   appear and never count in omitted; its cursor is not another principal's;
 * - a bad limit and a bad or expired cursor are structured failures whose follow-up, executed
 *   exactly as returned, restarts the listing;
 * - list_agent_tasks pages the same way;
 * - embedded: a Project of an earlier run that no Runner here serves is neither listed nor
 *   counted as omitted.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { encodeCursor } from "@webcodex/contracts";
import { createPgliteDatabase } from "@webcodex/platform";
import { migrateRefResolver } from "@webcodex/ref-resolver";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  executeFollowUp,
  startDevServer,
  startTestStack,
  tempDir,
} from "../support/index.js";
import type { DevServer, TestDatabase, ToolOutcome } from "../support/index.js";

const TOKENS = { alice: "list-alice-token-0123456789abcdef", bob: "list-bob-token-0123456789abcdefgh" };
const SEEDED = 1_000;
const BOB_PRIVATE = 5;
const RESPONSE_BUDGET = 4 * 1024;

function tokensFile(): string {
  const file = join(tempDir("wcx-list-tokens-"), "tokens.json");
  writeFileSync(
    file,
    JSON.stringify({
      tokens: [
        { token: TOKENS.alice, client_id: "local", subject: "alice" },
        { token: TOKENS.bob, client_id: "local", subject: "bob" },
      ],
    }),
  );
  return file;
}

type Row = { project_ref: string; project_id: string; name: string; runner_state: string };

/** The whole MCP tools/call answer as it crosses the wire (JSON-RPC envelope, text content and structuredContent). */
async function rawCall(client: Client, name: string, args: Record<string, unknown>): Promise<{ bytes: number; text: string; outcome: ToolOutcome }> {
  const res = await client.callTool({ name, arguments: args });
  const bytes = Buffer.byteLength(JSON.stringify({ jsonrpc: "2.0", id: 1, result: res }));
  const content = res.content as Array<{ type: string; text?: string }>;
  return { bytes, text: content[0]?.text ?? "", outcome: { isError: res.isError === true, result: (res.structuredContent ?? {}) as Record<string, unknown> } };
}

const rows = (o: ToolOutcome) => (o.result["projects"] ?? []) as Row[];

/** Follows next_cursor exactly as returned until the listing ends; checks omitted on every page. */
async function walk(client: Client, first: ToolOutcome, expectedTotal: number, midWalk?: () => Promise<void>): Promise<Row[]> {
  const seen = [...rows(first)];
  let page = first;
  let pages = 1;
  while (page.result["next_cursor"] !== undefined) {
    assert.equal(page.result["omitted"], expectedTotal - seen.length, `page ${pages}: omitted counts exactly the Projects not listed yet`);
    if (pages === 2 && midWalk) await midWalk();
    page = await callTool(client, "list_projects", { cursor: page.result["next_cursor"] });
    assert.equal(page.isError, false, JSON.stringify(page.result));
    seen.push(...rows(page));
    pages += 1;
  }
  assert.equal(page.result["omitted"], undefined, "the last page omits nothing");
  return seen;
}

describe("list_projects on the distributed stack with 1,000 Projects", { timeout: 300_000 }, () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let alice: Client;
  let bob: Client;
  let sql: pg.Client;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir: createProjectDir({ "README.md": "# served\n" }, { name: "served" }),
      gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: tokensFile() },
    });
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    // 1,000 Projects shared with the tenant (as Runners that registered them), and Bob's private ones.
    await sql.query(
      `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
       SELECT 'agent:local:proj-' || lpad(i::text, 4, '0'), 1, 'local', 'proj-' || lpad(i::text, 4, '0'), '/srv/p' || i, 'proj-' || lpad(i::text, 4, '0')
       FROM generate_series(1, $1::int) AS i`,
      [SEEDED],
    );
    await sql.query(
      `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
       SELECT 'agent:local:bob-secret-' || i, 1, 'local', 'bob-secret-' || i, '/srv/b' || i, 'bob-secret-' || i FROM generate_series(1, $1::int) AS i`,
      [BOB_PRIVATE],
    );
    await sql.query(
      `INSERT INTO refs.project_settings (canonical_id, client_id, owner_subject, visibility)
       SELECT 'agent:local:bob-secret-' || i, 'local', 'bob', 'private' FROM generate_series(1, $1::int) AS i`,
      [BOB_PRIVATE],
    );
    [alice, bob] = await Promise.all([connectMcp(stack.mcpUrl, TOKENS.alice), connectMcp(stack.mcpUrl, TOKENS.bob)]);
  });
  after(async () => {
    await Promise.all([alice?.close(), bob?.close()]);
    await sql?.end();
    await stack?.stop();
    await db?.drop();
  });

  it("without arguments: under 4 KB, omitted and next_cursor; the cursor walks the rest with no gap or duplicate while use order changes", async (t) => {
    const visible = SEEDED + 1; // the seeded Projects and the stack's own
    const first = await rawCall(alice, "list_projects", {});
    t.diagnostic(`list_projects {} with ${visible} visible Projects: ${first.bytes} bytes, ${rows(first.outcome).length} listed`);
    assert.equal(first.outcome.isError, false);
    assert.ok(first.bytes < RESPONSE_BUDGET, `the whole answer is ${first.bytes} bytes`);
    assert.ok(rows(first.outcome).length >= 10, "a useful page");
    assert.equal(first.outcome.result["omitted"], visible - rows(first.outcome).length);
    assert.equal(typeof first.outcome.result["next_cursor"], "string");
    // The text content carries the same facts in a compact form, not a second copy of the JSON.
    for (const r of rows(first.outcome)) assert.ok(first.text.includes(`${r.project_ref}\t${r.project_id}\t${r.name}\t${r.runner_state}`), r.project_id);
    assert.match(first.text, new RegExp(`omitted: ${visible - rows(first.outcome).length}`));
    assert.ok(!first.text.includes('"project_ref"'), "not the JSON again");

    // Mid-walk, Alice uses a Project the walk has not reached yet and one it has passed: each
    // jumps to the front of a new listing, but the walk neither repeats nor skips them.
    const all = await walk(alice, first.outcome, visible, async () => {
      await callTool(alice, "read_files", { project: "agent:local:proj-0999", files: [{ path: "README.md" }] });
      await callTool(alice, "read_files", { project: rows(first.outcome)[1]?.project_ref ?? "", files: [{ path: "README.md" }] });
    });
    const ids = all.map((r) => r.project_id);
    assert.equal(new Set(ids).size, ids.length, "no duplicate");
    assert.equal(ids.length, visible, "no gap");
    assert.ok(!ids.some((id) => id.includes("bob-secret")), "Bob's private Projects never appear");

    // A new listing starts with what Alice used last.
    const fresh = rows(await callTool(alice, "list_projects", { limit: 2 }));
    assert.deepEqual(
      fresh.map((r) => r.project_id),
      [rows(first.outcome)[1]?.project_id, "agent:local:proj-0999"],
      "most recently used first",
    );
  });

  it("name filters case-insensitively; another principal's private Projects neither appear nor count; a cursor is its principal's", async () => {
    const filtered = await callTool(alice, "list_projects", { name: "PROJ-012" });
    assert.equal(filtered.isError, false);
    assert.deepEqual(
      rows(filtered)
        .map((r) => r.name)
        .sort(),
      Array.from({ length: 10 }, (_, i) => `proj-012${i}`),
    );
    assert.equal(filtered.result["omitted"], undefined);
    assert.deepEqual(rows(await callTool(alice, "list_projects", { name: "bob-secret" })), [], "Alice: none of Bob's private Projects");
    const bobs = await callTool(bob, "list_projects", { name: "bob-secret", limit: 2 });
    assert.equal(rows(bobs).length, 2);
    assert.equal(bobs.result["omitted"], BOB_PRIVATE - 2, "Bob sees his own");
    // Alice's count of everything excludes them.
    const aliceAll = await callTool(alice, "list_projects", { limit: 1 });
    assert.equal(aliceAll.result["omitted"], SEEDED + 1 - 1);
    const bobAll = await callTool(bob, "list_projects", { limit: 1 });
    assert.equal(bobAll.result["omitted"], SEEDED + 1 + BOB_PRIVATE - 1);
    // Bob's cursor is nothing to Alice, and says nothing about Bob.
    const foreign = await callTool(alice, "list_projects", { cursor: bobs.result["next_cursor"] });
    assert.equal(foreign.isError, true);
    assert.equal(foreign.result["detail_code"], "cursor_expired");
    const madeUp = await callTool(alice, "list_projects", { cursor: encodeCursor("projects", ["never-issued", 2, "bob-secret"]) });
    assert.deepEqual(foreign.result, madeUp.result, "exactly like a cursor never issued");
    assert.ok(!JSON.stringify(foreign.result).includes("agent:local:bob-secret"));
    // A filtered cursor continues its own filter only.
    const mixed = await callTool(bob, "list_projects", { name: "proj", cursor: bobs.result["next_cursor"] });
    assert.deepEqual([mixed.result["reason_code"], mixed.result["detail_code"]], ["invalid_value", "cursor_invalid"]);
    const rest = await callTool(bob, "list_projects", { cursor: bobs.result["next_cursor"] });
    assert.equal(rows(rest).length, BOB_PRIVATE - 2);
    assert.ok(rows(rest).every((r) => r.name.startsWith("bob-secret-")));
  });

  it("a Project that goes away mid-walk is neither listed nor counted by the pages after", async () => {
    const first = await callTool(alice, "list_projects", { name: "proj-00", limit: 5 });
    assert.equal(first.result["omitted"], 99 - 5, "proj-0001 … proj-0099");
    await sql.query("UPDATE refs.projects SET retired_at = now() WHERE canonical_id = 'agent:local:proj-0050'");
    const next = await callTool(alice, "list_projects", { cursor: first.result["next_cursor"], limit: 50 });
    assert.equal(next.result["omitted"], 99 - 5 - 1 - 50, "the retired one is not counted");
    const all = await walk(alice, next, 99 - 5 - 1);
    const names = [...rows(first), ...all].map((r) => r.name);
    assert.equal(new Set(names).size, 98);
    assert.ok(!names.includes("proj-0050"));
  });

  it("a bad limit and a bad or expired cursor fail with a structured reason; the follow-up restarts the listing", async () => {
    for (const limit of [0, -1, "ten", 1.5]) {
      const bad = await callTool(alice, "list_projects", { limit });
      assert.equal(bad.isError, true, `limit ${String(limit)}`);
      assert.equal(bad.result["reason_code"], "invalid_value", `limit ${String(limit)}`);
    }
    const clamped = await callTool(alice, "list_projects", { limit: 10_000 });
    assert.equal(rows(clamped).length, 100);
    assert.equal((clamped.result["input_normalization"] as { code: string } | undefined)?.code, "clamped_to_ceiling");

    const garbage = await callTool(alice, "list_projects", { cursor: "not-a-cursor" });
    assert.deepEqual([garbage.isError, garbage.result["reason_code"], garbage.result["detail_code"]], [true, "invalid_value", "cursor_invalid"]);
    const restarted = await executeFollowUp(alice, garbage.result["follow_up"]);
    assert.equal(restarted.isError, false);
    assert.ok(rows(restarted).length > 0);

    // A cursor whose snapshot expired.
    const page = await callTool(alice, "list_projects", { name: "proj-00", limit: 3 });
    await sql.query("UPDATE refs.project_list_snapshots SET created_at = now() - interval '2 hours'");
    const expired = await callTool(alice, "list_projects", { cursor: page.result["next_cursor"] });
    assert.deepEqual([expired.isError, expired.result["reason_code"], expired.result["detail_code"]], [true, "invalid_value", "cursor_expired"]);
    const again = await executeFollowUp(alice, expired.result["follow_up"]);
    assert.equal(again.isError, false);
    assert.ok(
      rows(again).every((r) => r.name.startsWith("proj-00")),
      "the restart keeps the filter",
    );
  });

  it("list_agent_tasks pages with limit, omitted and next_cursor, newest first, no gap or duplicate", async () => {
    const call = (tool: string, args: Record<string, unknown>) => callTool(alice, "call_runtime_tool", { tool, arguments: args });
    const agent = await call("create_agent", { name: "pager" });
    assert.equal(agent.isError, false, JSON.stringify(agent.result));
    const agentId = agent.result["agent_id"] as string;
    const project = rows(await callTool(alice, "list_projects", { name: "served" }))[0]?.project_ref ?? "";
    const created: string[] = [];
    for (let i = 0; i < 25; i++) {
      const task = await call("create_agent_task", { project, title: `t${i}`, instructions: "x", assignee_agent_id: agentId, idempotency_key: `k${i}` });
      assert.equal(task.isError, false, JSON.stringify(task.result));
      created.push(task.result["task_id"] as string);
    }
    const first = await call("list_agent_tasks", { limit: 10 });
    assert.equal((first.result["tasks"] as unknown[]).length, 10);
    assert.equal(first.result["omitted"], 15);
    const seen = (first.result["tasks"] as Array<{ task_id: string }>).map((x) => x.task_id);
    // A Task created mid-walk comes before the walk's position: not repeated, not skipped into.
    await call("create_agent_task", { project, title: "late", instructions: "x", assignee_agent_id: agentId, idempotency_key: "late" });
    let cursor = first.result["next_cursor"];
    while (cursor !== undefined) {
      const page = await call("list_agent_tasks", { limit: 10, cursor });
      assert.equal(page.isError, false, JSON.stringify(page.result));
      seen.push(...(page.result["tasks"] as Array<{ task_id: string }>).map((x) => x.task_id));
      cursor = page.result["next_cursor"];
    }
    assert.deepEqual(seen, [...created].reverse(), "newest first, each once");
    const bad = await call("list_agent_tasks", { cursor: "c1.bm9wZQ" });
    assert.deepEqual([bad.result["reason_code"], bad.result["detail_code"]], ["invalid_value", "cursor_invalid"]);
    assert.equal((await executeFollowUp(alice, bad.result["follow_up"])).isError, false);
  });
});

describe("list_projects on webcodex dev", { timeout: 180_000 }, () => {
  let server: DevServer;
  let client: Client;

  before(async () => {
    // Projects of earlier runs in the same data directory, which no Runner of this process serves.
    const dataDir = tempDir("wcx-list-dev-");
    const db = await createPgliteDatabase(join(dataDir, "postgres"));
    await migrateRefResolver(db);
    await db.query(
      `INSERT INTO refs.projects (canonical_id, incarnation, client_id, project_id, root_identity, name)
       SELECT 'agent:local:old-' || i, 1, 'local', 'old-' || i, '/gone/' || i, 'old-' || i FROM generate_series(1, 30) AS i`,
    );
    await db.close();
    server = await startDevServer({ projectDir: createProjectDir({ "README.md": "# here\n" }, { name: "here" }), dataDir });
    client = await connectMcp(server.mcpUrl, server.token);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  it("lists only what this process serves, counts nothing else as omitted, filters by name and refuses bad input", async () => {
    const listed = await rawCall(client, "list_projects", {});
    assert.equal(listed.outcome.isError, false);
    assert.deepEqual(
      rows(listed.outcome).map((r) => [r.name, r.runner_state]),
      [["here", "ready"]],
    );
    assert.equal(listed.outcome.result["omitted"], undefined, "earlier runs' Projects are not counted");
    assert.ok(listed.bytes < RESPONSE_BUDGET);
    assert.deepEqual(
      rows(await callTool(client, "list_projects", { name: "HER" })).map((r) => r.name),
      ["here"],
    );
    assert.deepEqual(rows(await callTool(client, "list_projects", { name: "old-" })), []);
    const badLimit = await callTool(client, "list_projects", { limit: 0 });
    assert.deepEqual([badLimit.isError, badLimit.result["reason_code"]], [true, "invalid_value"]);
    const badCursor = await callTool(client, "list_projects", { cursor: "c1.eyJ4IjoxfQ" });
    assert.deepEqual([badCursor.result["reason_code"], badCursor.result["detail_code"]], ["invalid_value", "cursor_invalid"]);
    assert.equal((await executeFollowUp(client, badCursor.result["follow_up"])).isError, false);
  });
});
