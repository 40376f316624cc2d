/**
 * Minimal durable records for agent continuations and task Attempts, and their refs.
 *
 * - An Endpoint (agent_id, endpoint_id) has a controller generation; rotation advances it.
 *   An agent_continuation_ref is pinned to one generation, so rotation leaves it stale.
 * - Tasks and fenced Attempts live in agent-tasks.ts.
 *
 * Ownership: records belong to the communication principal that created them; another
 * principal's record fails exactly like one that does not exist.
 */
import type { Database, Principal, Queryable } from "@webcodex/platform";
import type { ToolFailure, Result } from "@webcodex/contracts";
import { agentContinuationRefTable, issuePinnedRef } from "../refs/issue-ref.js";
import { formatRef, parseRef, RefKind } from "../refs/ref-codes.js";
import {
  continuationRefNotFound,
  endpointNotFound,
  generationMismatch,
  invalidId,
  isCallerId,
  isCounter,
  refOrTuple,
  staleContinuationRef,
} from "./agent-model.js";

export interface AgentContinuation {
  agentId: string;
  endpointId: string;
  controllerGeneration: number;
}

const refused = (failure: ToolFailure) => ({ ok: false as const, failure });

export function createAgentStore(db: Database) {
  const schema = "refs";

  function checkIds(ids: Record<string, string>): ToolFailure | undefined {
    for (const [field, value] of Object.entries(ids)) if (!isCallerId(value)) return invalidId(field);
    return undefined;
  }

  async function continuationRef(tx: Queryable, principal: Principal, c: AgentContinuation): Promise<string> {
    return formatRef(
      RefKind.agentContinuation,
      await issuePinnedRef(tx, schema, agentContinuationRefTable, principal, [c.agentId, c.endpointId, c.controllerGeneration]),
    );
  }

  return {
    /**
     * Advances the Endpoint to its next controller generation (expected 0 creates it at 1)
     * and issues the ref of the new generation; refs of earlier generations go stale.
     */
    async rotateEndpoint(
      principal: Principal,
      input: { agentId: string; endpointId: string; expectedGeneration: number },
    ): Promise<Result<{ continuation: AgentContinuation; ref: string }>> {
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return refused(bad);
      if (!isCounter(input.expectedGeneration, true)) return refused(invalidId("expected_controller_generation"));
      return db.transaction(async (tx) => {
        const key = [principal.clientId, principal.subject, input.agentId, input.endpointId];
        const current = await tx.query<{ controller_generation: string }>(
          `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 FOR UPDATE`,
          key,
        );
        const row = current.rows[0];
        let next: number;
        if (!row) {
          if (input.expectedGeneration !== 0) return refused(endpointNotFound());
          const created = await tx.query(
            `INSERT INTO ${schema}.agent_endpoints (client_id, subject, agent_id, endpoint_id, controller_generation) VALUES ($1, $2, $3, $4, 1) ON CONFLICT DO NOTHING`,
            key,
          );
          if (created.rowCount === 0) return refused(generationMismatch());
          next = 1;
        } else {
          if (Number(row.controller_generation) !== input.expectedGeneration) return refused(generationMismatch());
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
    async issueContinuationRef(
      principal: Principal,
      input: { agentId: string; endpointId: string; expectedGeneration: number },
    ): Promise<Result<{ continuation: AgentContinuation; ref: string }>> {
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return refused(bad);
      if (!isCounter(input.expectedGeneration, false)) return refused(invalidId("expected_controller_generation"));
      return db.transaction(async (tx) => {
        const r = await tx.query<{ controller_generation: string }>(
          `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 FOR SHARE`,
          [principal.clientId, principal.subject, input.agentId, input.endpointId],
        );
        const row = r.rows[0];
        if (!row) return refused(endpointNotFound());
        if (Number(row.controller_generation) !== input.expectedGeneration) return refused(generationMismatch());
        const continuation = { agentId: input.agentId, endpointId: input.endpointId, controllerGeneration: input.expectedGeneration };
        return { ok: true as const, continuation, ref: await continuationRef(tx, principal, continuation) };
      });
    },

    /** Expands a ref (or takes the explicit tuple) and runs the owner and generation checks. */
    async resolveContinuation(
      principal: Principal,
      input: { ref: string; agentId: string; endpointId: string; expectedGeneration: number },
    ): Promise<Result<{ continuation: AgentContinuation }>> {
      const selected = refOrTuple(input.ref, input, [input.agentId !== "", input.endpointId !== "", input.expectedGeneration !== 0], {
        ref: "agent_continuation_ref",
        tuple: "agent_id, endpoint_id and expected_controller_generation",
      });
      if (selected.kind === "invalid") return refused(selected.failure);
      if (selected.kind === "ref") {
        const code = parseRef(RefKind.agentContinuation, selected.ref);
        if (code === undefined) return refused(continuationRefNotFound());
        const r = await db.query<{ agent_id: string; endpoint_id: string; pinned: string; current: string }>(
          `SELECT r.agent_id, r.endpoint_id, r.controller_generation AS pinned, e.controller_generation AS current
           FROM ${schema}.agent_continuation_refs r
           JOIN ${schema}.agent_endpoints e ON e.client_id = r.client_id AND e.subject = r.subject AND e.agent_id = r.agent_id AND e.endpoint_id = r.endpoint_id
           WHERE r.client_id = $1 AND r.subject = $2 AND r.code = $3`,
          [principal.clientId, principal.subject, code],
        );
        const row = r.rows[0];
        if (!row) return refused(continuationRefNotFound());
        if (Number(row.pinned) !== Number(row.current)) return refused(staleContinuationRef());
        return { ok: true, continuation: { agentId: row.agent_id, endpointId: row.endpoint_id, controllerGeneration: Number(row.current) } };
      }
      const bad = checkIds({ agent_id: input.agentId, endpoint_id: input.endpointId });
      if (bad) return refused(bad);
      if (!isCounter(input.expectedGeneration, false)) return refused(invalidId("expected_controller_generation"));
      const r = await db.query<{ controller_generation: string }>(
        `SELECT controller_generation FROM ${schema}.agent_endpoints WHERE client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4`,
        [principal.clientId, principal.subject, input.agentId, input.endpointId],
      );
      const row = r.rows[0];
      if (!row) return refused(endpointNotFound());
      if (Number(row.controller_generation) !== input.expectedGeneration) return refused(generationMismatch());
      return { ok: true, continuation: { agentId: input.agentId, endpointId: input.endpointId, controllerGeneration: input.expectedGeneration } };
    },
  };
}

export type AgentStore = ReturnType<typeof createAgentStore>;
