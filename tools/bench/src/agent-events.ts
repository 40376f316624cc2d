/**
 * agent_events: how fast a lead's waiting wait_for_agent_events hears a worker's
 * complete_agent_task_attempt, on the distributed stack (two MCP principals of one tenant; the
 * event crosses the ref-resolver, which Postgres NOTIFY wakes), against a durable Postgres
 * INSERT + NOTIFY round trip and a bare LISTEN/NOTIFY one between two connections to the same
 * database, one of each taken after every round. Two figures, both per round and reported as
 * p50/p99:
 * - call_to_wake: from sending complete_agent_task_attempt to the lead's wait returning (the
 *   whole completion call, including its durable audit record, plus the wake);
 * - propagation: from the completion's commit to the lead's wait returning in this process. Its
 *   start is the event row's `at`: Postgres' clock_timestamp() in the committing transaction's
 *   last statement, just before the COMMIT and its WAL flush, which are counted (a commit's own
 *   end cannot be read from inside it). The durable baseline counts the same: from sending its
 *   INSERT + NOTIFY transaction, commit included, to hearing it. The Postgres clock and this
 *   process' clock are related per round by one query (error at most half its round trip).
 * The target is propagation p50 <= 3x the durable round trip (an event may only be announced
 * once committed, so a bare NOTIFY is not what a durable wake can approach; it is reported for
 * scale). A third baseline puts an MCP client in front of the durable one: the same transaction
 * waking a waiting call of a bare MCP SDK server (durable_mcp_wake), the least any MCP server can
 * show its client.
 */
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { findFreeBasePort, startDistributed } from "@webcodex/cli";
import { benchDir, benchStackOptions, createBenchProject } from "./project.js";
import { baselineServerPath, connect } from "./tool-call.js";
import { percentile, round, startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";

const ROUNDS = Number(process.env["WEBCODEX_BENCH_AGENT_ROUNDS"] ?? 200);

async function gw(client: Client, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await client.callTool({ name: "call_runtime_tool", arguments: { tool, arguments: args } });
  const out = (res.structuredContent ?? {}) as Record<string, unknown>;
  if (res.isError) throw new Error(`${tool} failed during the benchmark: ${JSON.stringify(out)}`);
  return out;
}

/** Warm-up round trips of each baseline before the timed ones, not reported. */
const NOTIFY_WARM_UP = 20;

const BARE_CHANNEL = "wcx_bench_round_trip";
const DURABLE_CHANNEL = "wcx_bench_durable_round_trip";
const MCP_WAKE_CHANNEL = "wcx_bench_mcp_wake";

/**
 * The two baselines, taken on their own pair of connections (a sender and a LISTENer) between the
 * benchmark's rounds, so that they see the same load as the rounds beside them:
 * - bare: NOTIFY on one connection until the LISTENing one hears it;
 * - durable, what a durable event needs at minimum: one committed transaction (synchronous_commit
 *   on, so its commit waits for the WAL flush) that INSERTs a row and NOTIFYs, sent as one round
 *   trip, until the LISTENing connection hears it.
 * - mcp wake, what an MCP client sees of a durable event at minimum: the same transaction (on
 *   its own channel) wakes a waiting tools/call of a bare MCP SDK server that LISTENs on it, from
 *   sending the transaction to the call's answer arriving at `mcp`, an SDK client.
 * Each returns one round trip (ms). `fsync` is the server's fsync setting.
 */
async function notifyBaselines(
  url: string,
  mcp: Client,
): Promise<{ bare(): Promise<number>; durable(): Promise<number>; mcpWake(): Promise<number>; fsync: string; end(): Promise<void> }> {
  const listener = new pg.Client({ connectionString: url });
  const sender = new pg.Client({ connectionString: url });
  await Promise.all([listener.connect(), sender.connect()]);
  await sender.query("CREATE TABLE IF NOT EXISTS wcx_bench_durable_events (seq bigserial PRIMARY KEY, agent_id text NOT NULL, at timestamptz NOT NULL)");
  await sender.query("SET synchronous_commit = on");
  const fsync = String((await sender.query<{ fsync: string }>("SHOW fsync")).rows[0]?.fsync);
  await listener.query(`LISTEN ${BARE_CHANNEL}; LISTEN ${DURABLE_CHANNEL}`);
  let i = 0;
  const roundTrip = async (channel: string, sql: string): Promise<number> => {
    const heard = new Promise<void>((resolve) => {
      const on = (n: pg.Notification) => {
        if (n.channel !== channel) return;
        listener.off("notification", on);
        resolve();
      };
      listener.on("notification", on);
    });
    const t = performance.now();
    await sender.query(sql);
    await heard;
    return performance.now() - t;
  };
  const bare = () => roundTrip(BARE_CHANNEL, `NOTIFY ${BARE_CHANNEL}, '${i++}'`);
  const durableSql = (channel: string) =>
    `BEGIN; WITH added AS (INSERT INTO wcx_bench_durable_events (agent_id, at) VALUES ('a', clock_timestamp()) RETURNING seq) ` +
    `SELECT pg_notify('${channel}', seq::text) FROM added; COMMIT`;
  const durable = () => roundTrip(DURABLE_CHANNEL, durableSql(DURABLE_CHANNEL));
  const mcpWake = async (): Promise<number> => {
    const answered = mcp.callTool({ name: "wait_event", arguments: {} }).then(() => performance.now());
    // As in a round: the call waits well before the event is committed.
    await new Promise((r) => setTimeout(r, 30));
    const t = performance.now();
    await sender.query(durableSql(MCP_WAKE_CHANNEL));
    return (await answered) - t;
  };
  for (let w = 0; w < NOTIFY_WARM_UP; w++) {
    await bare();
    await durable();
    await mcpWake();
  }
  return { bare, durable, mcpWake, fsync, end: async () => void (await Promise.all([listener.end(), sender.end()])) };
}

export async function benchAgentEvents(o: { postgresUrl: string; redisUrl: string }): Promise<BenchResult> {
  const projectDir = createBenchProject();
  const tokens = { lead: `lead-${randomBytes(12).toString("hex")}`, worker: `worker-${randomBytes(12).toString("hex")}` };
  const file = join(mkdtempSync(join(tmpdir(), "wcx-bench-agents-")), "tokens.json");
  writeFileSync(
    file,
    JSON.stringify({
      tokens: [
        { token: tokens.lead, client_id: "local", subject: "lead" },
        { token: tokens.worker, client_id: "local", subject: "worker" },
      ],
    }),
  );
  const stack = await startDistributed({
    basePort: await findFreeBasePort(),
    postgresUrl: o.postgresUrl,
    redisUrl: o.redisUrl,
    projectDir,
    ...benchStackOptions(),
    // As the chart deploys it: the gateway's audit spool on local disk.
    gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: file, WEBCODEX_AUDIT_SPOOL_DIR: benchDir("wcx-bench-spool-") },
  });
  const bareServer = await startChild(process.execPath, [baselineServerPath, projectDir, "0", o.postgresUrl, MCP_WAKE_CHANNEL], /LISTENING (\d+)/).catch(
    async (error: unknown) => {
      await stack.stop();
      throw error;
    },
  );
  try {
    const bareMcp = await connect(`http://127.0.0.1:${bareServer.match[1]}/mcp`);
    const [lead, worker] = await Promise.all([connect(stack.mcpUrl, tokens.lead), connect(stack.mcpUrl, tokens.worker)]);
    const project = String(
      ((await lead.callTool({ name: "list_projects", arguments: {} })).structuredContent as { projects: Array<{ project_ref: string }> }).projects[0]
        ?.project_ref,
    );
    const leadAgent = await gw(lead, "create_agent", { name: "lead" });
    const workerAgent = await gw(worker, "create_agent", { name: "worker" });
    let cursor = "0";
    const sql = new pg.Client({ connectionString: o.postgresUrl });
    await sql.connect();
    /** Postgres' clock minus this process' performance clock (ms), from one round trip. */
    const clockOffset = async (): Promise<number> => {
      const t0 = performance.now();
      const r = await sql.query<{ ms: string }>("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS ms");
      const t1 = performance.now();
      return Number(r.rows[0]?.ms) - (t0 + t1) / 2;
    };
    const baselines = await notifyBaselines(o.postgresUrl, bareMcp);
    const bare: number[] = [];
    const durable: number[] = [];
    const mcpWake: number[] = [];
    const callToWake: number[] = [];
    const propagation: number[] = [];
    /** How much later than the complete call's own answer the waiting lead's answer arrived. */
    const afterReturn: number[] = [];
    for (let i = 0; i < ROUNDS + 10; i++) {
      const task = await gw(lead, "create_agent_task", {
        project,
        title: `round ${i}`,
        instructions: "",
        assignee_agent_id: workerAgent["agent_id"],
        requester_agent_id: leadAgent["agent_id"],
        idempotency_key: `round-${i}`,
      });
      const attempt = await gw(worker, "start_agent_task_attempt", {
        task_id: task["task_id"],
        assignee_agent_id: workerAgent["agent_id"],
        idempotency_key: `round-${i}`,
      });
      // Catch up past task_assigned and attempt_started, then wait for the completion.
      cursor = String((await gw(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: cursor, wait_ms: 0 }))["cursor"]);
      let wokeAt = 0;
      const waiting = gw(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: cursor, wait_ms: 10_000 }).then((r) => {
        wokeAt = performance.now();
        return r;
      });
      await new Promise((r) => setTimeout(r, 30));
      const offset = await clockOffset();
      const t = performance.now();
      await gw(worker, "complete_agent_task_attempt", {
        task_id: attempt["task_id"],
        attempt_id: attempt["attempt_id"],
        assignee_agent_id: attempt["assignee_agent_id"],
        attempt_fence: attempt["attempt_fence"],
        attempt_controller_generation: attempt["attempt_controller_generation"],
        outcome: "succeeded",
        summary: "",
      });
      const completedAt = performance.now();
      const woke = await waiting;
      const event = (woke["events"] as Array<{ event_id: string; kind: string }>).find((e) => e.kind === "attempt_completed");
      if (woke["wait_state"] !== "ready" || !event) throw new Error(`round ${i}: ${JSON.stringify(woke)}`);
      cursor = String(woke["cursor"]);
      const seq = event.event_id.slice(event.event_id.lastIndexOf(":") + 1);
      const at = await sql.query<{ ms: string }>("SELECT (extract(epoch FROM at) * 1000)::text AS ms FROM refs.agent_events WHERE agent_id = $1 AND seq = $2", [
        leadAgent["agent_id"],
        seq,
      ]);
      const committedAt = Number(at.rows[0]?.ms) - offset;
      // The baselines of this round, right after it.
      const bareMs = await baselines.bare();
      const durableMs = await baselines.durable();
      const mcpWakeMs = await baselines.mcpWake();
      if (i >= 10) {
        bare.push(bareMs);
        durable.push(durableMs);
        mcpWake.push(mcpWakeMs);
        callToWake.push(wokeAt - t);
        propagation.push(wokeAt - committedAt);
        afterReturn.push(wokeAt - completedAt);
      }
    }
    await sql.end();
    await baselines.end();
    await Promise.all([lead.close(), worker.close(), bareMcp.close()]);
    const p = (s: number[], q: number) => round(percentile(s, q));
    const ratio = (s: number[], q: number, base = bare) => round(percentile(s, q) / percentile(base, q), 2);
    const meets = (s: number[]) => ratio(s, 50, durable) <= 3;
    return {
      name: "agent_events",
      metrics: {
        rounds: ROUNDS,
        bare_notify_p50_ms: p(bare, 50),
        bare_notify_p99_ms: p(bare, 99),
        call_to_wake_p50_ms: p(callToWake, 50),
        call_to_wake_p99_ms: p(callToWake, 99),
        call_to_wake_ratio_p50: ratio(callToWake, 50),
        call_to_wake_ratio_p99: ratio(callToWake, 99),
        propagation_p50_ms: p(propagation, 50),
        propagation_p99_ms: p(propagation, 99),
        propagation_ratio_p50: ratio(propagation, 50),
        propagation_ratio_p99: ratio(propagation, 99),
        durable_notify_p50_ms: p(durable, 50),
        durable_notify_p99_ms: p(durable, 99),
        call_to_wake_durable_ratio_p50: ratio(callToWake, 50, durable),
        call_to_wake_durable_ratio_p99: ratio(callToWake, 99, durable),
        propagation_durable_ratio_p50: ratio(propagation, 50, durable),
        propagation_durable_ratio_p99: ratio(propagation, 99, durable),
        durable_mcp_wake_p50_ms: p(mcpWake, 50),
        durable_mcp_wake_p99_ms: p(mcpWake, 99),
        durable_mcp_wake_durable_ratio_p50: ratio(mcpWake, 50, durable),
        propagation_mcp_wake_ratio_p50: ratio(propagation, 50, mcpWake),
        propagation_mcp_wake_ratio_p99: ratio(propagation, 99, mcpWake),
        wake_after_complete_returned_p50_ms: p(afterReturn, 50),
        wake_after_complete_returned_p99_ms: p(afterReturn, 99),
      },
      notes: `baselines, one of each after every round (same load): durable_notify (INSERT + NOTIFY committed in one transaction, synchronous_commit on, fsync ${baselines.fsync}, sent as one round trip, heard by a LISTENer: the least a durable event costs) and bare_notify (NOTIFY on one connection heard by a LISTENer on another, for scale); durable_mcp_wake (the same durable transaction waking a waiting tools/call of a bare MCP SDK Streamable HTTP server that LISTENs, until its answer arrives here: the least any MCP server's client sees of a durable event, ${ratio(mcpWake, 50, durable)}x durable_notify at p50). Target: propagation p50 <= 3x durable_notify p50 (from the completion's last statement before its commit, commit included, to the lead's waiting wait_for_agent_events returning): ${ratio(propagation, 50, durable)}x, ${meets(propagation) ? "meets" : "misses"} it; call_to_wake (sending complete_agent_task_attempt, whose answer waits for its durable audit record, to the lead's wait returning), reported beside it: ${ratio(callToWake, 50, durable)}x durable_notify at p50`,
    };
  } finally {
    await Promise.all([stack.stop(), stopChild(bareServer.child)]);
  }
}
