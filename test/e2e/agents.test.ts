/**
 * Agents handing work to agents, through real MCP SDK clients with two principals of one
 * tenant (and a third principal of another tenant), on `webcodex dev` and on the distributed
 * stack (real Postgres and Redis):
 * - the lead creates a Task for the worker's Agent; the worker hears task_assigned, starts an
 *   Attempt, edits a file with its attempt_ref and completes; the lead hears
 *   attempt_completed and reads the Task as completed;
 * - takeover: the first Attempt's lease lapses, a second starts with a higher fence, and the
 *   first one's edit, run, heartbeat and completion all fail closed with nothing written;
 * - keyed replay returns the same Attempt exactly, also across a ref-resolver restart; 100
 *   concurrent starts of one Task give exactly one live Attempt; after the fence counters are
 *   lost (Redis FLUSHALL; embedded: a restart) the next fence is above every earlier one;
 * - rotation leaves the old ~a ref stale;
 * - another tenant's tries at every id and ref equal made-up ones;
 * - the storage side of the fence: a call of the first Attempt admitted before the takeover
 *   and reaching the Runner after the second Attempt's fence did writes and runs nothing, also
 *   after the Runner restarts; and a call of the first Attempt that the gateway admitted and
 *   held before its dispatch (a test hook) until the second Attempt started, before that one's
 *   first call, writes and runs nothing (the start told the Runner the new fence);
 * - every follow-up returned is executed exactly as returned.
 *
 * One concept over 400 lines: the agent tools end to end, one scenario per test.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import { createInProcessClient, createLogger, createRedis, createServiceIdentity, principalHeaders } from "@webcodex/platform";
import { RefResolverService, RunnerBrokerService, RunnerService } from "@webcodex/proto";
import { createRunner } from "@webcodex/runner";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  firstProjectRef,
  hookedCliPath,
  startDevServer,
  startTestStack,
  tempDir,
  until,
} from "../support/index.js";
import type { DevServer, TestDatabase, ToolOutcome } from "../support/index.js";
import { freePort } from "../support/ports.js";

const TOKENS = {
  lead: "agents-lead-token-0123456789abcdef",
  worker: "agents-worker-token-0123456789abcd",
  mallory: "agents-mallory-token-0123456789abc",
};

function tokensFile(): string {
  const file = join(tempDir("wcx-agents-tokens-"), "tokens.json");
  writeFileSync(
    file,
    JSON.stringify({
      tokens: [
        { token: TOKENS.lead, client_id: "local", subject: "lead" },
        { token: TOKENS.worker, client_id: "local", subject: "worker" },
        { token: TOKENS.mallory, client_id: "evil", subject: "mallory" },
      ],
    }),
  );
  return file;
}

/** What the Runner answered to a call delivered without the gateway's admission. */
type RunnerAnswer = {
  resultJson: string;
  failure?: { reasonCode: string; failureStage: string; detailCode: string; stateChanged: boolean; evidenceJson: string } | undefined;
};

interface Clients {
  lead: Client;
  worker: Client;
  mallory: Client;
  projectDir: string;
  /** The gateway's attempt dispatch hold directory (WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD of the hooked CLI). */
  holdDir: string;
  /**
   * Delivers a workspace call made for an Attempt to the Runner's dispatch path as the worker,
   * skipping the gateway's admission: a call admitted before a takeover arriving late.
   */
  lateDispatch(project: string, tool: string, args: Record<string, unknown>, attempt: { taskId: string; fence: bigint }): Promise<RunnerAnswer>;
  /** Stops the Project's Runner and starts it again on the same workspace (clients reconnect when needed). */
  restartRunner(): Promise<void>;
  /** Stops the ref-resolver and starts it again on the same database. */
  restartRefResolver(): Promise<void>;
  /** Loses every Task fence counter (Redis FLUSHALL; embedded: its in-memory counter, by a restart). */
  loseFenceCounters(): Promise<void>;
}

/** Calls a tool by name when tools/list shows it, else through call_runtime_tool. */
async function call(client: Client, tool: string, args: Record<string, unknown>): Promise<ToolOutcome> {
  const direct = new Set((await client.listTools()).tools.map((t) => t.name));
  return direct.has(tool) ? callTool(client, tool, args) : callTool(client, "call_runtime_tool", { tool, arguments: args });
}

async function ok(client: Client, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await call(client, tool, args);
  assert.equal(r.isError, false, `${tool}: ${JSON.stringify(r.result)}`);
  return r.result;
}

async function failure(client: Client, tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await call(client, tool, args);
  assert.equal(r.isError, true, `${tool} should fail: ${JSON.stringify(r.result)}`);
  return r.result;
}

/** Executes a returned follow-up exactly as returned: its tool name with its arguments. */
async function followUp(client: Client, fu: unknown): Promise<ToolOutcome> {
  const f = fu as { tool: string; arguments: Record<string, unknown> };
  assert.ok(f && typeof f.tool === "string", `a follow-up: ${JSON.stringify(fu)}`);
  return callTool(client, f.tool, f.arguments);
}

const tupleOf = (a: Record<string, unknown>) => ({
  task_id: a["task_id"],
  attempt_id: a["attempt_id"],
  assignee_agent_id: a["assignee_agent_id"],
  attempt_fence: a["attempt_fence"],
  attempt_controller_generation: a["attempt_controller_generation"],
});

type Event = { event_id: string; kind: string; task_id?: string; attempt_id?: string };

/** Waits on `selector` until an event of `kind` (for `taskId`) arrives; returns it and the cursor after it. */
async function waitFor(
  client: Client,
  selector: Record<string, unknown>,
  cursor: string,
  kind: string,
  taskId?: string,
): Promise<{ event: Event; cursor: string }> {
  let at = cursor;
  for (let i = 0; i < 10; i++) {
    const r = await ok(client, "wait_for_agent_events", { ...selector, after_cursor: at, wait_ms: 10_000 });
    const events = r["events"] as Event[];
    const hit = events.find((e) => e.kind === kind && (taskId === undefined || e.task_id === taskId));
    at = String(r["cursor"]);
    if (hit) return { event: hit, cursor: at };
  }
  throw new Error(`no ${kind} event`);
}

function scenario(setup: () => Clients) {
  let leadAgent: Record<string, unknown>;
  let workerAgent: Record<string, unknown>;
  let leadProject: string;
  let workerProject: string;

  /** A Task the lead gives the worker, and the worker's first Attempt (lease `leaseMs`), which has created `path`. */
  async function taskWithFirstWrite(name: string, leaseMs: number, path: string): Promise<{ taskId: string; first: Record<string, unknown> }> {
    const { lead, worker } = setup();
    const created = await ok(lead, "create_agent_task", {
      project: leadProject,
      title: name,
      instructions: `Own ${path}`,
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: `t-${name}-${Date.now()}`,
    });
    const taskId = String(created["task_id"]);
    const first = await ok(worker, "start_agent_task_attempt", {
      task_id: taskId,
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: `${name}-first`,
      lease_ms: leaseMs,
    });
    await ok(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      changes: [{ kind: "create", path, content: "first attempt\n" }],
    });
    return { taskId, first };
  }

  /** The worker's second Attempt of `taskId`, started once the first one's lease has lapsed. */
  async function takeover(name: string, taskId: string, timeoutMs: number): Promise<Record<string, unknown>> {
    const { worker } = setup();
    return until(
      "the takeover",
      async () => {
        const r = await call(worker, "start_agent_task_attempt", {
          task_id: taskId,
          assignee_agent_id: workerAgent["agent_id"],
          idempotency_key: `${name}-second`,
        });
        return r.isError ? undefined : r.result;
      },
      timeoutMs,
      100,
    );
  }
  let leadCursor = "0";
  let workerCursor = "0";
  const ids: { taskId?: string; attempt?: Record<string, unknown>; taskKey?: string } = {};

  it("the lead assigns a Task; the worker hears it, attempts, edits with attempt_ref and completes; the lead hears it and reads completed", async () => {
    const { lead, worker } = setup();
    leadAgent = await ok(lead, "create_agent", { name: "lead" });
    workerAgent = await ok(worker, "create_agent", { name: "worker" });
    assert.match(String(workerAgent["agent_id"]), /^wc_agent_/);
    assert.equal(workerAgent["controller_generation"], 1);
    assert.match(String(workerAgent["agent_continuation_ref"]), /^~a\d+$/);
    leadProject = await firstProjectRef(lead);
    workerProject = await firstProjectRef(worker);

    ids.taskKey = `task-${Date.now()}`;
    const created = await ok(lead, "create_agent_task", {
      project: leadProject,
      title: "Write notes",
      instructions: "Create notes.txt",
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: ids.taskKey,
    });
    assert.equal(created["state"], "open");
    const taskId = String(created["task_id"]);
    ids.taskId = taskId;
    // The same key returns the first result exactly.
    assert.deepEqual(
      await ok(lead, "create_agent_task", {
        project: leadProject,
        title: "Write notes",
        instructions: "Create notes.txt",
        assignee_agent_id: workerAgent["agent_id"],
        requester_agent_id: leadAgent["agent_id"],
        idempotency_key: ids.taskKey,
      }),
      created,
    );

    const assigned = await waitFor(worker, { agent_continuation_ref: workerAgent["agent_continuation_ref"] }, workerCursor, "task_assigned", taskId);
    workerCursor = assigned.cursor;
    const attempt = await ok(worker, "start_agent_task_attempt", { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "attempt-1" });
    assert.match(String(attempt["attempt_ref"]), /^~t\d+$/);
    assert.equal(attempt["attempt_fence"], 1);
    ids.attempt = attempt;
    const replay = await ok(worker, "start_agent_task_attempt", { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "attempt-1" });
    assert.deepEqual(replay, attempt, "keyed replay: same ids, fence and ref");

    const edit = await ok(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: attempt["attempt_ref"],
      changes: [{ kind: "create", path: "notes.txt", content: "by the worker\n" }],
    });
    assert.deepEqual(
      (edit["files"] as Array<Record<string, unknown>>).map((f) => f["path"]),
      ["notes.txt"],
    );
    const ran = await ok(worker, "run_shell", { project: workerProject, attempt_ref: attempt["attempt_ref"], command: "cat notes.txt" });
    assert.match(JSON.stringify(ran), /by the worker/);

    // The lead is already waiting when the worker completes.
    const leadSees = waitFor(lead, { agent_id: leadAgent["agent_id"] }, leadCursor, "attempt_completed", taskId);
    await new Promise((r) => setTimeout(r, 200)); // eslint-disable-line no-restricted-syntax -- kept: a waiting call shows no event
    const done = await ok(worker, "complete_agent_task_attempt", { ...tupleOf(attempt), outcome: "succeeded", summary: "notes written" });
    assert.equal(done["task_state"], "completed");
    const heard = await leadSees;
    leadCursor = heard.cursor;
    assert.equal(heard.event.attempt_id, attempt["attempt_id"]);
    const read = await ok(lead, "read_agent_task", { task_id: taskId });
    assert.deepEqual([read["state"], read["summary"]], ["completed", "notes written"]);
    const listed = await ok(lead, "list_agent_tasks", { state: "completed" });
    assert.ok((listed["tasks"] as Array<{ task_id: string }>).some((t) => t.task_id === taskId));
  });

  it("takeover: after the lease lapses a second Attempt has a higher fence; the first one's edit, run, heartbeat and completion write nothing", async () => {
    const { lead, worker, projectDir } = setup();
    const created = await ok(lead, "create_agent_task", {
      project: leadProject,
      title: "Rewrite",
      instructions: "Rewrite shared.txt",
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: `t2-${Date.now()}`,
    });
    const taskId = String(created["task_id"]);
    const first = await ok(worker, "start_agent_task_attempt", {
      task_id: taskId,
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: "first",
      lease_ms: 5000,
    });
    await ok(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      changes: [{ kind: "create", path: "shared.txt", content: "first attempt\n" }],
    });
    const held = await failure(worker, "start_agent_task_attempt", {
      task_id: taskId,
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: "too-early",
    });
    assert.equal(held["reason_code"], "lease_held");
    const heldNext = await followUp(worker, held["follow_up"]);
    assert.deepEqual([heldNext.isError, heldNext.result["task_id"], heldNext.result["state"]], [false, taskId, "in_progress"]);
    const second = await until(
      "the lease lapses and a second Attempt starts",
      async () => {
        const r = await call(worker, "start_agent_task_attempt", { task_id: taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "second" });
        if (r.isError && r.result["reason_code"] !== "lease_held") assert.fail(JSON.stringify(r.result));
        return r.isError ? undefined : r.result;
      },
      20_000,
      200,
    );
    assert.ok(Number(second["attempt_fence"]) > Number(first["attempt_fence"]));
    const revision = String(
      ((await ok(worker, "read_files", { project: workerProject, files: [{ path: "shared.txt" }] }))["items"] as Array<Record<string, unknown>>)[0]?.[
        "read_revision"
      ],
    );
    await ok(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: second["attempt_ref"],
      changes: [
        {
          kind: "edit",
          path: "shared.txt",
          expected_read_revision: revision,
          edits: [{ replace_exact: { old_text: "first attempt", new_text: "second attempt" } }],
        },
      ],
    });
    const secondRevision = String(
      ((await ok(worker, "read_files", { project: workerProject, files: [{ path: "shared.txt" }] }))["items"] as Array<Record<string, unknown>>)[0]?.[
        "read_revision"
      ],
    );

    // Every use of the first Attempt now fails closed, and nothing is written or run.
    const staleEdit = await failure(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      changes: [
        {
          kind: "edit",
          path: "shared.txt",
          expected_read_revision: secondRevision,
          edits: [{ replace_exact: { old_text: "second attempt", new_text: "stale write" } }],
        },
      ],
    });
    assert.deepEqual([staleEdit["reason_code"], staleEdit["state_changed"]], ["fence_stale", false]);
    const staleCreate = await failure(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      changes: [{ kind: "create", path: "stale.txt", content: "x" }],
    });
    assert.equal(staleCreate["reason_code"], "fence_stale");
    const staleImport = await failure(worker, "import_host_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      files: [{ path: "imported.txt", content: "x" }],
    });
    assert.deepEqual([staleImport["reason_code"], staleImport["state_changed"]], ["fence_stale", false]);
    const staleRun = await failure(worker, "run_shell", { project: workerProject, attempt_ref: first["attempt_ref"], command: "echo ran > ran.txt" });
    assert.equal(staleRun["reason_code"], "fence_stale");
    const staleBeat = await failure(worker, "heartbeat_agent_task_attempt", tupleOf(first));
    assert.deepEqual([staleBeat["reason_code"], staleBeat["detail_code"]], ["fence_stale", "attempt_superseded"]);
    const staleDone = await failure(worker, "complete_agent_task_attempt", { ...tupleOf(first), outcome: "succeeded", summary: "late" });
    assert.equal(staleDone["reason_code"], "fence_stale");
    // Its follow-up, executed exactly as returned, reads the Task: still in progress under the second fence.
    const recovered = await followUp(worker, staleDone["follow_up"]);
    assert.equal(recovered.isError, false, JSON.stringify(recovered.result));
    assert.deepEqual(
      [recovered.result["state"], (recovered.result["current_attempt"] as Record<string, unknown>)["attempt_fence"]],
      ["in_progress", second["attempt_fence"]],
    );
    const reconciled = await ok(worker, "reconcile_agent_task_attempt", tupleOf(first));
    assert.deepEqual([reconciled["attempt_state"], reconciled["outcome_unknown"]], ["lost", true]);

    await ok(worker, "complete_agent_task_attempt", { ...tupleOf(second), outcome: "succeeded", summary: "rewritten" });
    assert.equal(readFileSync(join(projectDir, "shared.txt"), "utf8"), "second attempt\n", "exactly what the second attempt wrote");
    assert.throws(() => readFileSync(join(projectDir, "stale.txt")));
    assert.throws(() => readFileSync(join(projectDir, "ran.txt")));
    assert.throws(() => readFileSync(join(projectDir, "imported.txt")));
    const lost = await waitFor(lead, { agent_id: leadAgent["agent_id"] }, leadCursor, "attempt_completed", taskId);
    leadCursor = lost.cursor;
    assert.equal(lost.event.attempt_id, second["attempt_id"]);
  });

  it("wait_for_agent_events timeout keeps the cursor and its follow-up runs unchanged; the same cursor replays the same events", async () => {
    const { lead } = setup();
    const idle = await ok(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: leadCursor, wait_ms: 200 });
    assert.deepEqual([idle["wait_state"], idle["cursor"], idle["events"], idle["wait_ms"]], ["timeout", leadCursor, [], 200]);
    const again = await followUp(lead, idle["follow_up"]);
    assert.equal(again.isError, false, JSON.stringify(again.result));
    assert.deepEqual([again.result["wait_state"], again.result["cursor"]], ["timeout", leadCursor]);
    const clamped = await ok(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], after_cursor: leadCursor, wait_ms: 0 });
    assert.equal(clamped["wait_ms"], 0);
    const a = await ok(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], wait_ms: 0 });
    const b = await ok(lead, "wait_for_agent_events", { agent_id: leadAgent["agent_id"], wait_ms: 0 });
    assert.deepEqual(a, b);
    assert.deepEqual((a["events"] as Event[]).map((e) => e.kind).slice(0, 3), ["task_assigned", "attempt_started", "attempt_completed"]);
  });

  it("another tenant gets the same answer for every id and ref as for a made-up one", async () => {
    const { mallory } = setup();
    const made = { agent: `wc_agent_${"1".repeat(32)}`, task: `wc_task_${"1".repeat(32)}`, attempt: `wc_att_${"1".repeat(32)}` };
    const attempt = ids.attempt as Record<string, unknown>;
    const same = async (tool: string, real: Record<string, unknown>, fake: Record<string, unknown>) => {
      const [r, f] = [await call(mallory, tool, real), await call(mallory, tool, fake)];
      assert.equal(r.isError, true, tool);
      assert.deepEqual(r, f, tool);
    };
    await same("read_agent_task", { task_id: ids.taskId }, { task_id: made.task });
    await same("stop_agent_task", { task_id: ids.taskId, reason: "x" }, { task_id: made.task, reason: "x" });
    await same(
      "start_agent_task_attempt",
      { task_id: ids.taskId, assignee_agent_id: workerAgent["agent_id"], idempotency_key: "m" },
      { task_id: made.task, assignee_agent_id: made.agent, idempotency_key: "m" },
    );
    await same("heartbeat_agent_task_attempt", tupleOf(attempt), { ...tupleOf(attempt), attempt_id: made.attempt });
    await same(
      "complete_agent_task_attempt",
      { ...tupleOf(attempt), outcome: "failed", summary: "" },
      { ...tupleOf(attempt), attempt_id: made.attempt, outcome: "failed", summary: "" },
    );
    await same("reconcile_agent_task_attempt", tupleOf(attempt), { ...tupleOf(attempt), attempt_id: made.attempt });
    await same("start_agent_task_endpoint_continuation", { attempt_ref: attempt["attempt_ref"] }, { attempt_ref: "~t999999" });
    await same("wait_for_agent_events", { agent_id: workerAgent["agent_id"], wait_ms: 0 }, { agent_id: made.agent, wait_ms: 0 });
    await same(
      "wait_for_agent_events",
      { agent_continuation_ref: workerAgent["agent_continuation_ref"], wait_ms: 0 },
      { agent_continuation_ref: "~a999999", wait_ms: 0 },
    );
    await same(
      "wait_for_agent_events",
      { agent_id: leadAgent["agent_id"], after_cursor: leadCursor, wait_ms: 0 },
      { agent_id: made.agent, after_cursor: leadCursor, wait_ms: 0 },
    );
    await same(
      "rotate_agent_continuation_endpoint",
      { agent_id: workerAgent["agent_id"], endpoint_id: workerAgent["endpoint_id"], expected_controller_generation: 1 },
      { agent_id: made.agent, endpoint_id: workerAgent["endpoint_id"], expected_controller_generation: 1 },
    );
    await same(
      "create_agent_task",
      { project: leadProject, title: "t", instructions: "", assignee_agent_id: workerAgent["agent_id"], idempotency_key: "m1" },
      { project: "~p999999", title: "t", instructions: "", assignee_agent_id: made.agent, idempotency_key: "m1" },
    );
    await same(
      "edit_project_files",
      { project: leadProject, attempt_ref: attempt["attempt_ref"], changes: [{ kind: "create", path: "m.txt", content: "" }] },
      { project: "~p999999", attempt_ref: "~t999999", changes: [{ kind: "create", path: "m.txt", content: "" }] },
    );
    assert.deepEqual((await ok(mallory, "list_agent_tasks", {}))["tasks"], []);
    // The recovery offered for an unknown task runs unchanged.
    const unknown = await failure(mallory, "read_agent_task", { task_id: made.task });
    const listed = await followUp(mallory, unknown["follow_up"]);
    assert.deepEqual([listed.isError, listed.result["tasks"]], [false, []]);
  });

  it("rotation: the old ~a ref fails closed (stale_ref), the new one works, a wrong expected generation fails closed", async () => {
    const { worker } = setup();
    const oldRef = workerAgent["agent_continuation_ref"];
    const rotated = await ok(worker, "rotate_agent_continuation_endpoint", {
      agent_id: workerAgent["agent_id"],
      endpoint_id: workerAgent["endpoint_id"],
      expected_controller_generation: 1,
    });
    assert.equal(rotated["controller_generation"], 2);
    assert.notEqual(rotated["agent_continuation_ref"], oldRef);
    const stale = await failure(worker, "wait_for_agent_events", { agent_continuation_ref: oldRef, wait_ms: 0 });
    assert.deepEqual([stale["reason_code"], stale["detail_code"]], ["stale_ref", "endpoint_generation_changed"]);
    const fresh = await ok(worker, "wait_for_agent_events", { agent_continuation_ref: rotated["agent_continuation_ref"], wait_ms: 0 });
    assert.equal(fresh["wait_state"], "ready");
    const wrong = await failure(worker, "rotate_agent_continuation_endpoint", {
      agent_id: workerAgent["agent_id"],
      endpoint_id: workerAgent["endpoint_id"],
      expected_controller_generation: 1,
    });
    assert.deepEqual([wrong["reason_code"], wrong["detail_code"]], ["fence_rejected", "controller_generation_mismatch"]);
  });
  it("storage fence: a first-Attempt call admitted before the takeover reaches the Runner late and writes and runs nothing, also after a Runner restart", async () => {
    const { lead, worker, projectDir } = setup();
    const { taskId, first } = await taskWithFirstWrite("storage", 1000, "fenced.txt");
    // The first Attempt's call has passed the gateway's admission (its fence was current then);
    // the lease lapses and the second Attempt takes over and writes before that call arrives.
    const second = await takeover("storage", taskId, 10_000);
    assert.ok(Number(second["attempt_fence"]) > Number(first["attempt_fence"]));
    const revision = String(
      ((await ok(worker, "read_files", { project: workerProject, files: [{ path: "fenced.txt" }] }))["items"] as Array<Record<string, unknown>>)[0]?.[
        "read_revision"
      ],
    );
    await ok(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: second["attempt_ref"],
      changes: [
        {
          kind: "edit",
          path: "fenced.txt",
          expected_read_revision: revision,
          edits: [{ replace_exact: { old_text: "first attempt", new_text: "second attempt" } }],
        },
      ],
    });
    const current = String(
      ((await ok(worker, "read_files", { project: workerProject, files: [{ path: "fenced.txt" }] }))["items"] as Array<Record<string, unknown>>)[0]?.[
        "read_revision"
      ],
    );
    const late = { taskId, fence: BigInt(Number(first["attempt_fence"])) };

    const refusedLate = async (label: string) => {
      const edit = await setup().lateDispatch(
        workerProject,
        "edit_project_files",
        {
          changes: [
            { kind: "delete", path: "fenced.txt", expected_read_revision: current },
            { kind: "create", path: "late.txt", content: "late" },
          ],
        },
        late,
      );
      assert.ok(edit.failure, `${label}: refused: ${edit.resultJson}`);
      assert.deepEqual(
        [edit.failure.reasonCode, edit.failure.failureStage, edit.failure.detailCode, edit.failure.stateChanged],
        ["fence_stale", "authorization", "attempt_superseded", false],
        label,
      );
      const extra = JSON.parse(edit.failure.evidenceJson) as { evidence: unknown; follow_up: unknown };
      assert.deepEqual(extra.evidence, { attempt_fence: Number(first["attempt_fence"]), current_fence: Number(second["attempt_fence"]) }, label);
      // Its follow-up, executed exactly as returned, reads the Task under the second fence.
      const next = await followUp(setup().worker, extra.follow_up);
      assert.deepEqual([next.isError, (next.result["current_attempt"] as Record<string, unknown>)["attempt_fence"]], [false, second["attempt_fence"]], label);
      const run = await setup().lateDispatch(workerProject, "run_shell", { command: "echo ran > late-ran.txt" }, late);
      assert.equal(run.failure?.reasonCode, "fence_stale", `${label}: ${run.resultJson}`);
      assert.equal(readFileSync(join(projectDir, "fenced.txt"), "utf8"), "second attempt\n", `${label}: exactly what the second attempt wrote`);
      assert.throws(() => readFileSync(join(projectDir, "late.txt")), label);
      assert.throws(() => readFileSync(join(projectDir, "late-ran.txt")), label);
    };
    await refusedLate("late call");

    // The Runner's high-water mark is durable: after a restart the late call is still refused,
    // and the second Attempt still writes.
    await setup().restartRunner();
    await refusedLate("after a Runner restart");
    await until(
      "the restarted Runner serves",
      async () => {
        const r = await call(setup().worker, "edit_project_files", {
          project: workerProject,
          attempt_ref: second["attempt_ref"],
          changes: [{ kind: "create", path: "after-restart.txt", content: "second\n" }],
        });
        if (r.isError && r.result["reason_code"] !== "runner_unavailable") assert.fail(JSON.stringify(r.result));
        return !r.isError;
      },
      30_000,
      200,
    );
    assert.equal(readFileSync(join(projectDir, "after-restart.txt"), "utf8"), "second\n");
    await ok(setup().worker, "complete_agent_task_attempt", { ...tupleOf(second), outcome: "succeeded", summary: "fenced" });
  });
  it("takeover between admission and dispatch: a first-Attempt edit and run admitted before the takeover, held until the second Attempt started (before its first call), write and run nothing", async () => {
    const { worker, projectDir, holdDir } = setup();
    const { taskId, first } = await taskWithFirstWrite("held", 4000, "held.txt");
    const revision = String(
      ((await ok(worker, "read_files", { project: workerProject, files: [{ path: "held.txt" }] }))["items"] as Array<Record<string, unknown>>)[0]?.[
        "read_revision"
      ],
    );
    // From here, an attempt_ref call the gateway admitted waits before its dispatch to the Runner.
    const hold = join(holdDir, "hold");
    const heldBefore = readdirSync(holdDir).filter((f) => f.startsWith("held-")).length;
    writeFileSync(hold, "");
    const staleEdit = call(worker, "edit_project_files", {
      project: workerProject,
      attempt_ref: first["attempt_ref"],
      changes: [
        { kind: "delete", path: "held.txt", expected_read_revision: revision },
        { kind: "create", path: "held-late.txt", content: "late\n" },
      ],
    });
    const staleRun = call(worker, "run_shell", { project: workerProject, attempt_ref: first["attempt_ref"], command: "echo ran > held-ran.txt" });
    try {
      await until(
        "both stale calls admitted by the gateway and held",
        async () => readdirSync(holdDir).filter((f) => f.startsWith("held-")).length >= heldBefore + 2,
        20_000,
        20,
      );
      // The first lease lapses; the second Attempt takes over. Its start returns only once the
      // Runner knows its fence; it has made no Runner call yet.
      const second = await takeover("held", taskId, 20_000);
      assert.ok(Number(second["attempt_fence"]) > Number(first["attempt_fence"]));
      rmSync(hold);
      for (const [label, stale] of [
        ["edit", await staleEdit],
        ["run", await staleRun],
      ] as const) {
        assert.equal(stale.isError, true, `${label}: ${JSON.stringify(stale.result)}`);
        assert.deepEqual(
          [stale.result["reason_code"], stale.result["failure_stage"], stale.result["detail_code"], stale.result["state_changed"]],
          ["fence_stale", "authorization", "attempt_superseded", false],
          `${label}: ${JSON.stringify(stale.result)}`,
        );
        assert.deepEqual(stale.result["evidence"], { attempt_fence: Number(first["attempt_fence"]), current_fence: Number(second["attempt_fence"]) }, label);
      }
      assert.equal(readFileSync(join(projectDir, "held.txt"), "utf8"), "first attempt\n", "the stale delete wrote nothing");
      assert.throws(() => readFileSync(join(projectDir, "held-late.txt")), "the stale create wrote nothing");
      assert.throws(() => readFileSync(join(projectDir, "held-ran.txt")), "the stale run ran nothing");
      // The second Attempt works.
      await ok(worker, "edit_project_files", {
        project: workerProject,
        attempt_ref: second["attempt_ref"],
        changes: [{ kind: "create", path: "held-second.txt", content: "second\n" }],
      });
      assert.equal(readFileSync(join(projectDir, "held-second.txt"), "utf8"), "second\n");
      await ok(worker, "complete_agent_task_attempt", { ...tupleOf(second), outcome: "succeeded", summary: "held" });
    } finally {
      rmSync(hold, { force: true });
      await Promise.allSettled([staleEdit, staleRun]);
    }
  });

  it("100 concurrent starts give one live Attempt; its key replays it exactly across a ref-resolver restart; a lost fence counter never repeats a fence", async () => {
    const { lead, worker } = setup();
    const created = await ok(lead, "create_agent_task", {
      project: leadProject,
      title: "Race",
      instructions: "Only one starts",
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: `t-race-${Date.now()}`,
    });
    const taskId = String(created["task_id"]);
    const startOn = (task: string, client: Client, key: string, leaseMs: number) =>
      callTool(client, "call_runtime_tool", {
        tool: "start_agent_task_attempt",
        arguments: { task_id: task, assignee_agent_id: workerAgent["agent_id"], idempotency_key: key, lease_ms: leaseMs },
      });
    // A lease long enough that none lapses during the burst: every other start meets the live one.
    const start = (client: Client, key: string) => startOn(taskId, client, key, 600_000);
    const starts = await Promise.all(Array.from({ length: 100 }, (_, i) => start(worker, `race-${i}`)));
    const winners = starts.filter((r) => !r.isError);
    assert.equal(winners.length, 1, JSON.stringify(starts.filter((r) => r.isError && r.result["reason_code"] !== "lease_held").map((r) => r.result)));
    assert.deepEqual(
      starts.filter((r) => r.isError && r.result["reason_code"] !== "lease_held").map((r) => r.result),
      [],
      "every other start met the live lease",
    );
    const winner = (winners[0] as ToolOutcome).result;
    const winnerKey = `race-${starts.indexOf(winners[0] as ToolOutcome)}`;
    const read = await ok(lead, "read_agent_task", { task_id: taskId });
    assert.deepEqual(
      [(read["current_attempt"] as Record<string, unknown>)["attempt_id"], (read["current_attempt"] as Record<string, unknown>)["state"]],
      [winner["attempt_id"], "live"],
    );

    // The same key, after the ref-resolver restarted, returns the first result exactly.
    await setup().restartRefResolver();
    const replay = await until(
      "the ref-resolver answers again",
      async () => {
        const r = await start(setup().worker, winnerKey);
        if (r.isError && !["dependency_unavailable", "internal"].includes(String(r.result["reason_code"]))) assert.fail(JSON.stringify(r.result));
        return r.isError ? undefined : r.result;
      },
      30_000,
      200,
    );
    assert.deepEqual(replay, winner, "same ids, fence, ref and lease expiry");

    await ok(setup().worker, "complete_agent_task_attempt", { ...tupleOf(winner), outcome: "succeeded", summary: "raced" });

    // Fences only rise, also when every counter is lost (a Task whose Attempts lapse quickly).
    const other = await ok(setup().lead, "create_agent_task", {
      project: leadProject,
      title: "Fences",
      instructions: "",
      assignee_agent_id: workerAgent["agent_id"],
      requester_agent_id: leadAgent["agent_id"],
      idempotency_key: `t-fences-${Date.now()}`,
    });
    const first = await ok(setup().worker, "start_agent_task_attempt", {
      task_id: other["task_id"],
      assignee_agent_id: workerAgent["agent_id"],
      idempotency_key: "fences-first",
      lease_ms: 1000,
    });
    const takeOver = async (key: string, leaseMs: number) =>
      until(
        `a takeover (${key})`,
        async () => {
          const r = await startOn(String(other["task_id"]), setup().worker, key, leaseMs);
          if (r.isError && !["lease_held", "dependency_unavailable", "internal"].includes(String(r.result["reason_code"])))
            assert.fail(JSON.stringify(r.result));
          return r.isError ? undefined : r.result;
        },
        30_000,
        200,
      );
    const afterRestart = await takeOver("fences-second", 1000);
    assert.ok(Number(afterRestart["attempt_fence"]) > Number(first["attempt_fence"]));
    await setup().loseFenceCounters();
    const afterLoss = await takeOver("fences-after-counter-loss", 600_000);
    assert.ok(
      Number(afterLoss["attempt_fence"]) > Number(afterRestart["attempt_fence"]),
      `${String(afterLoss["attempt_fence"])} > ${String(afterRestart["attempt_fence"])}`,
    );
    await ok(setup().worker, "complete_agent_task_attempt", { ...tupleOf(afterLoss), outcome: "succeeded", summary: "fenced" });
  });
}

describe("agents on webcodex dev (two principals of one tenant, one of another)", { timeout: 240_000 }, () => {
  let server: DevServer;
  let clients: Clients;
  before(async () => {
    const projectDir = createProjectDir({ "README.md": "# agents\n" }, { name: "agents" });
    const dataDir = tempDir("wcx-agents-data-");
    const tokens = tokensFile();
    const holdDir = tempDir("wcx-agents-hold-");
    const env = { WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD: holdDir };
    const connectAll = async () => {
      const [lead, worker, mallory] = await Promise.all([
        connectMcp(server.mcpUrl, TOKENS.lead),
        connectMcp(server.mcpUrl, TOKENS.worker),
        connectMcp(server.mcpUrl, TOKENS.mallory),
      ]);
      return { lead, worker, mallory };
    };
    server = await startDevServer({ projectDir, dataDir, tokensFile: tokens, env, cli: hookedCliPath });
    clients = {
      ...(await connectAll()),
      projectDir,
      holdDir,
      // The embedded Runner runs inside the dev process; the late call is delivered to a Runner
      // built as `webcodex dev` builds it, on the same workspace and state directory.
      async lateDispatch(_project, tool, args, attempt) {
        const states = join(dataDir, "runner-state");
        const [only] = readdirSync(states);
        const runner = createRunner({
          root: projectDir,
          stateDir: join(states, String(only)),
          logger: createLogger({ service: "test", level: "silent" }),
          spawnHost: false,
          recoverJournal: false,
        });
        try {
          return await createInProcessClient(RunnerService, runner.service).execute({
            callId: `late-${Date.now()}`,
            tool,
            argumentsJson: JSON.stringify(args),
            attempt,
          });
        } finally {
          await runner.close();
        }
      },
      // The embedded Runner, ref-resolver and fence counter (in memory) live in the dev process.
      restartRunner: restartDev,
      restartRefResolver: restartDev,
      loseFenceCounters: restartDev,
    };
    async function restartDev() {
      await Promise.all([clients.lead.close(), clients.worker.close(), clients.mallory.close()]);
      await server.stop();
      server = await startDevServer({ projectDir, dataDir, tokensFile: tokens, env, cli: hookedCliPath });
      Object.assign(clients, await connectAll());
    }
  });
  after(async () => {
    await Promise.all([clients?.lead?.close(), clients?.worker?.close(), clients?.mallory?.close()]);
    await server?.stop();
  });
  scenario(() => clients);
});

describe("agents on the distributed stack (real Postgres and Redis)", { timeout: 240_000 }, () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let clients: Clients;
  let redisServer: ChildProcess | undefined;
  let redis: ReturnType<typeof createRedis>;
  before(async () => {
    await backingServices();
    db = await createTestDatabase();
    // A private Redis: the test flushes it.
    const port = await freePort();
    redisServer = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    redis = createRedis(`redis://127.0.0.1:${port}`);
    await until("private redis", async () => (await redis.ping().catch(() => "")) === "PONG");
    const projectDir = createProjectDir({ "README.md": "# agents\n" }, { name: "agents" });
    const holdDir = tempDir("wcx-agents-hold-");
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: `redis://127.0.0.1:${port}`,
      projectDir,
      gatewayEnv: { WEBCODEX_DEV_TOKENS_FILE: tokensFile(), WEBCODEX_TEST_ATTEMPT_DISPATCH_HOLD: holdDir },
      cli: hookedCliPath,
    });
    const [lead, worker, mallory] = await Promise.all([
      connectMcp(stack.mcpUrl, TOKENS.lead),
      connectMcp(stack.mcpUrl, TOKENS.worker),
      connectMcp(stack.mcpUrl, TOKENS.mallory),
    ]);
    // The late call is made as the gateway makes it after admission: signed with the gateway's
    // service identity, straight to the broker, which dispatches it to the Runner.
    const gateway = createServiceIdentity({ service: "gateway", key: stack.serviceKey });
    const transport = (service: "ref-resolver" | "runner-broker") =>
      createConnectTransport({ baseUrl: `http://127.0.0.1:${stack.ports[service]}`, httpVersion: "2", interceptors: [gateway.clientInterceptor] });
    const resolver = createClient(RefResolverService, transport("ref-resolver"));
    const broker = createClient(RunnerBrokerService, transport("runner-broker"));
    const as = { headers: principalHeaders({ clientId: "local", subject: "worker" }) };
    const dispatch = async (selector: string, tool: string, args: Record<string, unknown>, attempt?: { taskId: string; fence: bigint }) => {
      const { project } = await resolver.resolveProject({ selector }, as);
      assert.ok(project, selector);
      // A Runner that missed heartbeats is briefly not routable (nothing runs): ask again.
      return until(
        `${tool} reaches the Runner`,
        async () => {
          const res = await broker.dispatch(
            {
              callId: `late-${Date.now()}`,
              projectCanonicalId: project.canonicalId,
              rootIdentity: project.rootIdentity,
              tool,
              argumentsJson: JSON.stringify(args),
              ...(attempt ? { attempt } : {}),
            },
            as,
          );
          return res.failure?.reasonCode === "runner_unavailable" ? undefined : res;
        },
        30_000,
        200,
      );
    };
    const restart = async (name: "runner" | "ref-resolver") => {
      const child = stack.processes.get(name);
      const exited = new Promise((r) => child?.once("exit", r));
      child?.kill("SIGTERM");
      await exited;
      await stack.restart(name);
    };
    clients = {
      lead,
      worker,
      mallory,
      projectDir,
      holdDir,
      lateDispatch: (project, tool, args, attempt) => dispatch(project, tool, args, attempt),
      restartRefResolver: () => restart("ref-resolver"),
      async loseFenceCounters() {
        await redis.flushall();
      },
      async restartRunner() {
        await restart("runner");
        const project = await firstProjectRef(lead);
        assert.equal((await dispatch(project, "read_files", { files: [{ path: "README.md" }] })).failure, undefined, "the restarted Runner serves");
      },
    };
  });
  after(async () => {
    await Promise.all([clients?.lead.close(), clients?.worker.close(), clients?.mallory.close()]);
    await stack?.stop();
    await db?.drop();
    redis?.disconnect();
    redisServer?.kill("SIGTERM");
  });
  scenario(() => clients);
});
