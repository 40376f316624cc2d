/**
 * `webcodex up` as a user runs it (one command, its own process group): create_project works
 * (the local-process provisioner, workspaces under --data-dir), and after SIGKILL of the whole
 * stack in the middle of calls, the restarted stack serves every project within the documented
 * bound, never reports a Runner ready before a call on it succeeds, and never answers with a
 * Runner of the killed stack (runner_lost / runner_unreachable).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { findFreeBasePort, SERVICES } from "@webcodex/cli";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  executeFollowUp,
  killUp,
  redisKeyPrefix,
  startUp,
  tempDir,
} from "../support/index.js";
import type { TestDatabase, UpStack } from "../support/index.js";

/** The documented bound (docs/reliability.md): a restarted stack serves its projects within 10 s of answering again. */
const SERVE_BOUND_MS = 10_000;
const token = `t-${randomBytes(16).toString("hex")}`;

const stateOf = async (client: Client): Promise<Map<string, string>> => {
  const { result } = await callTool(client, "list_projects", {});
  return new Map((result["projects"] as Array<Record<string, string>>).map((p) => [String(p["project_id"]), String(p["runner_state"])]));
};

describe("webcodex up: create_project and a crash restart", { timeout: 600_000 }, () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let args: string[];
  let up: UpStack | undefined;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const projectDir = createProjectDir({ "README.md": "# up\n" }, { name: "upmain" });
    const basePort = await findFreeBasePort(SERVICES.length);
    env = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? "/tmp",
      WEBCODEX_POSTGRES_URL: db.url,
      WEBCODEX_REDIS_URL: services.redisUrl,
      WEBCODEX_REDIS_KEY_PREFIX: redisKeyPrefix(),
      WEBCODEX_DEV_TOKEN: token,
      WEBCODEX_LOG_LEVEL: "info",
    };
    args = ["--project", projectDir, "--port", String(basePort), "--data-dir", tempDir("wc-up-data-")];
  });
  after(async () => {
    if (up) await killUp(up.child);
    await db?.drop();
  });

  it("creates a project, and after SIGKILL mid-load the restarted stack serves both projects within the bound, truthfully", async () => {
    up = await startUp(env, args);
    let client = await connectMcp(up.mcpUrl, token);
    let created = await callTool(client, "create_project", { name: "made-here", source: { empty: {} } });
    for (let i = 0; i < 10 && !created.isError && created.result["project_state"] === "pending"; i++)
      created = await executeFollowUp(client, created.result["follow_up"]);
    assert.equal(created.isError, false, JSON.stringify(created.result));
    assert.ok(created.result["project_ref"], JSON.stringify(created.result));
    const projects = await stateOf(client);
    assert.equal(projects.size, 2, JSON.stringify([...projects]));
    for (const [id, state] of projects) assert.equal(state, "ready", id);
    const ids = [...projects.keys()];
    const runOn = (c: Client, id: string) => callTool(c, "run_shell", { project: id, command: "echo ok" });

    // Load: calls on both projects while the stack is killed under them.
    let loading = true;
    const load = (async () => {
      while (loading) await Promise.all(ids.map((id) => runOn(client, id).catch(() => undefined)));
    })();
    await Promise.all(ids.map((id) => runOn(client, id)));
    await killUp(up.child);
    loading = false;
    await load;
    await client.close().catch(() => undefined);

    const restartedAt = Date.now();
    up = await startUp(env, args);
    const answeringAt = Date.now();
    client = await connectMcp(up.mcpUrl, token);
    const servedAt = new Map<string, number>();
    const stale: string[] = [];
    const seen: string[] = [];
    // Each project polled on its own (a slow start of one does not delay the other's figure).
    await Promise.all(
      ids.map(async (id) => {
        while (!servedAt.has(id) && Date.now() - answeringAt < 60_000) {
          const reported = (await stateOf(client)).get(id);
          const call = await runOn(client, id);
          const detail = call.isError ? String(call.result["detail_code"]) : "ok";
          seen.push(`${id} ${Date.now() - answeringAt} ms: listed ${reported}, call ${detail}`);
          if (["runner_lost", "runner_unreachable", "runner_connection_lost"].includes(detail)) stale.push(`${id}: ${detail}`);
          if (!call.isError) servedAt.set(id, Date.now());
          else assert.notEqual(reported, "ready", `${id} was reported ready, then a call failed: ${JSON.stringify(call.result)}`);
        }
      }),
    );
    const figures = Object.fromEntries(ids.map((id) => [id, (servedAt.get(id) ?? NaN) - answeringAt]));
    process.stdout.write(
      `# crash restart: stack answering ${answeringAt - restartedAt} ms after restart; each project served after ${JSON.stringify(figures)} ms\n`,
    );
    process.stdout.write(`# ${seen.join("\n# ")}\n`);
    assert.deepEqual(stale, [], "no answer names a Runner of the killed stack");
    for (const id of ids)
      assert.ok((servedAt.get(id) ?? Infinity) - answeringAt <= SERVE_BOUND_MS, `${id} served within ${SERVE_BOUND_MS} ms: ${JSON.stringify(figures)}`);
    await client.close();
  });
});
