/**
 * The Runner fleet on one machine, through a real MCP client against the distributed stack with
 * the local-process provisioner: create_project takes a loaded Runner from the warm pool (no
 * cold process start), an idle Runner stops (its workspace stays), the next call starts it again
 * and is served, quotas per tenant refuse with quota_exceeded (live Runners at a transparent
 * start, projects at create_project) with limit and use, and delete_project removes the Runner
 * and its workspace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { runnerNames } from "@webcodex/runner-broker";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  executeFollowUp,
  startTestStack,
  tempDir,
  until,
} from "../support/index.js";
import type { TestDatabase, ToolOutcome } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const IDLE_MS = 3_000;

/** pid → process title (cmdline) of every process of this user (a Runner names what it is there). */
function processTitles(): Map<number, string> {
  const out = new Map<number, string>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      out.set(Number(d), readFileSync(`/proc/${d}/cmdline`, "utf8").replace(/\0+$/, "").replace(/\0/g, " "));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
const pidsTitled = (title: string) => [...processTitles()].filter(([, t]) => t === title).map(([pid]) => pid);
const runnerTitle = (projectId: string) => `webcodex runner ${runnerNames({ clientId: "local", projectId }).name}`;
const WARM_TITLE = "webcodex runner (warm)";
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("the local Runner fleet: warm create, idle stop, transparent start, quotas, delete", { timeout: 300_000 }, () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let workspaces: string;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    workspaces = tempDir("wc-fleet-ws-");
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir: createProjectDir({ "README.md": "# fleet\n" }, { name: "fleetmain" }),
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      workspacesDir: workspaces,
      extraEnv: {
        WEBCODEX_FLEET_IDLE_TIMEOUT_MS: String(IDLE_MS),
        WEBCODEX_FLEET_WARM_POOL: "1",
        WEBCODEX_FLEET_QUOTA_RUNNERS_PER_TENANT: "1",
        WEBCODEX_FLEET_QUOTA_PROJECTS_PER_TENANT: "2",
      },
    });
    client = await connectMcp(stack.mcpUrl, token);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await db?.drop();
  });

  const create = async (name: string): Promise<ToolOutcome> => {
    let created = await callTool(client, "create_project", { name, source: { empty: {} } });
    for (let i = 0; i < 20 && !created.isError && created.result["project_state"] === "pending"; i++)
      created = await executeFollowUp(client, created.result["follow_up"]);
    return created;
  };
  const run = (id: string) => callTool(client, "run_shell", { project: id, command: "echo served" });
  const listed = async (id: string) => {
    const { result } = await callTool(client, "list_projects", {});
    return (result["projects"] as Array<Record<string, string>>).find((p) => p["project_id"] === id)?.["runner_state"];
  };

  it("walks the lifecycle", async () => {
    // Warm create: the loaded, unclaimed Runner that existed before the call becomes the project's Runner.
    const [warm] = await until("a warm Runner in the pool", () => (pidsTitled(WARM_TITLE).length > 0 ? pidsTitled(WARM_TITLE) : undefined), 60_000);
    const t0 = Date.now();
    const a = await create("made-a");
    const createMs = Date.now() - t0;
    assert.equal(a.isError, false, JSON.stringify(a.result));
    const idA = String(a.result["project_id"]);
    assert.deepEqual(pidsTitled(runnerTitle("made-a")), [warm], "the project's Runner is the pooled process, claimed");
    // Its identity and credential came over stdin: the kernel's copy of its environment has neither.
    const environ = readFileSync(`/proc/${warm}/environ`, "utf8");
    assert.equal(/WEBCODEX_RUNNER_(TOKEN|PROJECT_ID|ROOT)=/.test(environ), false, "no identity or credential in /proc/<pid>/environ");
    const lastCallAt = Date.now();
    const served = await run(idA);
    assert.equal(served.isError, false, JSON.stringify(served.result));
    assert.match(JSON.stringify(served.result), /served/);
    await until("the pool refilled", () => pidsTitled(WARM_TITLE).length > 0, 60_000);

    // Idle stop: no call for the idle timeout stops the process; the workspace stays.
    const stoppedAt = await until("made-a's Runner stopped for idleness", () => (!alive(warm as number) ? Date.now() : undefined), IDLE_MS * 10);
    assert.ok(existsSync(join(workspaces, runnerNames({ clientId: "local", projectId: "made-a" }).tenantLabel, "made-a")), "workspace kept");
    assert.notEqual(await listed(idA), "ready", "a stopped Runner is not listed ready");

    // Quota, projects: a second project fits (2), a third does not.
    const b = await create("made-b");
    assert.equal(b.isError, false, JSON.stringify(b.result));
    const idB = String(b.result["project_id"]);
    const c = await create("made-c");
    assert.equal(c.isError, true, JSON.stringify(c.result));
    assert.equal(c.result["reason_code"], "quota_exceeded", JSON.stringify(c.result));
    assert.deepEqual(c.result["evidence"], { quota: "projects", limit: 2, use: 2 });

    // Quota, live Runners (1): made-b runs, so made-a's transparent start is refused at once, with limit and use.
    const refusedAt = Date.now();
    const refused = await run(idA);
    const refusedMs = Date.now() - refusedAt;
    assert.equal(refused.isError, true, JSON.stringify(refused.result));
    assert.equal(refused.result["reason_code"], "quota_exceeded", JSON.stringify(refused.result));
    assert.deepEqual(refused.result["evidence"], { quota: "live_runners", limit: 1, use: 1 });
    assert.ok(refused.result["follow_up"], "a wait is the follow-up");

    // Transparent start: once made-b stops for idleness, a call on made-a starts its Runner and is served.
    await until("made-b's Runner stopped for idleness", () => pidsTitled(runnerTitle("made-b")).length === 0, IDLE_MS * 10);
    const startAt = Date.now();
    const again = await run(idA);
    const transparentMs = Date.now() - startAt;
    assert.equal(again.isError, false, JSON.stringify(again.result));
    assert.equal(await listed(idA), "ready");

    // Delete: the Runner and its workspace go; the projects quota has room again.
    const deleted = await callTool(client, "delete_project", { project: idB });
    assert.equal(deleted.isError, false, JSON.stringify(deleted.result));
    assert.equal(existsSync(join(workspaces, runnerNames({ clientId: "local", projectId: "made-b" }).tenantLabel, "made-b")), false, "workspace deleted");
    const removedA = await callTool(client, "delete_project", { project: idA });
    assert.equal(removedA.isError, false, JSON.stringify(removedA.result));
    assert.equal(existsSync(join(workspaces, runnerNames({ clientId: "local", projectId: "made-a" }).tenantLabel, "made-a")), false, "workspace deleted");
    process.stdout.write(
      `# fleet local: warm create_project ${createMs} ms; idle stop ${stoppedAt - lastCallAt} ms after the last call began (timeout ${IDLE_MS} ms); quota refusal ${refusedMs} ms; transparent start + call ${transparentMs} ms\n`,
    );
  });
});
