/**
 * Direct routes in the six-process stack (real Postgres and Redis, a real MCP client): warm
 * calls reach the Runner without the broker (the gateway's counters show no broker call), the
 * runner-broker killed with SIGKILL leaves calls on the warm route working, and after it is
 * restarted calls keep being served by the same gateway process (no gateway restart).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { backingServices, callTool, connectMcp, createProjectDir, createTestDatabase, firstProjectRef, startTestStack } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;
const HEARTBEAT_MS = 3_000;

async function counter(baseUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

describe("direct routes through the distributed stack", () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  let gateway: string;

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    const projectDir = createProjectDir({ "README.md": "# routes\n", "src/a.ts": "export const x = 1;\n" }, { name: "routes" });
    // 3 s heartbeats: the broker grants a 6 s lease and the Runner takes it as valid for 90% of
    // that from the heartbeat that renewed it, so after the broker dies the Runner still admits
    // direct calls for at least 5.4 s less one heartbeat period and its round trip (about 2.3 s):
    // more than the 1.5 s outage window below, with room for a late timer on a loaded machine.
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      heartbeatIntervalMs: HEARTBEAT_MS,
    });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
    gateway = `http://127.0.0.1:${stack.ports.gateway}`;
  });
  after(async () => {
    await client?.close();
    await stack?.stop();
    await db?.drop();
  });

  const read = () => callTool(client, "read_files", { project, files: [{ path: "src/a.ts" }] });
  const brokerCalls = async () =>
    (await counter(gateway, "webcodex_gateway_route_requests_total")) + (await counter(gateway, "webcodex_gateway_relayed_calls_total"));

  it("warm calls make no broker call", async () => {
    assert.equal((await read()).isError, false);
    const before = await brokerCalls();
    for (let i = 0; i < 20; i++) assert.equal((await read()).isError, false);
    assert.equal(await brokerCalls(), before, "20 warm reads, no route request and no relayed dispatch");
    assert.ok((await counter(gateway, "webcodex_gateway_direct_calls_total")) >= 20);
  });

  it("the broker killed: the warm route keeps serving; after its restart the same gateway serves on", async () => {
    assert.equal((await read()).isError, false);
    const broker = stack.processes.get("runner-broker");
    broker?.kill("SIGKILL");
    await new Promise((r) => broker?.once("exit", r));
    const killedAt = Date.now();
    let served = 0;
    while (Date.now() - killedAt < 1_500) {
      const r = await read();
      assert.equal(r.isError, false, `served while the broker is down: ${JSON.stringify(r.result)}`);
      served += 1;
    }
    assert.ok(served >= 3, `${served} calls served during the outage`);
    await stack.restart("runner-broker");
    // Routes are renewed from the restarted broker as the lease moves on; keep calling for two lease TTLs.
    const until = Date.now() + 4 * HEARTBEAT_MS;
    let failures = 0;
    let last;
    while (Date.now() < until) {
      last = await read();
      if (last.isError) failures += 1;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(last?.isError, false, `served after the broker's restart: ${JSON.stringify(last?.result)}`);
    process.stdout.write(`# after the broker's restart: ${failures} failed read(s) while the Runner re-registered\n`);
  });
});
