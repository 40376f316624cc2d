/**
 * The per-Agent event logs the agent tools append to: one event per recipient Agent, appended in
 * the transaction that made the change and NOTIFYed at its commit, and the in-process wake of
 * the waiters of every Agent appended to once that transaction committed.
 */
import type { Database, Queryable } from "@webcodex/platform";
import { AGENT_EVENTS_CHANNEL } from "./event-bus.js";
import type { AgentEventBus, AppendedEvent } from "./event-bus.js";
import { schema } from "./agent-rows.js";

export type Appended = { agentId: string; event: AppendedEvent };

/** The events a wake carried, when they continue `cursor` exactly (seq cursor+1, cursor+2, …); else undefined. */
export function continuing(events: readonly AppendedEvent[] | undefined, cursor: string): readonly AppendedEvent[] | undefined {
  if (!events || events.length === 0) return undefined;
  const first = BigInt(cursor) + 1n;
  return events.every((e, i) => BigInt(e.seq) === first + BigInt(i)) ? events : undefined;
}

export type AgentTaskEvents = ReturnType<typeof createAgentTaskEvents>;

export function createAgentTaskEvents(db: Database, bus: AgentEventBus) {
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

  return { appendEvents, withEvents };
}
