/**
 * Agents, Tasks, fenced Attempts and per-Agent event logs: the durable side of the agent
 * tools. Each tool takes its canonical arguments (validated by the gateway against the tool's
 * registered schema) and returns its canonical result, or throws a ToolFailureError.
 *
 * Who sees what (all within one tenant, i.e. one client id; the principal is compared whole):
 * - an Agent is owned by the principal that created it; any principal of its tenant may name
 *   it as a Task's assignee, only its owner can start Attempts for it or read its events;
 * - a Task is visible to its creator and to the owner of its assignee Agent;
 * - an Attempt, its tuple and its attempt_ref belong to the principal that started it.
 * Anything else (another tenant, another principal) fails exactly like an id never issued.
 *
 * Fences: a new Attempt takes a fence from the Task's counter ratcheted from the Task's
 * recorded high-water mark, and records it as the new mark in the same transaction (a
 * trigger makes the Attempt's fence equal that mark). Every later check compares the caller's
 * fence to the mark: an old tuple or old attempt_ref fails closed with fence_stale.
 *
 * The rows, failures and argument readers are in agent-rows.ts; access, idempotency and the
 * Attempt checks in agent-access.ts; this file holds the event log appends and wakes and the
 * tools' handlers (Agents, Tasks, Attempts and events change in shared transactions).
 */
import {
  cursorFailure,
  decodeCursor,
  encodeCursor,
  pageFields,
  PipelineStage,
  isToolFailureError,
  ToolFailureError,
  readAgentTaskFollowUp,
  ReasonCode,
  toolFailure,
  waitForAgentEventsFollowUp,
} from "@webcodex/contracts";
import type { AgentToolName, Result } from "@webcodex/contracts";
import type { Database, Principal, Queryable } from "@webcodex/platform";
import type { ProjectStore } from "../projects/project-store.js";
import { attemptRefTable, issuePinnedRef } from "../refs/issue-ref.js";
import { formatRef, parseRef, RefKind } from "../refs/ref-codes.js";
import { continuationRefNotFound, generationMismatch, isAttemptId, isCallerId, newAttemptId, staleContinuationRef } from "./agent-model.js";
import { AGENT_EVENTS_CHANNEL } from "./event-bus.js";
import type { AgentEventBus, AppendedEvent } from "./event-bus.js";
import type { TaskFenceCounter } from "./fence-counter.js";
import type { AgentToolHandlers, AgentToolResult, WireAgentToolHandler } from "./agent-tool-handlers.js";
import { createAgentAccess } from "./agent-access.js";
import {
  AGENT_ID,
  CURSOR,
  DEFAULT_EVENT_WAIT_MS,
  DEFAULT_LEASE_MS,
  EVENTS_PAGE,
  LIST_LIMIT,
  fenceStale,
  hex,
  invalid,
  iso,
  notFound,
  num,
  ownedBy,
  schema,
  str,
} from "./agent-rows.js";
import type { AttemptRow, TaskRow } from "./agent-rows.js";

type Appended = { agentId: string; event: AppendedEvent };

/** The events a wake carried, when they continue `cursor` exactly (seq cursor+1, cursor+2, …); else undefined. */
function continuing(events: readonly AppendedEvent[] | undefined, cursor: string): readonly AppendedEvent[] | undefined {
  if (!events || events.length === 0) return undefined;
  const first = BigInt(cursor) + 1n;
  return events.every((e, i) => BigInt(e.seq) === first + BigInt(i)) ? events : undefined;
}

export interface AgentTasksDeps {
  db: Database;
  projects: ProjectStore;
  fences: TaskFenceCounter;
  bus: AgentEventBus;
}

export function createAgentTasks(deps: AgentTasksDeps) {
  const { db, projects, fences, bus } = deps;
  const {
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
  } = createAgentAccess();

  /**
   * Appends one event to each recipient's log and NOTIFYs (delivered at commit); returns the
   * appended events, to wake in-process waiters with once committed. The recipients' rows are
   * locked in id order first (a stable lock order). An event's `at` is the clock when it was
   * appended, in the transaction's last statement before its commit (not the transaction's start).
   */
  async function appendEvents(tx: Queryable, recipients: ReadonlyArray<string | null>, kind: string, taskId: string, attemptId?: string): Promise<Appended[]> {
    const agents = [...new Set(recipients.filter((a): a is string => !!a))].sort();
    await tx.query(`SELECT 1 FROM ${schema}.agents WHERE agent_id = ANY($1::text[]) ORDER BY agent_id FOR UPDATE`, [agents]);
    const r = await tx.query<{ agent_id: string; seq: string; at: Date | string }>(
      `WITH bumped AS (
         UPDATE ${schema}.agents SET last_event_seq = last_event_seq + 1 WHERE agent_id = ANY($1::text[]) RETURNING agent_id, last_event_seq
       ), added AS (
         INSERT INTO ${schema}.agent_events (agent_id, seq, kind, task_id, attempt_id, at) SELECT agent_id, last_event_seq, $2, $3, $4, clock_timestamp() FROM bumped RETURNING agent_id, seq, at
       )
       SELECT pg_notify($5, json_build_object('agent_id', agent_id, 'seq', seq::text, 'kind', $2::text, 'task_id', $3::text, 'attempt_id', $4::text, 'at', at)::text), agent_id, seq::text AS seq, at FROM added`,
      [agents, kind, taskId, attemptId ?? null, AGENT_EVENTS_CHANNEL],
    );
    return r.rows.map((row) => ({ agentId: row.agent_id, event: { seq: String(row.seq), kind, task_id: taskId, attempt_id: attemptId ?? null, at: row.at } }));
  }

  /**
   * Runs `fn` in a transaction; once committed, wakes the waiters of every Agent it appended to
   * with the events appended to that Agent's log (in append order).
   */
  async function withEvents<T>(fn: (tx: Queryable, wake: (appended: Appended[]) => void) => Promise<T>): Promise<T> {
    const woken = new Map<string, AppendedEvent[]>();
    const value = await db.transaction((tx) =>
      fn(tx, (appended) => {
        for (const a of appended) woken.set(a.agentId, [...(woken.get(a.agentId) ?? []), a.event]);
      }),
    );
    for (const [agentId, events] of woken) bus.notify(agentId, events);
    return value;
  }

  // ── the tools ──
  const tools: AgentToolHandlers = {
    async create_agent(principal, args) {
      const agentId = `wc_agent_${hex()}`,
        endpointId = `wc_ep_${hex()}`;
      return db.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${schema}.agent_endpoints (client_id, subject, agent_id, endpoint_id, controller_generation) VALUES ($1, $2, $3, $4, 1)`, [
          principal.clientId,
          principal.subject,
          agentId,
          endpointId,
        ]);
        await tx.query(`INSERT INTO ${schema}.agents (agent_id, client_id, subject, name, endpoint_id) VALUES ($1, $2, $3, $4, $5)`, [
          agentId,
          principal.clientId,
          principal.subject,
          str(args, "name"),
          endpointId,
        ]);
        const ref = await continuationRefFor(tx, principal, agentId, endpointId, 1);
        return { result: { agent_id: agentId, endpoint_id: endpointId, controller_generation: 1, agent_continuation_ref: ref } };
      });
    },

    async rotate_agent_continuation_endpoint(principal, args) {
      const agentId = str(args, "agent_id"),
        endpointId = str(args, "endpoint_id"),
        expected = num(args, "expected_controller_generation") ?? 0;
      return db.transaction(async (tx) => {
        const agent = await agentOf(tx, principal, agentId);
        if (agent.endpoint_id !== endpointId) throw new ToolFailureError(notFound("agent"));
        const r = await tx.query<{ controller_generation: string }>(
          `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 FOR UPDATE`,
          [principal.clientId, principal.subject, agentId, endpointId],
        );
        const current = Number(r.rows[0]?.controller_generation ?? 0);
        if (current !== expected) {
          throw new ToolFailureError(generationMismatch());
        }
        const next = current + 1;
        await tx.query(
          `UPDATE ${schema}.agent_endpoints SET controller_generation = $5, rotated_at = now() WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4`,
          [principal.clientId, principal.subject, agentId, endpointId, next],
        );
        const ref = await continuationRefFor(tx, principal, agentId, endpointId, next);
        return { result: { agent_id: agentId, endpoint_id: endpointId, controller_generation: next, agent_continuation_ref: ref } };
      });
    },

    async create_agent_task(principal, args) {
      const key = str(args, "idempotency_key");
      if (!isCallerId(key)) throw new ToolFailureError(invalid("invalid_idempotency_key", "idempotency_key"));
      const resolved = await projects.resolve(principal, str(args, "project"));
      if (!resolved.ok) throw new ToolFailureError(resolved.failure);
      const project = resolved.project;
      // The assignee's owner must be able to see the Project (a private Project is its owner's
      // alone): otherwise the Task would show its title, instructions and Project id to someone
      // the Project is hidden from. Checked before the transaction (the resolver has its own
      // connection use; embedded mode has one connection). Answered like an unknown Agent.
      const assigneeId = str(args, "assignee_agent_id");
      const owner = AGENT_ID.test(assigneeId)
        ? (await db.query<{ client_id: string; subject: string }>(`SELECT client_id, subject FROM ${schema}.agents WHERE agent_id = $1`, [assigneeId])).rows[0]
        : undefined;
      if (owner && owner.client_id === principal.clientId && owner.subject !== principal.subject) {
        const seen = await projects.resolve({ clientId: owner.client_id, subject: owner.subject }, project.canonicalId);
        if (!seen.ok) throw new ToolFailureError(notFound("agent"));
      }
      // The digest covers the resolved Project, so a ref and its canonical id are one request.
      const digest = digestOf("create_agent_task", { ...args, project: `${project.canonicalId}#${project.incarnation}` });
      return withEvents(async (tx, wake) => {
        await keyLock(tx, principal, "create_agent_task", key);
        const prior = await replayed(tx, principal, "create_agent_task", key, digest);
        if (prior) return { result: prior, projectCanonicalId: project.canonicalId };
        const assignee = str(args, "assignee_agent_id");
        const requester = str(args, "requester_agent_id");
        // Any Agent of the tenant may be the assignee; another tenant's is "not found".
        const a = AGENT_ID.test(assignee)
          ? (await tx.query<{ client_id: string }>(`SELECT client_id FROM ${schema}.agents WHERE agent_id = $1`, [assignee])).rows[0]
          : undefined;
        if (!a || a.client_id !== principal.clientId) throw new ToolFailureError(notFound("agent"));
        if (requester !== "") await agentOf(tx, principal, requester);
        const taskId = `wc_task_${hex()}`;
        await tx.query(
          `INSERT INTO ${schema}.agent_tasks (task_id, client_id, creator_subject, project_canonical_id, project_incarnation, title, instructions, assignee_agent_id, requester_agent_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
          [
            taskId,
            principal.clientId,
            principal.subject,
            project.canonicalId,
            project.incarnation,
            str(args, "title"),
            str(args, "instructions"),
            assignee,
            requester || null,
          ],
        );
        wake(await appendEvents(tx, [assignee, requester || null], "task_assigned", taskId));
        const result = { task_id: taskId, state: "open" };
        await remember(tx, principal, "create_agent_task", key, digest, result);
        return { result, projectCanonicalId: project.canonicalId };
      });
    },

    async list_agent_tasks(principal, args) {
      // A page, newest first; its cursor is the last row's (created_at, task_id) with the
      // filters it belongs to, so a continuation walks the rest of the same order (Tasks created
      // meanwhile come before it and are not repeated or skipped into).
      const filters = { project: args["project"], state: args["state"], assignee_agent_id: args["assignee_agent_id"] };
      const filterKey = JSON.stringify([filters.project ?? null, filters.state ?? null, filters.assignee_agent_id ?? null]);
      const limit = Math.min(typeof args["limit"] === "number" ? args["limit"] : LIST_LIMIT.default, LIST_LIMIT.ceiling);
      let after: { created: string; taskId: string } | undefined;
      if (typeof args["cursor"] === "string") {
        const payload = decodeCursor("tasks", args["cursor"]);
        const restart = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined));
        if (!Array.isArray(payload) || payload[0] !== filterKey || typeof payload[1] !== "string" || typeof payload[2] !== "string")
          throw new ToolFailureError(cursorFailure("cursor_invalid", "list_agent_tasks", restart));
        after = { created: payload[1], taskId: payload[2] };
      }
      const where = ["t.client_id = $1", "(t.creator_subject = $2 OR a.subject = $2)"];
      const params: unknown[] = [principal.clientId, principal.subject];
      let projectCanonicalId: string | undefined;
      if (filters.project !== undefined) {
        const resolved = await projects.resolve(principal, str(args, "project"));
        if (!resolved.ok) throw new ToolFailureError(resolved.failure);
        projectCanonicalId = resolved.project.canonicalId;
        params.push(resolved.project.canonicalId);
        where.push(`t.project_canonical_id = $${params.length}`);
      }
      if (filters.state !== undefined) {
        params.push(str(args, "state"));
        where.push(`t.state = $${params.length}`);
      }
      if (filters.assignee_agent_id !== undefined) {
        params.push(str(args, "assignee_agent_id"));
        where.push(`t.assignee_agent_id = $${params.length}`);
      }
      if (after) {
        params.push(after.created, after.taskId);
        const c = `$${params.length - 1}::timestamptz`;
        where.push(`(t.created_at < ${c} OR (t.created_at = ${c} AND t.task_id > $${params.length}))`);
      }
      const r = await db.query<TaskRow & { created_text: string; remaining: string }>(
        `SELECT * FROM (SELECT t.*, a.subject AS assignee_subject, t.created_at::text AS created_text, count(*) OVER () AS remaining
           FROM ${schema}.agent_tasks t JOIN ${schema}.agents a ON a.agent_id = t.assignee_agent_id
           WHERE ${where.join(" AND ")}) t ORDER BY t.created_at DESC, t.task_id LIMIT ${limit}`,
        params,
      );
      const tasks = r.rows.map((t) => ({
        task_id: t.task_id,
        title: t.title,
        state: t.state,
        project_id: t.project_canonical_id,
        assignee_agent_id: t.assignee_agent_id,
        updated_at: iso(t.updated_at),
      }));
      const last = r.rows[r.rows.length - 1];
      const omitted = last ? Number(last.remaining) - r.rows.length : 0;
      const next = last ? encodeCursor("tasks", [filterKey, last.created_text, last.task_id]) : undefined;
      return { result: { tasks, ...pageFields(omitted, next) }, ...(projectCanonicalId ? { projectCanonicalId } : {}) };
    },

    async read_agent_task(principal, args) {
      const t = await taskFor(db, principal, str(args, "task_id"));
      const current = (await db.query<AttemptRow>(`${attemptSelect} WHERE at.task_id = $1 ORDER BY at.attempt_fence DESC LIMIT 1`, [t.task_id])).rows[0];
      const result: Record<string, unknown> = {
        task_id: t.task_id,
        project_id: t.project_canonical_id,
        title: t.title,
        instructions: t.instructions,
        state: t.state,
        assignee_agent_id: t.assignee_agent_id,
        ...(t.requester_agent_id ? { requester_agent_id: t.requester_agent_id } : {}),
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
        ...(t.summary !== null ? { summary: t.summary } : {}),
        ...(t.stop_reason !== null ? { stop_reason: t.stop_reason } : {}),
      };
      if (current) {
        const lapsed = current.state === "live" && !current.lease_live;
        result["current_attempt"] = {
          attempt_id: current.attempt_id,
          attempt_fence: Number(current.attempt_fence),
          state: lapsed ? "lease_expired" : current.state,
          ...(current.state === "live" ? { lease_expires_at: iso(current.lease_expires_at) } : {}),
        };
      }
      return { result, projectCanonicalId: t.project_canonical_id };
    },

    async stop_agent_task(principal, args) {
      return withEvents(async (tx, wake) => {
        const t = await taskFor(tx, principal, str(args, "task_id"), true);
        if (t.state === "stopped") return { result: { task_id: t.task_id, state: "stopped" }, projectCanonicalId: t.project_canonical_id };
        if (t.state === "completed" || t.state === "failed") {
          throw new ToolFailureError(
            toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
              detail_code: "task_finished",
              evidence: { state: t.state },
              message: "The task already finished; nothing was stopped.",
            }),
          );
        }
        const live = await tx.query<{ attempt_id: string }>(
          `UPDATE ${schema}.agent_task_attempts SET state = 'stopped', ended_at = now() WHERE task_id = $1 AND state = 'live' RETURNING attempt_id`,
          [t.task_id],
        );
        await tx.query(`UPDATE ${schema}.agent_tasks SET state = 'stopped', stop_reason = $2, updated_at = now() WHERE task_id = $1`, [
          t.task_id,
          str(args, "reason"),
        ]);
        wake(await appendEvents(tx, recipientsOf(t), "task_stopped", t.task_id, live.rows[0]?.attempt_id));
        return { result: { task_id: t.task_id, state: "stopped" }, projectCanonicalId: t.project_canonical_id };
      });
    },

    async start_agent_task_attempt(principal, args) {
      const key = str(args, "idempotency_key");
      if (!isCallerId(key)) throw new ToolFailureError(invalid("invalid_idempotency_key", "idempotency_key"));
      const leaseMs = num(args, "lease_ms") ?? DEFAULT_LEASE_MS;
      const digest = digestOf("start_agent_task_attempt", args);
      // Starts of one Task wait here, in memory, rather than each holding a pooled connection
      // while it waits for the Task's row lock: a burst of starts then answers lease_held one
      // after another instead of running the pool dry. The row lock still decides (replicas).
      return oneAtATime(str(args, "task_id"), () =>
        withEvents(async (tx, wake) => {
          // The Task row lock serializes every start of one Task (and its keyed replays).
          const t = await taskFor(tx, principal, str(args, "task_id"), true);
          const prior = await replayed(tx, principal, "start_agent_task_attempt", key, digest);
          if (prior) return { result: prior, projectCanonicalId: t.project_canonical_id };
          const agent = await agentOf(tx, principal, str(args, "assignee_agent_id"));
          if (agent.agent_id !== t.assignee_agent_id) {
            throw new ToolFailureError(
              toolFailure(ReasonCode.invalidValue, PipelineStage.authorization, {
                detail_code: "not_task_assignee",
                evidence: { field: "assignee_agent_id" },
                message: "This agent is not the task's assignee.",
              }),
            );
          }
          if (t.state === "completed" || t.state === "failed" || t.state === "stopped") {
            throw new ToolFailureError(
              toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
                detail_code: "task_finished",
                evidence: { state: t.state },
                follow_up: readAgentTaskFollowUp(t.task_id),
              }),
            );
          }
          const live = (await tx.query<AttemptRow>(`${attemptSelect} WHERE at.task_id = $1 AND at.state = 'live'`, [t.task_id])).rows[0];
          if (live?.lease_live) {
            throw new ToolFailureError(
              toolFailure(ReasonCode.leaseHeld, PipelineStage.preflight, {
                detail_code: "attempt_lease_live",
                evidence: { attempt_fence: Number(live.attempt_fence), lease_expires_at: iso(live.lease_expires_at) },
                message: "Another attempt holds this task's lease; start again after it ends or lapses.",
                follow_up: readAgentTaskFollowUp(t.task_id),
              }),
            );
          }
          if (live) {
            // Takeover: the lapsed attempt ends as lost (its outcome is unknown) in this transaction.
            await tx.query(`UPDATE ${schema}.agent_task_attempts SET state = 'lost', ended_at = now() WHERE attempt_id = $1`, [live.attempt_id]);
            wake(await appendEvents(tx, recipientsOf(t), "attempt_lost", t.task_id, live.attempt_id));
          }
          const fence = await fences.next(t.task_id, Number(t.current_fence));
          await tx.query(`UPDATE ${schema}.agent_tasks SET current_fence = $2, state = 'in_progress', updated_at = now() WHERE task_id = $1`, [
            t.task_id,
            fence,
          ]);
          const attemptId = newAttemptId();
          const generation = Number(agent.controller_generation);
          const inserted = await tx.query<{ lease_expires_at: Date | string }>(
            `INSERT INTO ${schema}.agent_task_attempts (attempt_id, task_id, client_id, subject, assignee_agent_id, attempt_fence, controller_generation, lease_ms, lease_expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8::int, now() + $8::int * interval '1 millisecond') RETURNING lease_expires_at`,
            [attemptId, t.task_id, principal.clientId, principal.subject, agent.agent_id, fence, generation, leaseMs],
          );
          const code = await issuePinnedRef(tx, schema, attemptRefTable, principal, [t.task_id, attemptId, agent.agent_id, fence, generation]);
          wake(await appendEvents(tx, recipientsOf(t), "attempt_started", t.task_id, attemptId));
          const result = {
            task_id: t.task_id,
            attempt_id: attemptId,
            assignee_agent_id: agent.agent_id,
            attempt_fence: fence,
            attempt_controller_generation: generation,
            attempt_ref: formatRef(RefKind.attempt, code),
            lease_expires_at: iso(inserted.rows[0]?.lease_expires_at),
          };
          await remember(tx, principal, "start_agent_task_attempt", key, digest, result);
          return { result, projectCanonicalId: t.project_canonical_id };
        }),
      );
    },

    async heartbeat_agent_task_attempt(principal, args) {
      return db.transaction(async (tx) => {
        const { task, attempt } = await checkAttempt(tx, principal, str(args, "attempt_id"), tupleOf(args), true);
        const r = await tx.query<{ lease_expires_at: Date | string }>(
          `UPDATE ${schema}.agent_task_attempts SET lease_expires_at = now() + lease_ms * interval '1 millisecond' WHERE attempt_id = $1 RETURNING lease_expires_at`,
          [attempt.attempt_id],
        );
        return { result: { lease_expires_at: iso(r.rows[0]?.lease_expires_at) }, projectCanonicalId: task.project_canonical_id };
      });
    },

    async complete_agent_task_attempt(principal, args) {
      const outcome = str(args, "outcome");
      return withEvents(async (tx, wake) => {
        const { task, attempt } = await checkAttempt(tx, principal, str(args, "attempt_id"), tupleOf(args), true);
        const summary = str(args, "summary");
        await tx.query(`UPDATE ${schema}.agent_task_attempts SET state = $2, summary = $3, ended_at = now() WHERE attempt_id = $1`, [
          attempt.attempt_id,
          outcome,
          summary,
        ]);
        const taskState = outcome === "succeeded" ? "completed" : "failed";
        await tx.query(`UPDATE ${schema}.agent_tasks SET state = $2, summary = $3, updated_at = now() WHERE task_id = $1`, [task.task_id, taskState, summary]);
        wake(await appendEvents(tx, recipientsOf(task), outcome === "succeeded" ? "attempt_completed" : "attempt_failed", task.task_id, attempt.attempt_id));
        return {
          result: { task_id: task.task_id, attempt_id: attempt.attempt_id, attempt_state: outcome, task_state: taskState },
          projectCanonicalId: task.project_canonical_id,
        };
      });
    },

    async reconcile_agent_task_attempt(principal, args) {
      const tuple = tupleOf(args);
      const attemptId = str(args, "attempt_id");
      if (!isAttemptId(attemptId)) throw new ToolFailureError(notFound("attempt"));
      const seen = (await db.query<AttemptRow>(`${attemptSelect} WHERE at.attempt_id = $1`, [attemptId])).rows[0];
      if (!seen || !ownedBy(seen, principal)) throw new ToolFailureError(notFound("attempt"));
      const task = await taskFor(db, principal, seen.task_id);
      if (
        seen.task_id !== tuple.taskId ||
        seen.assignee_agent_id !== tuple.assigneeAgentId ||
        Number(seen.attempt_fence) !== tuple.fence ||
        Number(seen.controller_generation) !== tuple.generation
      ) {
        throw new ToolFailureError(fenceStale("attempt_tuple_mismatch", task.task_id));
      }
      const agent = await agentOf(db, principal, seen.assignee_agent_id);
      const holdsFence =
        seen.state === "live" &&
        seen.lease_live &&
        Number(task.current_fence) === Number(seen.attempt_fence) &&
        Number(agent.controller_generation) === Number(seen.controller_generation);
      // Ended without a completion (lost, or live with a lapsed lease, or stopped): whether its
      // work finished is not known. Reported, never retried.
      const unknown = seen.state === "lost" || seen.state === "stopped" || (seen.state === "live" && !holdsFence);
      const state = seen.state === "live" && !seen.lease_live ? "lease_expired" : seen.state;
      return {
        result: {
          attempt_id: seen.attempt_id,
          attempt_state: state,
          holds_fence: holdsFence,
          attempt_fence: Number(seen.attempt_fence),
          current_fence: Number(task.current_fence),
          task_state: task.state,
          outcome_unknown: unknown,
          ...(seen.state === "live" ? { lease_expires_at: iso(seen.lease_expires_at) } : {}),
          ...(seen.summary !== null ? { summary: seen.summary } : {}),
        },
        projectCanonicalId: task.project_canonical_id,
      };
    },

    async start_agent_task_endpoint_continuation(principal, args) {
      const ref = str(args, "attempt_ref");
      const given = [args["task_id"], args["attempt_id"], args["assignee_agent_id"], args["attempt_fence"], args["attempt_controller_generation"]].map(
        (v) => v !== undefined,
      );
      if (ref !== "" && given.some(Boolean))
        throw new ToolFailureError(
          toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
            detail_code: "ref_with_explicit_tuple",
            message: "Pass attempt_ref or the explicit tuple, not both.",
          }),
        );
      if (ref === "" && !given.every(Boolean))
        throw new ToolFailureError(
          toolFailure(ReasonCode.missingField, PipelineStage.normalization, {
            detail_code: "ref_or_complete_tuple_required",
            message: "Pass attempt_ref, or all of task_id, attempt_id, assignee_agent_id, attempt_fence and attempt_controller_generation.",
          }),
        );
      return withEvents(async (tx, wake) => {
        const { task, attempt } =
          ref !== "" ? await checkAttemptRef(tx, principal, ref, true) : await checkAttempt(tx, principal, str(args, "attempt_id"), tupleOf(args), true);
        wake(await appendEvents(tx, [task.assignee_agent_id], "continuation_requested", task.task_id, attempt.attempt_id));
        // Only the request is known here: a fresh model turn and its exact consume are later,
        // separate observations of the Host.
        return {
          result: { task_id: task.task_id, attempt_id: attempt.attempt_id, dispatch: "accepted", fresh_turn: "unknown", consume: "unknown" },
          projectCanonicalId: task.project_canonical_id,
        };
      });
    },

    async wait_for_agent_events(principal, args, signal) {
      const ref = str(args, "agent_continuation_ref"),
        agentArg = str(args, "agent_id");
      if ((ref === "") === (agentArg === "")) {
        throw new ToolFailureError(
          toolFailure(ReasonCode.missingField, PipelineStage.normalization, {
            detail_code: "agent_selector_required",
            message: "Pass agent_id or agent_continuation_ref (one of them).",
          }),
        );
      }
      let agentId = agentArg;
      if (ref !== "") {
        const code = parseRef(RefKind.agentContinuation, ref);
        const pin =
          code === undefined
            ? undefined
            : (
                await db.query<{ agent_id: string; pinned: string; current: string }>(
                  `SELECT r.agent_id, r.controller_generation AS pinned, e.controller_generation AS current FROM ${schema}.agent_continuation_refs r
           JOIN ${schema}.agent_endpoints e ON e.client_id = r.client_id AND e.subject = r.subject AND e.agent_id = r.agent_id AND e.endpoint_id = r.endpoint_id
           WHERE r.client_id = $1 AND r.subject = $2 AND r.code = $3`,
                  [principal.clientId, principal.subject, code],
                )
              ).rows[0];
        if (!pin) throw new ToolFailureError(continuationRefNotFound());
        if (Number(pin.pinned) !== Number(pin.current)) {
          throw new ToolFailureError(staleContinuationRef());
        }
        agentId = pin.agent_id;
      }
      const agent = await agentOf(db, principal, agentId);
      const cursorText = args["after_cursor"] === undefined ? "0" : str(args, "after_cursor");
      if (!CURSOR.test(cursorText) || BigInt(cursorText) > BigInt(agent.last_event_seq)) throw new ToolFailureError(notFound("cursor"));
      const cursor = cursorText;
      const waitMs = num(args, "wait_ms") ?? DEFAULT_EVENT_WAIT_MS;
      const deadline = Date.now() + waitMs;
      const selector = ref !== "" ? { agent_continuation_ref: ref } : { agent_id: agentId };
      // Events an in-process wake handed over that continue the cursor exactly: they are what
      // reading the log would return (committed, in order), so the log is not read again.
      let handed: readonly AppendedEvent[] | undefined;
      for (;;) {
        // Arm the wake before reading, so an append between the read and the wait is not missed.
        const stop = new AbortController();
        const onAbort = () => stop.abort();
        signal?.addEventListener("abort", onAbort, { once: true });
        const woken = handed ? undefined : bus.wait(agentId, Math.max(0, deadline - Date.now()), stop.signal);
        const r = handed
          ? { rows: handed }
          : await db.query<AppendedEvent>(
              `SELECT seq, kind, task_id, attempt_id, at FROM ${schema}.agent_events WHERE agent_id = $1 AND seq > $2 ORDER BY seq LIMIT ${EVENTS_PAGE + 1}`,
              [agentId, cursor],
            );
        if (r.rows.length > 0 || Date.now() >= deadline || signal?.aborted) {
          stop.abort();
          signal?.removeEventListener("abort", onAbort);
          const page = r.rows.slice(0, EVENTS_PAGE);
          const next = page.length > 0 ? String(page[page.length - 1]?.seq) : cursor;
          const events = page.map((e) => ({
            event_id: `${agentId}:${e.seq}`,
            kind: e.kind,
            ...(e.task_id ? { task_id: e.task_id } : {}),
            ...(e.attempt_id ? { attempt_id: e.attempt_id } : {}),
            at: iso(e.at),
          }));
          const more = r.rows.length > EVENTS_PAGE;
          return {
            result: {
              events,
              cursor: next,
              wait_state: page.length > 0 ? "ready" : "timeout",
              wait_ms: waitMs,
              ...(more ? { more: true } : {}),
              ...(page.length === 0 || more ? { follow_up: waitForAgentEventsFollowUp(selector, next, waitMs) } : {}),
            },
          };
        }
        const wake = await woken;
        signal?.removeEventListener("abort", onAbort);
        if (wake?.how === "notified") handed = continuing(wake.events, cursor);
      }
    },
  };

  return {
    tools,
    /** Runs one agent tool; a domain failure comes back as `{failure}`. */
    async call(principal: Principal, tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<Result<{ value: AgentToolResult }>> {
      const fn = Object.hasOwn(tools, tool) ? (tools[tool as AgentToolName] as WireAgentToolHandler) : undefined;
      if (!fn) return { ok: false, failure: toolFailure(ReasonCode.unknownTool, PipelineStage.dispatch, { detail_code: "not_an_agent_tool" }) };
      try {
        return { ok: true, value: await fn(principal, args, signal) };
      } catch (error) {
        if (isToolFailureError(error)) return { ok: false, failure: error.failure };
        throw error;
      }
    },
    /** attempt_ref on a workspace call: the Attempt must hold its fence now, on a Task of this Project. */
    async admitAttemptRef(
      principal: Principal,
      ref: string,
      projectCanonicalId: string,
    ): Promise<Result<{ taskId: string; attemptId: string; fence: number }>> {
      try {
        const { task, attempt } = await checkAttemptRef(db, principal, ref, false);
        if (task.project_canonical_id !== projectCanonicalId) {
          return {
            ok: false,
            failure: toolFailure(ReasonCode.invalidValue, PipelineStage.authorization, {
              detail_code: "attempt_other_project",
              evidence: { field: "attempt_ref" },
              message: "This attempt's task is in another project.",
            }),
          };
        }
        return { ok: true, taskId: task.task_id, attemptId: attempt.attempt_id, fence: Number(attempt.attempt_fence) };
      } catch (error) {
        if (isToolFailureError(error)) return { ok: false, failure: error.failure };
        throw error;
      }
    },
  };
}

export type AgentTasks = ReturnType<typeof createAgentTasks>;
