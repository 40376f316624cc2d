/**
 * Minimal durable records for agent continuations and task Attempts, and their refs.
 *
 * - An Endpoint (agent_id, endpoint_id) has a controller generation; rotation advances it.
 *   An agent_continuation_ref is pinned to one generation, so rotation leaves it stale.
 * - A Task has a current fence; each new Attempt takes the next fence (a takeover of the
 *   previous one). An Attempt also has a controller generation. An attempt_ref is pinned to
 *   one Attempt, its fence and one controller generation, so a takeover or a generation
 *   change leaves it stale. Refs are never rewritten onto the successor.
 *
 * Ownership: records belong to the communication principal that created them; another
 * principal's record fails exactly like one that does not exist.
 */
import type { Database, Principal, Queryable } from "@webcodex/platform";
import type { ToolFailure } from "@webcodex/contracts";
import { agentContinuationRefTable, attemptRefTable, issuePinnedRef } from "../refs/issue-ref.js";
import { formatRef, parseRef, RefKind } from "../refs/ref-codes.js";
import {
  attemptNotFound, attemptRefNotFound, attemptSuperseded, attemptTupleMismatch, continuationRefNotFound, endpointNotFound, generationMismatch,
  idempotencyKeyReused, invalidId, isAttemptId, isCallerId, isCounter, newAttemptId, refOrTuple, staleAttemptGeneration, staleContinuationRef,
} from "./agent-model.js";

export interface AgentContinuation {
  agentId: string;
  endpointId: string;
  controllerGeneration: number;
}

export interface AgentTaskAttempt {
  taskId: string;
  attemptId: string;
  assigneeAgentId: string;
  attemptFence: number;
  attemptControllerGeneration: number;
}

export type AgentResult<T> = ({ ok: true } & T) | { ok: false; failure: ToolFailure };

const fail = (failure: ToolFailure) => ({ ok: false as const, failure });

interface AttemptRow {
  attempt_id: string;
  task_id: string;
  assignee_agent_id: string;
  attempt_fence: string;
  controller_generation: string;
  current_fence: string;
}

const toAttempt = (r: AttemptRow, generation = Number(r.controller_generation)): AgentTaskAttempt => ({
  taskId: r.task_id,
  attemptId: r.attempt_id,
  assigneeAgentId: r.assignee_agent_id,
  attemptFence: Number(r.attempt_fence),
  attemptControllerGeneration: generation,
});

export function createAgentStore(db: Database) {
  const schema = "refs";

  function checkIds(ids: Record<string, string>): ToolFailure | undefined {
    for (const [field, value] of Object.entries(ids)) if (!isCallerId(value)) return invalidId(field);
    return undefined;
  }

  async function continuationRef(tx: Queryable, principal: Principal, c: AgentContinuation): Promise<string> {
    return formatRef(RefKind.agentContinuation, await issuePinnedRef(tx, schema, agentContinuationRefTable, principal, [c.agentId, c.endpointId, c.controllerGeneration]));
  }

  async function attemptRef(tx: Queryable, principal: Principal, a: AgentTaskAttempt): Promise<string> {
    return formatRef(RefKind.attempt, await issuePinnedRef(tx, schema, attemptRefTable, principal, [a.taskId, a.attemptId, a.assigneeAgentId, a.attemptFence, a.attemptControllerGeneration]));
  }

  const attemptSelect = `SELECT a.attempt_id, a.task_id, a.assignee_agent_id, a.attempt_fence, a.controller_generation, t.current_fence
    FROM ${schema}.agent_task_attempts a
    JOIN ${schema}.agent_tasks t ON t.client_id = a.client_id AND t.subject = a.subject AND t.task_id = a.task_id`;

  return {
    /**
     * Advances the Endpoint to its next controller generation (expected 0 creates it at 1)
     * and issues the ref of the new generation; refs of earlier generations go stale.
     */
    async rotateEndpoint(principal: Principal, input: { agentId: string; endpointId: string; expectedGeneration: number }): Promise<AgentResult<{ continuation: AgentContinuation; ref: string }>> {
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return fail(bad);
      if (!isCounter(input.expectedGeneration, true)) return fail(invalidId("expected_controller_generation"));
      return db.transaction(async (tx) => {
        const key = [principal.clientId, principal.subject, input.agentId, input.endpointId];
        const current = await tx.query<{ controller_generation: string }>(
          `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 FOR UPDATE`,
          key,
        );
        const row = current.rows[0];
        let next: number;
        if (!row) {
          if (input.expectedGeneration !== 0) return fail(endpointNotFound());
          const created = await tx.query(
            `INSERT INTO ${schema}.agent_endpoints (client_id, subject, agent_id, endpoint_id, controller_generation) VALUES ($1, $2, $3, $4, 1) ON CONFLICT DO NOTHING`,
            key,
          );
          if (created.rowCount === 0) return fail(generationMismatch());
          next = 1;
        } else {
          if (Number(row.controller_generation) !== input.expectedGeneration) return fail(generationMismatch());
          next = input.expectedGeneration + 1;
          await tx.query(
            `UPDATE ${schema}.agent_endpoints SET controller_generation = $5, rotated_at = now() WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4`,
            [...key, next],
          );
        }
        const continuation = { agentId: input.agentId, endpointId: input.endpointId, controllerGeneration: next };
        return { ok: true as const, continuation, ref: await continuationRef(tx, principal, continuation) };
      });
    },

    /** The ref pinned to the Endpoint's current generation, which must be the expected one. */
    async issueContinuationRef(principal: Principal, input: { agentId: string; endpointId: string; expectedGeneration: number }): Promise<AgentResult<{ continuation: AgentContinuation; ref: string }>> {
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return fail(bad);
      if (!isCounter(input.expectedGeneration, false)) return fail(invalidId("expected_controller_generation"));
      return db.transaction(async (tx) => {
        const r = await tx.query<{ controller_generation: string }>(
          `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 FOR SHARE`,
          [principal.clientId, principal.subject, input.agentId, input.endpointId],
        );
        const row = r.rows[0];
        if (!row) return fail(endpointNotFound());
        if (Number(row.controller_generation) !== input.expectedGeneration) return fail(generationMismatch());
        const continuation = { agentId: input.agentId, endpointId: input.endpointId, controllerGeneration: input.expectedGeneration };
        return { ok: true as const, continuation, ref: await continuationRef(tx, principal, continuation) };
      });
    },

    /** Expands a ref (or takes the explicit tuple) and runs the owner and generation checks. */
    async resolveContinuation(principal: Principal, input: { ref: string; agentId: string; endpointId: string; expectedGeneration: number }): Promise<AgentResult<{ continuation: AgentContinuation }>> {
      const selected = refOrTuple(input.ref, input, [input.agentId !== "", input.endpointId !== "", input.expectedGeneration !== 0], {
        ref: "agent_continuation_ref",
        tuple: "agent_id, endpoint_id and expected_controller_generation",
      });
      if (selected.kind === "invalid") return fail(selected.failure);
      if (selected.kind === "ref") {
        const code = parseRef(RefKind.agentContinuation, selected.ref);
        if (code === undefined) return fail(continuationRefNotFound());
        const r = await db.query<{ agent_id: string; endpoint_id: string; pinned: string; current: string }>(
          `SELECT r.agent_id, r.endpoint_id, r.controller_generation AS pinned, e.controller_generation AS current
           FROM ${schema}.agent_continuation_refs r
           JOIN ${schema}.agent_endpoints e ON e.client_id = r.client_id AND e.subject = r.subject AND e.agent_id = r.agent_id AND e.endpoint_id = r.endpoint_id
           WHERE r.client_id = $1 AND r.subject = $2 AND r.code = $3`,
          [principal.clientId, principal.subject, code],
        );
        const row = r.rows[0];
        if (!row) return fail(continuationRefNotFound());
        if (Number(row.pinned) !== Number(row.current)) return fail(staleContinuationRef());
        return { ok: true, continuation: { agentId: row.agent_id, endpointId: row.endpoint_id, controllerGeneration: Number(row.current) } };
      }
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return fail(bad);
      if (!isCounter(input.expectedGeneration, false)) return fail(invalidId("expected_controller_generation"));
      const r = await db.query<{ controller_generation: string }>(
        `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4`,
        [principal.clientId, principal.subject, input.agentId, input.endpointId],
      );
      const row = r.rows[0];
      if (!row) return fail(endpointNotFound());
      if (Number(row.controller_generation) !== input.expectedGeneration) return fail(generationMismatch());
      return { ok: true, continuation: { agentId: input.agentId, endpointId: input.endpointId, controllerGeneration: input.expectedGeneration } };
    },

    /**
     * Starts an Attempt with the Task's next fence (taking over any earlier Attempt) and
     * issues its ref. The same idempotency key replays the original Attempt and ref exactly.
     */
    async startAttempt(principal: Principal, input: { taskId: string; assigneeAgentId: string; idempotencyKey: string }): Promise<AgentResult<{ attempt: AgentTaskAttempt; ref: string; replayed: boolean }>> {
      const bad = checkIds({ task_id: input.taskId, assignee_agent_id: input.assigneeAgentId, idempotency_key: input.idempotencyKey });
      if (bad) return fail(bad);
      return db.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [JSON.stringify(["refs.agent_task", principal.clientId, principal.subject, input.taskId])]);
        const prior = await tx.query<AttemptRow>(
          `${attemptSelect} WHERE a.client_id = $1 AND a.subject = $2 AND a.task_id = $3 AND a.idempotency_key = $4`,
          [principal.clientId, principal.subject, input.taskId, input.idempotencyKey],
        );
        const replay = prior.rows[0];
        if (replay) {
          if (replay.assignee_agent_id !== input.assigneeAgentId) return fail(idempotencyKeyReused());
          // Exact replay: the Attempt as it was started (generation 1) and the ref issued then.
          const attempt = toAttempt(replay, 1);
          return { ok: true as const, attempt, ref: await attemptRef(tx, principal, attempt), replayed: true };
        }
        const task = await tx.query<{ current_fence: string }>(
          `SELECT current_fence FROM ${schema}.agent_tasks WHERE client_id = $1 AND subject = $2 AND task_id = $3`,
          [principal.clientId, principal.subject, input.taskId],
        );
        const fence = Number(task.rows[0]?.current_fence ?? 0) + 1;
        await tx.query(
          task.rows[0]
            ? `UPDATE ${schema}.agent_tasks SET current_fence = $4, updated_at = now() WHERE client_id = $1 AND subject = $2 AND task_id = $3`
            : `INSERT INTO ${schema}.agent_tasks (client_id, subject, task_id, current_fence) VALUES ($1, $2, $3, $4)`,
          [principal.clientId, principal.subject, input.taskId, fence],
        );
        const attempt: AgentTaskAttempt = { taskId: input.taskId, attemptId: newAttemptId(), assigneeAgentId: input.assigneeAgentId, attemptFence: fence, attemptControllerGeneration: 1 };
        await tx.query(
          `INSERT INTO ${schema}.agent_task_attempts (attempt_id, client_id, subject, task_id, assignee_agent_id, attempt_fence, controller_generation, idempotency_key)
           VALUES ($1, $2, $3, $4, $5, $6, 1, $7)`,
          [attempt.attemptId, principal.clientId, principal.subject, attempt.taskId, attempt.assigneeAgentId, fence, input.idempotencyKey],
        );
        return { ok: true as const, attempt, ref: await attemptRef(tx, principal, attempt), replayed: false };
      });
    },

    /** Moves the current Attempt to its next controller generation and issues that generation's ref. */
    async advanceAttemptGeneration(principal: Principal, input: { attemptId: string; attemptFence: number; expectedGeneration: number }): Promise<AgentResult<{ attempt: AgentTaskAttempt; ref: string }>> {
      if (!isAttemptId(input.attemptId)) return fail(invalidId("attempt_id"));
      if (!isCounter(input.attemptFence, false)) return fail(invalidId("attempt_fence"));
      if (!isCounter(input.expectedGeneration, false)) return fail(invalidId("expected_controller_generation"));
      return db.transaction(async (tx) => {
        const r = await tx.query<AttemptRow>(`${attemptSelect} WHERE a.attempt_id = $3 AND a.client_id = $1 AND a.subject = $2 FOR UPDATE OF a`, [principal.clientId, principal.subject, input.attemptId]);
        const row = r.rows[0];
        if (!row) return fail(attemptNotFound());
        if (Number(row.attempt_fence) !== input.attemptFence) return fail(attemptTupleMismatch());
        if (Number(row.current_fence) !== Number(row.attempt_fence)) return fail(attemptSuperseded(false));
        if (Number(row.controller_generation) !== input.expectedGeneration) return fail(generationMismatch());
        const next = input.expectedGeneration + 1;
        await tx.query(`UPDATE ${schema}.agent_task_attempts SET controller_generation = $2 WHERE attempt_id = $1`, [input.attemptId, next]);
        const attempt = toAttempt(row, next);
        return { ok: true as const, attempt, ref: await attemptRef(tx, principal, attempt) };
      });
    },

    /** Expands an attempt_ref (or takes the explicit tuple) and runs the owner, fence and generation checks. */
    async resolveAttempt(
      principal: Principal,
      input: { ref: string; taskId: string; attemptId: string; assigneeAgentId: string; attemptFence: number; attemptControllerGeneration: number },
    ): Promise<AgentResult<{ attempt: AgentTaskAttempt }>> {
      const selected = refOrTuple(input.ref, input, [input.taskId !== "", input.attemptId !== "", input.assigneeAgentId !== "", input.attemptFence !== 0, input.attemptControllerGeneration !== 0], {
        ref: "attempt_ref",
        tuple: "task_id, attempt_id, assignee_agent_id, attempt_fence and attempt_controller_generation",
      });
      if (selected.kind === "invalid") return fail(selected.failure);
      if (selected.kind === "ref") {
        const code = parseRef(RefKind.attempt, selected.ref);
        if (code === undefined) return fail(attemptRefNotFound());
        const r = await db.query<AttemptRow & { pinned_generation: string }>(
          `SELECT a.attempt_id, a.task_id, a.assignee_agent_id, a.attempt_fence, a.controller_generation, t.current_fence, r.controller_generation AS pinned_generation
           FROM ${schema}.attempt_refs r
           JOIN ${schema}.agent_task_attempts a ON a.attempt_id = r.attempt_id
           JOIN ${schema}.agent_tasks t ON t.client_id = a.client_id AND t.subject = a.subject AND t.task_id = a.task_id
           WHERE r.client_id = $1 AND r.subject = $2 AND r.code = $3`,
          [principal.clientId, principal.subject, code],
        );
        const row = r.rows[0];
        if (!row) return fail(attemptRefNotFound());
        if (Number(row.current_fence) !== Number(row.attempt_fence)) return fail(attemptSuperseded(true));
        if (Number(row.pinned_generation) !== Number(row.controller_generation)) return fail(staleAttemptGeneration());
        return { ok: true, attempt: toAttempt(row) };
      }
      const bad = checkIds({ task_id: input.taskId, assignee_agent_id: input.assigneeAgentId });
      if (bad) return fail(bad);
      if (!isAttemptId(input.attemptId)) return fail(invalidId("attempt_id"));
      if (!isCounter(input.attemptFence, false)) return fail(invalidId("attempt_fence"));
      if (!isCounter(input.attemptControllerGeneration, false)) return fail(invalidId("attempt_controller_generation"));
      const r = await db.query<AttemptRow>(`${attemptSelect} WHERE a.attempt_id = $3 AND a.client_id = $1 AND a.subject = $2`, [principal.clientId, principal.subject, input.attemptId]);
      const row = r.rows[0];
      if (!row) return fail(attemptNotFound());
      if (row.task_id !== input.taskId || row.assignee_agent_id !== input.assigneeAgentId || Number(row.attempt_fence) !== input.attemptFence) return fail(attemptTupleMismatch());
      if (Number(row.current_fence) !== Number(row.attempt_fence)) return fail(attemptSuperseded(false));
      if (Number(row.controller_generation) !== input.attemptControllerGeneration) return fail(generationMismatch());
      return { ok: true, attempt: toAttempt(row) };
    },
  };
}

export type AgentStore = ReturnType<typeof createAgentStore>;
