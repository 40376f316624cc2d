/**
 * One concept over 400 lines: the contract of the ref-resolver's agent store, against one database.
 *
 * Agents, Tasks and fenced Attempts in the ref-resolver against real Postgres (and a private
 * redis-server for the fence counter): one live Attempt per Task, fences that only rise (also
 * after FLUSHALL), exact keyed replay under concurrency, takeover after a lapsed lease with
 * the old tuple and ref failing closed, event logs with exact cursors woken across replicas
 * by LISTEN/NOTIFY, and another tenant's ids answered exactly like made-up ones.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { Client } from "@connectrpc/connect";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createLogger, createPostgresDatabase, createRedis, principalHeaders } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import {
  createMemoryTaskFenceCounter,
  createPostgresAgentEventBus,
  createRedisTaskFenceCounter,
  createRefResolver,
  migrateRefResolver,
} from "@webcodex/ref-resolver";
import type { AgentEventBus } from "@webcodex/ref-resolver";
import { createTestDatabase, lapseLease, redisKeyPrefix, until } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";
import { freePort } from "../support/ports.js";

type RefClient = Client<typeof RefResolverService>;
const as = (p: Principal) => ({ headers: principalHeaders(p) });
const lead: Principal = { clientId: "acme", subject: "lead" };
const worker: Principal = { clientId: "acme", subject: "worker" };
const stranger: Principal = { clientId: "acme", subject: "stranger" };
const mallory: Principal = { clientId: "evil", subject: "mallory" };

type Answer = { ok: true; result: Record<string, unknown> } | { ok: false; failure: { reasonCode: string; detailCode: string; evidenceJson: string } };

async function call(client: RefClient, p: Principal, tool: string, args: Record<string, unknown>): Promise<Answer> {
  const res = await client.callAgentTool({ tool, argumentsJson: JSON.stringify(args) }, as(p));
  if (res.failure)
    return { ok: false, failure: { reasonCode: res.failure.reasonCode, detailCode: res.failure.detailCode, evidenceJson: res.failure.evidenceJson } };
  return { ok: true, result: JSON.parse(res.resultJson) as Record<string, unknown> };
}

async function ok(client: RefClient, p: Principal, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const a = await call(client, p, tool, args);
  if (!a.ok) throw new Error(`${tool}: ${a.failure.reasonCode}/${a.failure.detailCode}`);
  return a.result;
}

async function failed(
  client: RefClient,
  p: Principal,
  tool: string,
  args: Record<string, unknown>,
): Promise<{ reasonCode: string; detailCode: string; evidenceJson: string }> {
  const a = await call(client, p, tool, args);
  if (a.ok) throw new Error(`${tool} unexpectedly succeeded: ${JSON.stringify(a.result)}`);
  return a.failure;
}

const tupleOf = (a: Record<string, unknown>) => ({
  task_id: a["task_id"],
  attempt_id: a["attempt_id"],
  assignee_agent_id: a["assignee_agent_id"],
  attempt_fence: a["attempt_fence"],
  attempt_controller_generation: a["attempt_controller_generation"],
});

describe("ref-resolver: Agents, Tasks and fenced Attempts on Postgres", () => {
  let database: TestDatabase;
  let db: Database;
  let client: RefClient;

  const setupTask = async (c: RefClient = client, key = `k-${Math.random()}`) => {
    const leadAgent = await ok(c, lead, "create_agent", { name: "lead" });
    const workerAgent = await ok(c, worker, "create_agent", { name: "worker" });
    const task = await ok(c, lead, "create_agent_task", {
      project: "agent:acme:app",
      title: "fix",
      instructions: "do it",
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: key,
    });
    return { leadAgent, workerAgent, taskId: String(task["task_id"]), task };
  };

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 20 });
    await migrateRefResolver(db);
    client = createInProcessClient(RefResolverService, createRefResolver({ db }));
    await client.registerProject({ clientId: "acme", projectId: "app", rootIdentity: "/srv/app", name: "app" }, as({ clientId: "acme", subject: "runner:r1" }));
    await client.registerProject(
      { clientId: "evil", projectId: "app", rootIdentity: "/srv/evil", name: "app" },
      as({ clientId: "evil", subject: "runner:r2" }),
    );
  });
  after(async () => {
    await db.close();
    await database.drop();
  });

  it("100 concurrent starts of one Task give exactly one live Attempt; the same key replays it exactly", async () => {
    const { workerAgent, taskId } = await setupTask();
    const distinct = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(client, worker, "start_agent_task_attempt", { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: `k${i}` }),
      ),
    );
    const winners = distinct.filter((a) => a.ok);
    assert.equal(winners.length, 1);
    assert.ok(distinct.every((a) => a.ok || a.failure.reasonCode === "lease_held"));
    const live = await db.query(`SELECT count(*)::int AS n FROM refs.agent_task_attempts WHERE task_id = $1 AND state = 'live'`, [taskId]);
    assert.equal(live.rows[0]?.["n"], 1);

    const { taskId: t2, workerAgent: w2 } = await setupTask();
    const same = await Promise.all(
      Array.from({ length: 100 }, () =>
        call(client, worker, "start_agent_task_attempt", { task_id: t2, assignee_agent_id: w2["agent_id"], idempotency_key: "one-key" }),
      ),
    );
    assert.ok(same.every((a) => a.ok));
    const first = same[0] as { ok: true; result: Record<string, unknown> };
    assert.ok(
      same.every((a) => a.ok && JSON.stringify(a.result) === JSON.stringify(first.result)),
      "every call got the first result exactly",
    );
    assert.match(String(first.result["attempt_ref"]), /^~t\d+$/);
    // The same key for another request fails closed.
    assert.equal(
      (await failed(client, worker, "start_agent_task_attempt", { task_id: t2, assignee_agent_id: w2["agent_id"], idempotency_key: "one-key", lease_ms: 5000 }))
        .detailCode,
      "idempotency_key_reused",
    );
  });

  it("a lapsed lease lets a new Attempt take over with a higher fence; the old tuple and ref fail closed", async () => {
    const { workerAgent, taskId, leadAgent } = await setupTask();
    const base = { task_id: taskId, assignee_agent_id: workerAgent["agent_id"] };
    const first = await ok(client, worker, "start_agent_task_attempt", { ...base, idempotency_key: "a1", lease_ms: 1000 });
    assert.equal((await failed(client, worker, "start_agent_task_attempt", { ...base, idempotency_key: "a2" })).reasonCode, "lease_held");
    await ok(client, worker, "heartbeat_agent_task_attempt", tupleOf(first));
    const admitted = await client.admitAttemptRef({ attemptRef: String(first["attempt_ref"]), projectCanonicalId: "agent:acme:app" }, as(worker));
    assert.equal(admitted.failure, undefined);
    assert.equal(admitted.attemptFence, BigInt(Number(first["attempt_fence"])));
    assert.equal(
      (await client.admitAttemptRef({ attemptRef: String(first["attempt_ref"]), projectCanonicalId: "agent:acme:other" }, as(worker))).failure?.detailCode,
      "attempt_other_project",
    );

    await lapseLease(db, first["attempt_id"], 1000);
    assert.equal((await failed(client, worker, "heartbeat_agent_task_attempt", tupleOf(first))).detailCode, "lease_expired");
    const second = await ok(client, worker, "start_agent_task_attempt", { ...base, idempotency_key: "a3" });
    assert.ok(Number(second["attempt_fence"]) > Number(first["attempt_fence"]));
    assert.notEqual(second["attempt_ref"], first["attempt_ref"]);

    for (const tool of ["heartbeat_agent_task_attempt", "complete_agent_task_attempt"]) {
      const f = await failed(client, worker, tool, { ...tupleOf(first), ...(tool.startsWith("complete") ? { outcome: "succeeded", summary: "late" } : {}) });
      assert.deepEqual([f.reasonCode, f.detailCode], ["fence_stale", "attempt_superseded"], tool);
      // read_agent_task is a Gateway tool: its follow-up is the call_runtime_tool wrapper a Host can run as is.
      assert.deepEqual(JSON.parse(f.evidenceJson).follow_up, {
        follow_up_kind: "fallback_recovery",
        tool: "call_runtime_tool",
        arguments: { tool: "read_agent_task", arguments: { task_id: taskId } },
      });
    }
    const staleRef = await client.admitAttemptRef({ attemptRef: String(first["attempt_ref"]), projectCanonicalId: "agent:acme:app" }, as(worker));
    assert.equal(staleRef.failure?.reasonCode, "fence_stale");
    const staleContinuation = await failed(client, worker, "start_agent_task_endpoint_continuation", { attempt_ref: first["attempt_ref"] });
    assert.equal(staleContinuation.reasonCode, "fence_stale");
    const reconciled = await ok(client, worker, "reconcile_agent_task_attempt", tupleOf(first));
    assert.deepEqual([reconciled["attempt_state"], reconciled["holds_fence"], reconciled["outcome_unknown"]], ["lost", false, true]);
    // Replaying the first key still returns the first (now stale) Attempt, never the successor.
    assert.deepEqual(await ok(client, worker, "start_agent_task_attempt", { ...base, idempotency_key: "a1", lease_ms: 1000 }), first);

    const done = await ok(client, worker, "complete_agent_task_attempt", { ...tupleOf(second), outcome: "succeeded", summary: "done" });
    assert.deepEqual([done["attempt_state"], done["task_state"]], ["succeeded", "completed"]);
    const read = await ok(client, lead, "read_agent_task", { task_id: taskId });
    assert.deepEqual([read["state"], read["summary"]], ["completed", "done"]);
    const events = await ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], wait_ms: 0 });
    assert.deepEqual(
      (events["events"] as Array<{ kind: string }>).map((e) => e.kind),
      ["task_assigned", "attempt_started", "attempt_lost", "attempt_started", "attempt_completed"],
    );
    // Nothing after completion: a finished Task takes no new Attempt.
    assert.equal((await failed(client, worker, "start_agent_task_attempt", { ...base, idempotency_key: "a4" })).detailCode, "task_finished");
  });

  it("continuation reports dispatch, fresh turn and consume separately; stopping a Task ends its live Attempt's authority", async () => {
    const { workerAgent, taskId, leadAgent } = await setupTask();
    const attempt = await ok(client, worker, "start_agent_task_attempt", {
      task_id: taskId,
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: "s1",
    });
    const continued = await ok(client, worker, "start_agent_task_endpoint_continuation", { attempt_ref: attempt["attempt_ref"] });
    assert.deepEqual([continued["dispatch"], continued["fresh_turn"], continued["consume"]], ["accepted", "unknown", "unknown"]);
    assert.equal(
      (await failed(client, worker, "start_agent_task_endpoint_continuation", { attempt_ref: attempt["attempt_ref"], task_id: taskId })).detailCode,
      "ref_with_explicit_tuple",
    );
    assert.equal((await ok(client, worker, "start_agent_task_endpoint_continuation", tupleOf(attempt)))["dispatch"], "accepted");
    const stopped = await ok(client, lead, "stop_agent_task", { task_id: taskId, reason: "no longer needed" });
    assert.deepEqual(stopped, { task_id: taskId, state: "stopped" });
    assert.deepEqual(await ok(client, lead, "stop_agent_task", { task_id: taskId, reason: "again" }), stopped, "stopping a stopped task answers the same");
    assert.equal((await failed(client, worker, "heartbeat_agent_task_attempt", tupleOf(attempt))).reasonCode, "fence_stale");
    assert.equal(
      (await client.admitAttemptRef({ attemptRef: String(attempt["attempt_ref"]), projectCanonicalId: "agent:acme:app" }, as(worker))).failure?.reasonCode,
      "fence_stale",
    );
    const reconciled = await ok(client, worker, "reconcile_agent_task_attempt", tupleOf(attempt));
    assert.deepEqual([reconciled["attempt_state"], reconciled["outcome_unknown"], reconciled["task_state"]], ["stopped", true, "stopped"]);
    const kinds = async (who: Principal, agent: unknown) =>
      ((await ok(client, who, "wait_for_agent_events", { agent_id: agent, wait_ms: 0 }))["events"] as Array<{ kind: string }>).map((e) => e.kind);
    assert.deepEqual(await kinds(lead, leadAgent["agent_id"]), ["task_assigned", "attempt_started", "task_stopped"]);
    assert.deepEqual(await kinds(worker, workerAgent["agent_id"]), [
      "task_assigned",
      "attempt_started",
      "continuation_requested",
      "continuation_requested",
      "task_stopped",
    ]);
  });

  it("after FLUSHALL of the fence counter's Redis, the next fence is above every earlier one", async () => {
    const port = await freePort();
    const proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    const redis = createRedis(`redis://127.0.0.1:${port}`);
    const db2 = createPostgresDatabase({ url: database.url, max: 5 });
    try {
      await until("private redis", async () => (await redis.ping().catch(() => "")) === "PONG");
      const redisClient = createInProcessClient(
        RefResolverService,
        createRefResolver({ db: db2, taskFences: createRedisTaskFenceCounter(redis, redisKeyPrefix()) }),
      );
      const { workerAgent, taskId } = await setupTask(redisClient);
      const fences: number[] = [];
      for (let i = 0; i < 3; i++) {
        const a = await ok(redisClient, worker, "start_agent_task_attempt", {
          task_id: taskId,
          assignee_agent_id: workerAgent["agent_id"],
          idempotency_key: `f${i}`,
          lease_ms: 1000,
        });
        fences.push(Number(a["attempt_fence"]));
        await lapseLease(db, a["attempt_id"], 1000);
      }
      assert.deepEqual(
        fences,
        [...fences].sort((a, b) => a - b),
      );
      await redis.flushall();
      const after = await ok(redisClient, worker, "start_agent_task_attempt", {
        task_id: taskId,
        assignee_agent_id: workerAgent["agent_id"],
        idempotency_key: "f-after",
      });
      assert.ok(Number(after["attempt_fence"]) > Math.max(...fences), `${String(after["attempt_fence"])} > ${Math.max(...fences)}`);
      // Fences in Postgres only rise, whatever a counter says.
      await assert.rejects(db.query(`UPDATE refs.agent_tasks SET current_fence = 1 WHERE task_id = $1`, [taskId]));
      await assert.rejects(
        db.query(
          `INSERT INTO refs.agent_task_attempts (attempt_id, task_id, client_id, subject, assignee_agent_id, attempt_fence, controller_generation, lease_ms, lease_expires_at)
        VALUES ('wc_att_${"0".repeat(32)}', $1, 'acme', 'worker', $2, 1, 1, 1000, now())`,
          [taskId, workerAgent["agent_id"]],
        ),
        "a reused fence is impossible",
      );
    } finally {
      redis.disconnect();
      await db2.close();
      proc.kill("SIGTERM");
    }
  });

  it("wait_for_agent_events: timeout keeps the cursor, the same cursor replays the same events, a waiter on another replica wakes via LISTEN/NOTIFY", async () => {
    const db2 = createPostgresDatabase({ url: database.url, max: 5 });
    const bus: AgentEventBus = createPostgresAgentEventBus(database.url, createLogger({ service: "test", level: "silent" }));
    try {
      const replica = createInProcessClient(RefResolverService, createRefResolver({ db: db2, agentEvents: bus, taskFences: createMemoryTaskFenceCounter() }));
      const { workerAgent, taskId, leadAgent } = await setupTask();
      const all = await ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], wait_ms: 0 });
      const cursor = String(all["cursor"]);
      const t0 = Date.now();
      const idle = await ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: cursor, wait_ms: 300 });
      assert.ok(Date.now() - t0 >= 280);
      assert.deepEqual([idle["wait_state"], idle["cursor"], idle["wait_ms"], idle["events"]], ["timeout", cursor, 300, []]);
      assert.deepEqual(
        await ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], wait_ms: 0 }),
        all,
        "the same cursor replays the same events",
      );

      await new Promise((r) => setTimeout(r, 200)); // eslint-disable-line no-restricted-syntax -- kept: the replica's LISTEN connection shows no event
      const started = Date.now();
      const waiting = ok(replica, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: cursor, wait_ms: 20_000 });
      await new Promise((r) => setTimeout(r, 100)); // eslint-disable-line no-restricted-syntax -- kept: a waiting call shows no event; it should be waiting before the append
      await ok(client, worker, "start_agent_task_attempt", { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "w1" });
      const woke = await waiting;
      assert.ok(Date.now() - started < 5_000, "woken by NOTIFY, not by the deadline");
      assert.deepEqual([woke["wait_state"], (woke["events"] as Array<{ kind: string }>).map((e) => e.kind)], ["ready", ["attempt_started"]]);
      assert.equal(
        (await failed(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: "999999" })).detailCode,
        "cursor_not_found",
      );

      // The other replica's waiter was answered with the event its NOTIFY carried: exactly what
      // reading the log from its cursor returns.
      const pickOf = (r: Record<string, unknown>) => [r["events"], r["cursor"], r["wait_state"]];
      assert.deepEqual(
        pickOf(woke),
        pickOf(await ok(replica, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: cursor, wait_ms: 0 })),
      );

      // A waiter on the appending replica is answered with the events its wake carried: exactly
      // what reading the log from its cursor returns, also for a takeover's two events at once.
      const at = String(woke["cursor"]);
      const sameReplica = ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: at, wait_ms: 20_000 });
      await new Promise((r) => setTimeout(r, 100)); // eslint-disable-line no-restricted-syntax -- kept: a waiting call shows no event; it should be waiting before the append
      await ok(client, lead, "stop_agent_task", { task_id: taskId, reason: "done" });
      const stopped = await sameReplica;
      assert.deepEqual(
        (stopped["events"] as Array<{ kind: string }>).map((e) => e.kind),
        ["task_stopped"],
      );
      const pick = (r: Record<string, unknown>) => [r["events"], r["cursor"], r["wait_state"]];
      assert.deepEqual(
        pick(stopped),
        pick(await ok(client, lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: at, wait_ms: 0 })),
        "the same cursor replays the same events",
      );
      const t2 = await setupTask();
      const first = await ok(client, worker, "start_agent_task_attempt", {
        task_id: t2.taskId,
        assignee_agent_id: t2.workerAgent["agent_id"],
        idempotency_key: "h1",
        lease_ms: 1000,
      });
      const before = String((await ok(client, lead, "wait_for_agent_events", { agent_id: t2.leadAgent["agent_id"], wait_ms: 0 }))["cursor"]);
      await lapseLease(db, first["attempt_id"], 1000);
      assert.equal((await ok(client, worker, "reconcile_agent_task_attempt", tupleOf(first)))["attempt_state"], "lease_expired");
      const takeover = ok(client, lead, "wait_for_agent_events", { agent_id: t2.leadAgent["agent_id"], after_cursor: before, wait_ms: 20_000 });
      await new Promise((r) => setTimeout(r, 100)); // eslint-disable-line no-restricted-syntax -- kept: a waiting call shows no event; it should be waiting before the append
      await ok(client, worker, "start_agent_task_attempt", { task_id: t2.taskId, assignee_agent_id: t2.workerAgent["agent_id"], idempotency_key: "h2" });
      const heard = await takeover;
      assert.deepEqual(
        (heard["events"] as Array<{ kind: string }>).map((e) => e.kind),
        ["attempt_lost", "attempt_started"],
      );
      assert.deepEqual(
        pick(heard),
        pick(await ok(client, lead, "wait_for_agent_events", { agent_id: t2.leadAgent["agent_id"], after_cursor: before, wait_ms: 0 })),
      );
    } finally {
      await bus.close();
      await db2.close();
    }
  });

  it("another principal or tenant gets the same answer for every id and ref as for a made-up one", async () => {
    const { workerAgent, taskId, leadAgent } = await setupTask();
    const attempt = await ok(client, worker, "start_agent_task_attempt", {
      task_id: taskId,
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: "x1",
    });
    const made = { agent: `wc_agent_${"1".repeat(32)}`, task: `wc_task_${"1".repeat(32)}`, attempt: `wc_att_${"1".repeat(32)}` };
    const leadRef = (
      await ok(client, lead, "rotate_agent_continuation_endpoint", {
        agent_id: leadAgent["agent_id"],
        endpoint_id: leadAgent["endpoint_id"],
        expected_controller_generation: 1,
      })
    )["agent_continuation_ref"];
    for (const who of [mallory, stranger]) {
      const same = async (tool: string, real: Record<string, unknown>, fake: Record<string, unknown>) =>
        assert.deepEqual(await call(client, who, tool, real), await call(client, who, tool, fake), `${who.subject} ${tool}`);
      await same("read_agent_task", { task_id: taskId }, { task_id: made.task });
      await same("stop_agent_task", { task_id: taskId, reason: "x" }, { task_id: made.task, reason: "x" });
      await same(
        "start_agent_task_attempt",
        { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "m" },
        { task_id: made.task, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "m" },
      );
      await same("heartbeat_agent_task_attempt", tupleOf(attempt), { ...tupleOf(attempt), attempt_id: made.attempt });
      await same("reconcile_agent_task_attempt", tupleOf(attempt), { ...tupleOf(attempt), attempt_id: made.attempt });
      await same("start_agent_task_endpoint_continuation", { attempt_ref: attempt["attempt_ref"] }, { attempt_ref: "~t999999" });
      await same("wait_for_agent_events", { agent_id: workerAgent["agent_id"], wait_ms: 0 }, { agent_id: made.agent, wait_ms: 0 });
      await same("wait_for_agent_events", { agent_continuation_ref: leadRef, wait_ms: 0 }, { agent_continuation_ref: "~a999999", wait_ms: 0 });
      await same(
        "rotate_agent_continuation_endpoint",
        { agent_id: leadAgent["agent_id"], endpoint_id: leadAgent["endpoint_id"], expected_controller_generation: 2 },
        { agent_id: made.agent, endpoint_id: leadAgent["endpoint_id"], expected_controller_generation: 2 },
      );
      assert.deepEqual(
        await client.admitAttemptRef({ attemptRef: String(attempt["attempt_ref"]), projectCanonicalId: "agent:acme:app" }, as(who)),
        await client.admitAttemptRef({ attemptRef: "~t999999", projectCanonicalId: "agent:acme:app" }, as(who)),
      );
      assert.deepEqual((await ok(client, who, "list_agent_tasks", {}))["tasks"], []);
    }
    // Another tenant cannot even assign work to this tenant's Agent.
    await client.registerProject(
      { clientId: "evil", projectId: "app", rootIdentity: "/srv/evil", name: "app" },
      as({ clientId: "evil", subject: "runner:r2" }),
    );
    const assign = (agent: unknown) =>
      call(client, mallory, "create_agent_task", {
        project: "agent:evil:app",
        title: "t",
        instructions: "",
        assignee_agent_id: agent,
        idempotency_key: `e-${String(agent)}`,
      });
    assert.deepEqual(await assign(workerAgent["agent_id"]), await assign(made.agent));
  });
});
