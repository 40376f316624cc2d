/**
 * The checks and bookkeeping the agent tools share: per-key serialization in this process,
 * the caller's Agent and Task (access), keyed replay (idempotency), and the Attempt checks
 * every use of an Attempt re-runs, by tuple or by attempt_ref (owner, lifecycle, lease, fence,
 * controller generation).
 */

import { createHash } from "node:crypto";
import { ToolFailureError } from "@webcodex/contracts";
import type { ToolInput } from "@webcodex/contracts";
import type { Principal, Queryable } from "@webcodex/platform";
import { agentContinuationRefTable, issuePinnedRef } from "../refs/issue-ref.js";
import { formatRef, parseRef, RefKind } from "../refs/ref-codes.js";
import { isAttemptId } from "./agent-model.js";
import { AGENT_ID, TASK_ID, canSeeTask, fenceStale, invalid, iso, notFound, ownedBy, schema, stableJson } from "./agent-rows.js";
import type { AgentRow, AttemptRow, TaskRow } from "./agent-rows.js";

export type AgentAccess = ReturnType<typeof createAgentAccess>;

/** An Attempt named by its explicit tuple (the fields every Attempt tool takes alike). */
export type AttemptTuple = Pick<
  ToolInput<"heartbeat_agent_task_attempt">,
  "task_id" | "attempt_id" | "assignee_agent_id" | "attempt_fence" | "attempt_controller_generation"
>;

export function createAgentAccess() {
  const startQueues = new Map<string, Promise<unknown>>();
  /** Runs `fn` after every earlier call queued under `key` in this process has finished. */
  function oneAtATime<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prior = startQueues.get(key) ?? Promise.resolve();
    const next = prior.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    startQueues.set(key, settled);
    void settled.then(() => {
      if (startQueues.get(key) === settled) startQueues.delete(key);
    });
    return next;
  }

  const taskSelect = `SELECT t.*, a.subject AS assignee_subject FROM ${schema}.agent_tasks t JOIN ${schema}.agents a ON a.agent_id = t.assignee_agent_id`;
  const attemptSelect = `SELECT at.*, (at.lease_expires_at > now()) AS lease_live FROM ${schema}.agent_task_attempts at`;

  async function agentOf(q: Queryable, principal: Principal, agentId: string): Promise<AgentRow> {
    if (!AGENT_ID.test(agentId)) throw new ToolFailureError(notFound("agent"));
    const r = await q.query<AgentRow>(
      `SELECT a.*, e.controller_generation FROM ${schema}.agents a
       JOIN ${schema}.agent_endpoints e ON e.client_id = a.client_id AND e.subject = a.subject AND e.agent_id = a.agent_id AND e.endpoint_id = a.endpoint_id
       WHERE a.agent_id = $1`,
      [agentId],
    );
    const row = r.rows[0];
    if (!row || !ownedBy(row, principal)) throw new ToolFailureError(notFound("agent"));
    return row;
  }

  async function taskFor(q: Queryable, principal: Principal, taskId: string, lock = false): Promise<TaskRow> {
    if (!TASK_ID.test(taskId)) throw new ToolFailureError(notFound("task", true));
    const r = await q.query<TaskRow>(`${taskSelect} WHERE t.task_id = $1${lock ? " FOR UPDATE OF t" : ""}`, [taskId]);
    const row = r.rows[0];
    if (!row || !canSeeTask(row, principal)) throw new ToolFailureError(notFound("task", true));
    return row;
  }

  /** Keyed replay: the stored first result, or undefined; a key reused for another request fails. */
  async function replayed(tx: Queryable, principal: Principal, tool: string, key: string, digest: string): Promise<Record<string, unknown> | undefined> {
    const r = await tx.query<{ request_digest: string; result_json: string }>(
      `SELECT request_digest, result_json FROM ${schema}.agent_replays WHERE client_id = $1 AND subject = $2 AND tool = $3 AND idempotency_key = $4`,
      [principal.clientId, principal.subject, tool, key],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    if (row.request_digest !== digest)
      throw new ToolFailureError(invalid("idempotency_key_reused", "idempotency_key", "This idempotency_key was used for a different request."));
    return JSON.parse(row.result_json) as Record<string, unknown>;
  }

  async function remember(tx: Queryable, principal: Principal, tool: string, key: string, digest: string, result: Record<string, unknown>): Promise<void> {
    await tx.query(
      `INSERT INTO ${schema}.agent_replays (client_id, subject, tool, idempotency_key, request_digest, result_json) VALUES ($1, $2, $3, $4, $5, $6)`,
      [principal.clientId, principal.subject, tool, key, digest, JSON.stringify(result)],
    );
  }

  const digestOf = (tool: string, args: Record<string, unknown>) =>
    createHash("sha256")
      .update(`${tool}\u0000${stableJson(args)}`)
      .digest("hex");

  /** Serializes keyed calls of one principal and key (the replay row is written at the end). */
  const keyLock = (tx: Queryable, principal: Principal, tool: string, key: string) =>
    tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [JSON.stringify(["refs.agent_replay", principal.clientId, principal.subject, tool, key])]);

  /**
   * The checks every use of an Attempt re-runs, by tuple or by ref: owner, lifecycle, lease,
   * fence and controller generation. The Task row is locked when `lock` (mutations).
   */
  async function checkAttempt(
    tx: Queryable,
    principal: Principal,
    attemptId: string,
    expect: { taskId?: string; assigneeAgentId?: string; fence?: number; generation?: number },
    lock: boolean,
  ): Promise<{ task: TaskRow; attempt: AttemptRow }> {
    if (!isAttemptId(attemptId)) throw new ToolFailureError(notFound("attempt"));
    // One statement: the Attempt, its Task (locked for mutations), both Agents and the
    // assignee's current controller generation. Every change of an Attempt's state also
    // changes its Task row (fence, state), so a caller that waited for the Task lock sees it.
    const r = await tx.query<TaskRow & { attempt: AttemptRow; agent_generation: string }>(
      `SELECT t.*, ta.subject AS assignee_subject, e.controller_generation AS agent_generation,
              json_build_object('attempt_id', at.attempt_id, 'task_id', at.task_id, 'client_id', at.client_id, 'subject', at.subject,
                'assignee_agent_id', at.assignee_agent_id, 'attempt_fence', at.attempt_fence, 'controller_generation', at.controller_generation,
                'state', at.state, 'lease_ms', at.lease_ms, 'lease_expires_at', at.lease_expires_at, 'lease_live', at.lease_expires_at > now(), 'summary', at.summary) AS attempt
       FROM ${schema}.agent_task_attempts at
       JOIN ${schema}.agent_tasks t ON t.task_id = at.task_id
       JOIN ${schema}.agents ta ON ta.agent_id = t.assignee_agent_id
       JOIN ${schema}.agents aa ON aa.agent_id = at.assignee_agent_id
       JOIN ${schema}.agent_endpoints e ON e.client_id = aa.client_id AND e.subject = aa.subject AND e.agent_id = aa.agent_id AND e.endpoint_id = aa.endpoint_id
       WHERE at.attempt_id = $1${lock ? " FOR UPDATE OF t" : ""}`,
      [attemptId],
    );
    const task = r.rows[0];
    const attempt = task?.attempt;
    if (!task || !attempt || !ownedBy(attempt, principal) || !canSeeTask(task, principal)) throw new ToolFailureError(notFound("attempt"));
    const agent = { controller_generation: task.agent_generation };
    const fence = Number(attempt.attempt_fence);
    const evidence = { attempt_fence: fence, current_fence: Number(task.current_fence) };
    if (
      (expect.taskId !== undefined && expect.taskId !== attempt.task_id) ||
      (expect.assigneeAgentId !== undefined && expect.assigneeAgentId !== attempt.assignee_agent_id)
    ) {
      throw new ToolFailureError(fenceStale("attempt_tuple_mismatch", task.task_id, evidence));
    }
    if (expect.fence !== undefined && expect.fence !== fence) throw new ToolFailureError(fenceStale("attempt_tuple_mismatch", task.task_id, evidence));
    if (expect.generation !== undefined && expect.generation !== Number(attempt.controller_generation))
      throw new ToolFailureError(fenceStale("attempt_tuple_mismatch", task.task_id, evidence));
    if (Number(task.current_fence) !== fence) throw new ToolFailureError(fenceStale("attempt_superseded", task.task_id, evidence));
    if (task.state !== "in_progress") throw new ToolFailureError(fenceStale(`task_${task.state}`, task.task_id, evidence));
    if (attempt.state !== "live") throw new ToolFailureError(fenceStale(`attempt_${attempt.state}`, task.task_id, evidence));
    if (Number(agent.controller_generation) !== Number(attempt.controller_generation))
      throw new ToolFailureError(fenceStale("controller_generation_changed", task.task_id, evidence));
    if (!attempt.lease_live)
      throw new ToolFailureError(fenceStale("lease_expired", task.task_id, { ...evidence, lease_expires_at: iso(attempt.lease_expires_at) }));
    return { task, attempt };
  }

  /** Expands an attempt_ref to its stored tuple, then runs checkAttempt on exactly that tuple. */
  async function checkAttemptRef(tx: Queryable, principal: Principal, ref: string, lock: boolean) {
    const code = parseRef(RefKind.attempt, ref);
    if (code === undefined) throw new ToolFailureError(notFound("attempt_ref"));
    const r = await tx.query<{ task_id: string; attempt_id: string; assignee_agent_id: string; attempt_fence: string; controller_generation: string }>(
      `SELECT task_id, attempt_id, assignee_agent_id, attempt_fence, controller_generation FROM ${schema}.attempt_refs WHERE client_id = $1 AND subject = $2 AND code = $3`,
      [principal.clientId, principal.subject, code],
    );
    const pin = r.rows[0];
    if (!pin) throw new ToolFailureError(notFound("attempt_ref"));
    return checkAttempt(
      tx,
      principal,
      pin.attempt_id,
      { taskId: pin.task_id, assigneeAgentId: pin.assignee_agent_id, fence: Number(pin.attempt_fence), generation: Number(pin.controller_generation) },
      lock,
    );
  }

  /** The Attempt an explicit tuple names, as checkAttempt expects it. */
  const tupleOf = (args: AttemptTuple) => ({
    taskId: args.task_id,
    assigneeAgentId: args.assignee_agent_id,
    fence: args.attempt_fence,
    generation: args.attempt_controller_generation,
  });

  const recipientsOf = (t: TaskRow) => [t.assignee_agent_id, t.requester_agent_id];

  async function continuationRefFor(tx: Queryable, principal: Principal, agentId: string, endpointId: string, generation: number): Promise<string> {
    return formatRef(RefKind.agentContinuation, await issuePinnedRef(tx, schema, agentContinuationRefTable, principal, [agentId, endpointId, generation]));
  }

  return {
    oneAtATime,
    taskSelect,
    attemptSelect,
    agentOf,
    taskFor,
    replayed,
    remember,
    digestOf,
    keyLock,
    checkAttempt,
    checkAttemptRef,
    tupleOf,
    recipientsOf,
    continuationRefFor,
  };
}
