/**
 * A real Postgres outage in distributed mode: the six-process stack runs on a private
 * PostgreSQL cluster that the test stops with `pg_ctl stop -m fast` and starts again (not a
 * proxy). Needs the PostgreSQL server binaries; fails, never skips, without them.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, firstProjectRef, startPrivatePostgres, startTestStack, until } from "../support/index.js";
import type { PrivatePostgres } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;

describe("distributed mode with its PostgreSQL stopped and started again", () => {
  let postgres: PrivatePostgres;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  let gateway: string;

  before(async () => {
    postgres = await startPrivatePostgres();
    stack = await startTestStack({
      postgresUrl: postgres.url,
      redisUrl: (await backingServices()).redisUrl,
      projectDir: createProjectDir({ "README.md": "# outage\n" }, { name: "outage" }),
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
    });
    gateway = `http://127.0.0.1:${stack.ports.gateway}`;
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await postgres?.destroy();
  });

  const readme = () => callTool(client, "read_files", { project, files: [{ path: "README.md" }] });

  it("pg_ctl stop -m fast: /readyz 503 naming postgres unreachable, calls fail with dependency_unavailable and no unknown outcome; after start it recovers", async () => {
    assert.equal(project, "~p1");
    assert.equal((await readme()).isError, false);
    assert.equal((await fetch(`${gateway}/readyz`)).status, 200);

    await postgres.stop();
    const ready = await fetch(`${gateway}/readyz`);
    assert.equal(ready.status, 503);
    const report = (await ready.json()) as { checks: Record<string, { ok: boolean; detail?: string }> };
    assert.match(String(report.checks["ref-resolver"]?.detail), /^not ready \(503\): postgres unreachable \(/, JSON.stringify(report));
    assert.equal(report.checks["tool-registry"]?.ok, true, "a service without Postgres stays ready");
    const listed = await callTool(client, "list_projects", {});
    assert.equal(listed.isError, true, JSON.stringify(listed.result));
    assert.deepEqual([listed.result["reason_code"], listed.result["outcome_unknown"]], ["dependency_unavailable", false], JSON.stringify(listed.result));
    // The ref-resolver may answer a read from its live-Project cache (1 s TTL); once that
    // lapses, resolving the ref needs Postgres and the read fails the same way.
    const read = await until(
      "a read fails once the live cache lapses",
      async () => {
        const r = await readme();
        return r.isError ? r : undefined;
      },
      5_000,
      200,
    );
    assert.deepEqual([read.result["reason_code"], read.result["outcome_unknown"]], ["dependency_unavailable", false], JSON.stringify(read.result));

    await postgres.start();
    await until("the gateway is ready again", async () => (await fetch(`${gateway}/readyz`)).status === 200, 15_000, 200);
    const relisted = await callTool(client, "list_projects", {});
    assert.deepEqual(
      relisted.result["projects"],
      [{ project_ref: "~p1", project_id: "agent:local:outage", name: "outage", runner_state: "ready" }],
      JSON.stringify(relisted.result),
    );
    const back = await readme();
    assert.equal(back.isError, false, JSON.stringify(back.result));
    assert.equal((back.result["items"] as Array<Record<string, unknown>>)[0]?.["content"], "# outage\n");
  });
});
