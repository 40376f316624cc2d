/**
 * `make bench provision`: create_project until ready, warm (the broker's local-process
 * provisioner hands the new Project a loaded Runner from its warm pool) against cold (a new
 * Runner process), through an MCP client on two distributed stacks side by side, in alternating
 * rounds. Before each warm round the pool has refilled (a process titled as a warm Runner is a
 * child of that stack's broker). Figure: p50 of each side and warm/cold, the median of the
 * per-round ratios.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { findFreeBasePort, startDistributed } from "@webcodex/cli";
import type { DistributedStack } from "@webcodex/cli";
import { benchStackOptions, createBenchProject } from "./project.js";
import { median, round } from "./stats.js";
import type { BenchResult } from "./stats.js";
import { connect } from "./tool-call.js";

const ROUNDS = Number(process.env["WEBCODEX_BENCH_PROVISION_ROUNDS"] ?? 6);

/** Warm Runners (unclaimed, loaded) whose parent is `ppid`. */
function warmChildren(ppid: number): number {
  let n = 0;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (parent === ppid && readFileSync(`/proc/${d}/cmdline`, "utf8").startsWith("webcodex runner (warm)")) n++;
    } catch {
      // gone meanwhile
    }
  }
  return n;
}

async function stackWith(postgresUrl: string, redisUrl: string, token: string, warmPool: number): Promise<{ stack: DistributedStack; client: Client }> {
  const options = benchStackOptions(token);
  const stack = await startDistributed({
    basePort: await findFreeBasePort(),
    postgresUrl,
    redisUrl,
    projectDir: createBenchProject(),
    ...options,
    workspacesDir: mkdtempSync(join(tmpdir(), "wcx-bench-ws-")),
    extraEnv: { ...options.extraEnv, WEBCODEX_FLEET_WARM_POOL: String(warmPool), WEBCODEX_FLEET_IDLE_TIMEOUT_MS: "0" },
  });
  return { stack, client: await connect(stack.mcpUrl, token) };
}

/** create_project (empty) until the Project serves; ms. */
async function createReady(client: Client, name: string): Promise<number> {
  const t0 = performance.now();
  let res = await client.callTool({ name: "create_project", arguments: { name, source: { empty: {} } } });
  for (let i = 0; i < 30; i++) {
    const out = (res.structuredContent ?? {}) as Record<string, unknown>;
    if (res.isError) throw new Error(`create_project failed: ${JSON.stringify(out)}`);
    if (out["project_state"] !== "pending") break;
    res = await client.callTool({ name: "call_runtime_tool", arguments: { tool: "wait_for_project_ready", arguments: { project: out["project_id"] } } });
  }
  return performance.now() - t0;
}

/**
 * The provision benches' rounds, warm against cold alternating: ROUNDS measured after a first one
 * that only warms caches and connections on both sides. Before each round the warm pool has
 * refilled (`warmReady()` at least 1, polled every `pollMs`, 60 s at the most). Figures: p50 of
 * each side and warm/cold, the median of the per-round ratios.
 */
export async function warmColdRounds(o: {
  bench: string;
  warmReady: () => number;
  pollMs: number;
  cold: (round: number) => Promise<number>;
  warm: (round: number) => Promise<number>;
}): Promise<{ cold_p50_ms: number; warm_p50_ms: number; warm_over_cold: number; rounds: number }> {
  const coldMs: number[] = [];
  const warmMs: number[] = [];
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const deadline = Date.now() + 60_000;
    while (o.warmReady() < 1 && Date.now() < deadline) await new Promise((res) => setTimeout(res, o.pollMs));
    if (o.warmReady() < 1) throw new Error(`${o.bench}: the warm pool did not refill in 60 s`);
    const c = await o.cold(r);
    const w = await o.warm(r);
    if (r === 0) continue; // the first round warms caches and connections on both sides
    coldMs.push(c);
    warmMs.push(w);
    ratios.push(w / c);
  }
  return { cold_p50_ms: round(median(coldMs)), warm_p50_ms: round(median(warmMs)), warm_over_cold: round(median(ratios), 3), rounds: ROUNDS };
}

export async function benchProvision(o: { postgresUrls: [string, string]; redisUrl: string }): Promise<BenchResult> {
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const cold = await stackWith(o.postgresUrls[0], o.redisUrl, token, 0);
  const warm = await stackWith(o.postgresUrls[1], o.redisUrl, token, 1);
  try {
    const brokerPid = warm.stack.processes.get("runner-broker")?.pid ?? -1;
    const metrics = await warmColdRounds({
      bench: "provision bench",
      warmReady: () => warmChildren(brokerPid),
      pollMs: 50,
      cold: (r) => createReady(cold.client, `cold-${r}`),
      warm: (r) => createReady(warm.client, `warm-${r}`),
    });
    return {
      name: "provision",
      metrics,
      notes: "create_project until ready: a Runner claimed from the warm pool vs a new Runner process (median of per-round ratios)",
    };
  } finally {
    await cold.client.close().catch(() => undefined);
    await warm.client.close().catch(() => undefined);
    await cold.stack.stop();
    await warm.stack.stop();
  }
}
