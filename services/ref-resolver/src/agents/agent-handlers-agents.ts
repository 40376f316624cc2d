/**
 * The Agent tools: create an Agent (with its first continuation Endpoint), rotate its Endpoint's
 * controller generation, and wait on its event log (by agent_id or by a continuation ref pinned
 * to the current generation).
 */
import { PipelineStage, ReasonCode, ToolFailureError, toolFailure, waitForAgentEventsFollowUp } from "@webcodex/contracts";
import { parseRef, RefKind } from "../refs/ref-codes.js";
import { continuationRefNotFound, generationMismatch, staleContinuationRef } from "./agent-model.js";
import { CURSOR, DEFAULT_EVENT_WAIT_MS, EVENTS_PAGE, hex, iso, notFound, schema } from "./agent-rows.js";
import { continuing } from "./agent-task-events.js";
import type { AppendedEvent } from "./event-bus.js";
import type { AgentHandlerDeps, AgentToolHandlers } from "./agent-tool-handlers.js";

export type AgentHandlers = Pick<AgentToolHandlers, "create_agent" | "rotate_agent_continuation_endpoint" | "wait_for_agent_events">;

export function agentHandlers({ db, bus, access }: AgentHandlerDeps): AgentHandlers {
  const { agentOf, continuationRefFor } = access;
  return {
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
          args.name,
          endpointId,
        ]);
        const ref = await continuationRefFor(tx, principal, agentId, endpointId, 1);
        return { result: { agent_id: agentId, endpoint_id: endpointId, controller_generation: 1, agent_continuation_ref: ref } };
      });
    },

    async rotate_agent_continuation_endpoint(principal, args) {
      const { agent_id: agentId, endpoint_id: endpointId, expected_controller_generation: expected } = args;
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

    async wait_for_agent_events(principal, args, signal) {
      const ref = args.agent_continuation_ref ?? "",
        agentArg = args.agent_id ?? "";
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
      const cursor = args.after_cursor ?? "0";
      if (!CURSOR.test(cursor) || BigInt(cursor) > BigInt(agent.last_event_seq)) throw new ToolFailureError(notFound("cursor"));
      const waitMs = args.wait_ms ?? DEFAULT_EVENT_WAIT_MS;
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
}
