/**
 * The Attempt tools: start a fenced Attempt on a Task (keyed; a lapsed holder is taken over and
 * ends as lost), heartbeat and complete it (each re-runs the Attempt checks), reconcile what
 * became of one, and request an Endpoint continuation for it (by attempt_ref or explicit tuple).
 */
import { PipelineStage, ReasonCode, ToolFailureError, readAgentTaskFollowUp, toolFailure } from "@webcodex/contracts";
import { attemptRefTable, issuePinnedRef } from "../refs/issue-ref.js";
import { formatRef, RefKind } from "../refs/ref-codes.js";
import { isAttemptId, isCallerId, newAttemptId } from "./agent-model.js";
import { DEFAULT_LEASE_MS, fenceStale, invalid, iso, notFound, ownedBy, schema } from "./agent-rows.js";
import type { AttemptRow } from "./agent-rows.js";
import type { AgentHandlerDeps, AgentToolHandlers } from "./agent-tool-handlers.js";

export type AttemptHandlers = Pick<
  AgentToolHandlers,
  | "start_agent_task_attempt"
  | "heartbeat_agent_task_attempt"
  | "complete_agent_task_attempt"
  | "reconcile_agent_task_attempt"
  | "start_agent_task_endpoint_continuation"
>;

export function attemptHandlers({ db, fences, access, events }: AgentHandlerDeps): AttemptHandlers {
  const { oneAtATime, attemptSelect, agentOf, taskFor, replayed, remember, digestOf, checkAttempt, checkAttemptRef, tupleOf, recipientsOf } = access;
  const { appendEvents, withEvents } = events;
  return {
    async start_agent_task_attempt(principal, args) {
      const key = args.idempotency_key;
      if (!isCallerId(key)) throw new ToolFailureError(invalid("invalid_idempotency_key", "idempotency_key"));
      const leaseMs = args.lease_ms ?? DEFAULT_LEASE_MS;
      const digest = digestOf("start_agent_task_attempt", args);
      // Starts of one Task wait here, in memory, rather than each holding a pooled connection
      // while it waits for the Task's row lock: a burst of starts then answers lease_held one
      // after another instead of running the pool dry. The row lock still decides (replicas).
      return oneAtATime(args.task_id, () =>
        withEvents(async (tx, wake) => {
          // The Task row lock serializes every start of one Task (and its keyed replays).
          const t = await taskFor(tx, principal, args.task_id, true);
          const prior = await replayed(tx, principal, "start_agent_task_attempt", key, digest);
          if (prior) return { result: prior, projectCanonicalId: t.project_canonical_id };
          const agent = await agentOf(tx, principal, args.assignee_agent_id);
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
        const { task, attempt } = await checkAttempt(tx, principal, args.attempt_id, tupleOf(args), true);
        const r = await tx.query<{ lease_expires_at: Date | string }>(
          `UPDATE ${schema}.agent_task_attempts SET lease_expires_at = now() + lease_ms * interval '1 millisecond' WHERE attempt_id = $1 RETURNING lease_expires_at`,
          [attempt.attempt_id],
        );
        return { result: { lease_expires_at: iso(r.rows[0]?.lease_expires_at) }, projectCanonicalId: task.project_canonical_id };
      });
    },

    async complete_agent_task_attempt(principal, args) {
      const outcome = args.outcome;
      return withEvents(async (tx, wake) => {
        const { task, attempt } = await checkAttempt(tx, principal, args.attempt_id, tupleOf(args), true);
        const summary = args.summary;
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
      const attemptId = args.attempt_id;
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
      const { attempt_ref: ref = "", task_id, attempt_id, assignee_agent_id, attempt_fence, attempt_controller_generation } = args;
      const given = [task_id, attempt_id, assignee_agent_id, attempt_fence, attempt_controller_generation].some((v) => v !== undefined);
      const tuple =
        task_id !== undefined &&
        attempt_id !== undefined &&
        assignee_agent_id !== undefined &&
        attempt_fence !== undefined &&
        attempt_controller_generation !== undefined
          ? { task_id, attempt_id, assignee_agent_id, attempt_fence, attempt_controller_generation }
          : undefined;
      if (ref !== "" && given)
        throw new ToolFailureError(
          toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
            detail_code: "ref_with_explicit_tuple",
            message: "Pass attempt_ref or the explicit tuple, not both.",
          }),
        );
      if (ref === "" && !tuple)
        throw new ToolFailureError(
          toolFailure(ReasonCode.missingField, PipelineStage.normalization, {
            detail_code: "ref_or_complete_tuple_required",
            message: "Pass attempt_ref, or all of task_id, attempt_id, assignee_agent_id, attempt_fence and attempt_controller_generation.",
          }),
        );
      return withEvents(async (tx, wake) => {
        const { task, attempt } = tuple
          ? await checkAttempt(tx, principal, tuple.attempt_id, tupleOf(tuple), true)
          : await checkAttemptRef(tx, principal, ref, true);
        wake(await appendEvents(tx, [task.assignee_agent_id], "continuation_requested", task.task_id, attempt.attempt_id));
        // Only the request is known here: a fresh model turn and its exact consume are later,
        // separate observations of the Host.
        return {
          result: { task_id: task.task_id, attempt_id: attempt.attempt_id, dispatch: "accepted", fresh_turn: "unknown", consume: "unknown" },
          projectCanonicalId: task.project_canonical_id,
        };
      });
    },
  };
}
