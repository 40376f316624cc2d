/**
 * The Task tools: create a Task for an Agent of the tenant (keyed: a retry replays the first
 * answer), list the caller's Tasks a page at a time, read one, and stop one (ending its live
 * Attempt). A Task is visible to its creator and to the owner of its assignee Agent.
 */
import { cursorFailure, decodeCursor, encodeCursor, pageFields, PipelineStage, ReasonCode, ToolFailureError, toolFailure } from "@webcodex/contracts";
import { isCallerId } from "./agent-model.js";
import { AGENT_ID, LIST_LIMIT, hex, invalid, iso, notFound, schema } from "./agent-rows.js";
import type { AttemptRow, TaskRow } from "./agent-rows.js";
import type { AgentHandlerDeps, AgentToolHandlers } from "./agent-tool-handlers.js";

export type TaskHandlers = Pick<AgentToolHandlers, "create_agent_task" | "list_agent_tasks" | "read_agent_task" | "stop_agent_task">;

export function taskHandlers({ db, projects, access, events }: AgentHandlerDeps): TaskHandlers {
  const { agentOf, taskFor, attemptSelect, replayed, remember, digestOf, keyLock, recipientsOf } = access;
  const { appendEvents, withEvents } = events;
  return {
    async create_agent_task(principal, args) {
      const key = args.idempotency_key;
      if (!isCallerId(key)) throw new ToolFailureError(invalid("invalid_idempotency_key", "idempotency_key"));
      const resolved = await projects.resolve(principal, args.project);
      if (!resolved.ok) throw new ToolFailureError(resolved.failure);
      const project = resolved.project;
      // The assignee's owner must be able to see the Project (a private Project is its owner's
      // alone): otherwise the Task would show its title, instructions and Project id to someone
      // the Project is hidden from. Checked before the transaction (the resolver has its own
      // connection use; embedded mode has one connection). Answered like an unknown Agent.
      const assignee = args.assignee_agent_id;
      const owner = AGENT_ID.test(assignee)
        ? (await db.query<{ client_id: string; subject: string }>(`SELECT client_id, subject FROM ${schema}.agents WHERE agent_id = $1`, [assignee])).rows[0]
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
        const requester = args.requester_agent_id ?? "";
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
          [taskId, principal.clientId, principal.subject, project.canonicalId, project.incarnation, args.title, args.instructions, assignee, requester || null],
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
      const filters = { project: args.project, state: args.state, assignee_agent_id: args.assignee_agent_id };
      const filterKey = JSON.stringify([filters.project ?? null, filters.state ?? null, filters.assignee_agent_id ?? null]);
      const limit = Math.min(args.limit ?? LIST_LIMIT.default, LIST_LIMIT.ceiling);
      let after: { created: string; taskId: string } | undefined;
      if (args.cursor !== undefined) {
        const payload = decodeCursor("tasks", args.cursor);
        const restart = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined));
        if (!Array.isArray(payload) || payload[0] !== filterKey || typeof payload[1] !== "string" || typeof payload[2] !== "string")
          throw new ToolFailureError(cursorFailure("cursor_invalid", "list_agent_tasks", restart));
        after = { created: payload[1], taskId: payload[2] };
      }
      const where = ["t.client_id = $1", "(t.creator_subject = $2 OR a.subject = $2)"];
      const params: unknown[] = [principal.clientId, principal.subject];
      let projectCanonicalId: string | undefined;
      if (filters.project !== undefined) {
        const resolved = await projects.resolve(principal, filters.project);
        if (!resolved.ok) throw new ToolFailureError(resolved.failure);
        projectCanonicalId = resolved.project.canonicalId;
        params.push(resolved.project.canonicalId);
        where.push(`t.project_canonical_id = $${params.length}`);
      }
      if (filters.state !== undefined) {
        params.push(filters.state);
        where.push(`t.state = $${params.length}`);
      }
      if (filters.assignee_agent_id !== undefined) {
        params.push(filters.assignee_agent_id);
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
      const t = await taskFor(db, principal, args.task_id);
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
        const t = await taskFor(tx, principal, args.task_id, true);
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
        await tx.query(`UPDATE ${schema}.agent_tasks SET state = 'stopped', stop_reason = $2, updated_at = now() WHERE task_id = $1`, [t.task_id, args.reason]);
        wake(await appendEvents(tx, recipientsOf(t), "task_stopped", t.task_id, live.rows[0]?.attempt_id));
        return { result: { task_id: t.task_id, state: "stopped" }, projectCanonicalId: t.project_canonical_id };
      });
    },
  };
}
