/**
 * Processes and Jobs end to end in distributed mode (six processes, HTTP/2, real Postgres and
 * Redis) through the official MCP SDK client: MCP cancellation stops the process, a process
 * ignoring SIGTERM is killed at its timeout, pending Jobs are followed to their result, 20
 * concurrent Jobs finish correctly, a Host waiting with a progressToken gets progress, and a
 * Runner killed mid-Job yields lost_after_reconcile + outcome_unknown once it is back.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { DistributedStack } from "@webcodex/cli";
import {
  backingServices,
  callTool,
  connectMcp,
  createProjectDir,
  createTestDatabase,
  executeFollowUp,
  firstProjectRef,
  followUpTargetTool,
  hostPids,
  killAll,
  sleepTag,
  startTestStack,
  until,
} from "../support/index.js";
import type { FollowUpCall, TestDatabase, ToolOutcome } from "../support/index.js";

const token = `t-${randomBytes(16).toString("hex")}`;

describe("Jobs end to end in distributed mode through a real MCP client", () => {
  let db: TestDatabase;
  let stack: DistributedStack;
  let client: Client;
  let project: string;
  let projectDir: string;
  const leftovers: number[] = [];

  before(async () => {
    const services = await backingServices();
    db = await createTestDatabase();
    projectDir = createProjectDir({ "README.md": "# jobs\n" }, { name: "jobs" });
    stack = await startTestStack({
      postgresUrl: db.url,
      redisUrl: services.redisUrl,
      projectDir,
      // 20 sandboxed Jobs start at once here: 1 s heartbeats (lost after 2 s) keep a Runner busy
      // starting them from being taken for lost on a loaded machine.
      heartbeatIntervalMs: 1000,
      gatewayEnv: { WEBCODEX_DEV_TOKEN: token },
      extraEnv: { WEBCODEX_PROJECT_CONCURRENCY: "32", WEBCODEX_JOB_RECONCILE_INTERVAL_MS: "1000" },
    });
    client = await connectMcp(stack.mcpUrl, token);
    project = await firstProjectRef(client);
  });
  after(async () => {
    killAll(leftovers);
    await client?.close();
    await stack?.stop();
    await db?.drop();
  });

  const follow = async (first: ToolOutcome) => {
    const f = first.result["follow_up"] as FollowUpCall;
    assert.equal(f.follow_up_kind, "mechanically_followable");
    let next = await executeFollowUp(client, f);
    while (next.result["execution_state"] === "pending") next = await executeFollowUp(client, next.result["follow_up"]);
    return next;
  };

  it("MCP cancellation of a running run_shell stops its process group: no orphan", async () => {
    const controller = new AbortController();
    // A Job runs in a pid namespace of its own: its processes are found on the host by a tag.
    const tag = sleepTag();
    const call = client.callTool({ name: "run_shell", arguments: { project, command: `sleep ${tag}`, wait_ms: 25_000 } }, undefined, {
      signal: controller.signal,
    });
    await until("the Job's process to run", () => hostPids(tag).length > 0, 10_000);
    leftovers.push(...hostPids(tag));
    const cancelledAt = Date.now();
    controller.abort("the user changed their mind");
    await assert.rejects(call);
    await until("the cancelled Job's processes are gone", () => hostPids(tag).length === 0, 5_000);
    assert.ok(Date.now() - cancelledAt < 5_000);
  });

  it("a process that ignores SIGTERM still ends at its timeout with its sandbox, with no orphan left", async () => {
    const started = Date.now();
    const tag = sleepTag();
    const { isError, result } = await callTool(client, "run_shell", {
      project,
      command: `trap '' TERM; sleep ${tag}`,
      timeout_ms: 1_000,
      wait_ms: 20_000,
    });
    leftovers.push(...hostPids(tag));
    assert.equal(isError, false, JSON.stringify(result));
    assert.equal(result["timed_out"], true);
    // The Job ignores SIGTERM, but its sandbox does not: the sandbox's first process ends on it,
    // and the kernel ends every process in the Job's pid namespace with it.
    assert.equal(result["signal"], "SIGTERM", "the sandbox ends on SIGTERM, taking the Job that ignores it along");
    assert.ok(Date.now() - started < 10_000);
    assert.deepEqual(hostPids(tag), [], "neither the shell nor its sleep survives");
  });

  it("sleep 3 with wait_ms 200 is pending; the follow-up executed unchanged yields the output, and replays it", async () => {
    const first = await callTool(client, "run_shell", { project, command: "sleep 3; echo done", wait_ms: 200 });
    assert.equal(first.result["execution_state"], "pending");
    const next = await follow(first);
    assert.equal(next.result["output"], "done\n");
    const replay = await executeFollowUp(client, first.result["follow_up"]);
    assert.deepEqual(replay.result, next.result, "keyed replay returns the same terminal result");
  });

  it("20 concurrent pending Jobs in one project all reach their correct terminal state", async () => {
    const started = await Promise.all(
      Array.from({ length: 20 }, (_, i) => callTool(client, "run_shell", { project, command: `sleep 1; echo job-${i}; exit ${i % 3}`, wait_ms: 200 })),
    );
    started.forEach((s, i) => assert.equal(s.result["execution_state"], "pending", `job ${i}: ${JSON.stringify(s.result)}`));
    const ids = started.map((s) => String(s.result["job_id"]));
    assert.equal(new Set(ids).size, 20);
    const observed = await callTool(client, "call_runtime_tool", { tool: "observe_jobs", arguments: { project, job_ids: ids } });
    assert.deepEqual(
      (observed.result["jobs"] as Array<Record<string, unknown>>).map((j) => j["job_id"]),
      ids,
      "one call, request order",
    );
    const done = await Promise.all(started.map(follow));
    done.forEach((d, i) => {
      assert.equal(d.result["output"], `job-${i}\n`, JSON.stringify(d.result));
      assert.equal(d.result["exit_code"], i % 3);
    });
  });

  it("a Host waiting with a progressToken receives progress notifications", async () => {
    const first = await callTool(client, "run_shell", { project, command: "sleep 3; echo waited", wait_ms: 100 });
    assert.equal(first.result["execution_state"], "pending");
    const progress: number[] = [];
    const res = await client.callTool(
      { name: "call_runtime_tool", arguments: { tool: "wait_for_job_terminal", arguments: { project, job_id: first.result["job_id"], wait_ms: 10_000 } } },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    );
    assert.equal((res.structuredContent as Record<string, unknown>)["output"], "waited\n");
    assert.ok(progress.length >= 1, "at least one progress notification while waiting");
  });

  it("get_runtime_status is sparse by default (the broker's canonical counts, no rows, capabilities or timestamps); compact: false adds diagnostics", async () => {
    const first = await callTool(client, "run_shell", { project, command: "sleep 2", wait_ms: 100 });
    assert.equal(first.result["execution_state"], "pending");
    const sparse = await callTool(client, "get_runtime_status", {});
    assert.equal(sparse.isError, false, JSON.stringify(sparse.result));
    assert.deepEqual(sparse.result["runners"], { total: 1, connected: 1, lost: 0, standby: 0 });
    assert.deepEqual(sparse.result["projects"], { total: 1, routable: 1 });
    const jobs = sparse.result["jobs"] as Record<string, number>;
    assert.ok(jobs["active"]! >= 1 && jobs["running"]! >= 1, JSON.stringify(jobs));
    assert.deepEqual(sparse.result["connection_states"], { connected: 1 });
    assert.equal((sparse.result["protocol"] as Record<string, unknown>)["aligned"], true);
    assert.equal((sparse.result["build"] as Record<string, unknown>)["aligned"], true);
    const text = JSON.stringify(sparse.result);
    for (const absent of ["runner_details", "capabilities", "last_heartbeat", "fence", "catalog_version"]) assert.equal(text.includes(absent), false, absent);
    assert.deepEqual((await callTool(client, "get_runtime_status", { summary_only: true })).result, sparse.result, "summary_only is the same sparse status");

    const full = await callTool(client, "get_runtime_status", { compact: false });
    const rows = full.result["runner_details"] as Array<Record<string, unknown>>;
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.["lease_held"], true);
    assert.ok(Number(rows[0]?.["fence"]) > 0);
    const capabilities = rows[0]?.["capabilities"] as string[];
    for (const c of ["apply_text_edit_expected_match_count", "fenced_execution_v1"]) assert.ok(capabilities.includes(c), JSON.stringify(capabilities));
    assert.deepEqual(full.result["runners"], sparse.result["runners"], "both modes count the same way");
    await follow(first);
  });

  it("a Runner killed mid-Job and restarted: the Job is lost_after_reconcile with outcome_unknown, never re-run", async () => {
    const tag = sleepTag();
    const first = await callTool(client, "run_shell", { project, command: `echo run >> runs.log; sleep ${tag}`, wait_ms: 200 });
    assert.equal(first.result["execution_state"], "pending");
    const jobId = String(first.result["job_id"]);
    await until("the Job's process to run", () => hostPids(tag).length > 0, 10_000);
    leftovers.push(...hostPids(tag));
    const runner = stack.processes.get("runner");
    runner?.kill("SIGKILL");
    await new Promise((r) => runner?.once("exit", r));
    await stack.restart("runner");
    const lost = await until(
      "the Job is reconciled",
      async () => {
        const r = await executeFollowUp(client, first.result["follow_up"]);
        return r.result["execution_state"] === "pending" ? undefined : r;
      },
      20_000,
    );
    assert.equal(lost.isError, false, JSON.stringify(lost.result));
    assert.equal(lost.result["execution_state"], "lost_after_reconcile", JSON.stringify(lost.result));
    assert.equal(lost.result["outcome_unknown"], true);
    const inspect = lost.result["follow_up"] as FollowUpCall;
    assert.deepEqual([inspect.follow_up_kind, followUpTargetTool(inspect)], ["fallback_recovery", "read_workspace_changes"], "inspect, never re-run");
    const changes = await executeFollowUp(client, inspect);
    assert.equal(changes.isError, false, JSON.stringify(changes.result));
    const observed = await callTool(client, "call_runtime_tool", { tool: "observe_jobs", arguments: { project, job_ids: [jobId] } });
    const job = (observed.result["jobs"] as Array<Record<string, unknown>>)[0];
    assert.deepEqual([job?.["state"], job?.["outcome_unknown"]], ["lost_after_reconcile", true]);
    assert.equal(readFileSync(join(projectDir, "runs.log"), "utf8"), "run\n", "reconciliation never re-runs the Job");
    const status = await callTool(client, "get_runtime_status", {});
    assert.equal((status.result["jobs"] as Record<string, number>)["lost_after_reconcile"], 1, "counted once, by the broker's counting path");
  });
});
