/**
 * Agent continuation records: what followed an agent continuation card, as separate
 * observations (Postgres table `refs.agent_continuations`), one record per (owner, Endpoint
 * generation, cursor the carried wait starts after):
 * - dispatch: the card claims the one message before it sends it (none → claimed, once),
 *   then records the Host's answer (accepted, rejected or uncertain). A claim without an
 *   answer is itself uncertain delivery, and nothing moves a record back to none: an
 *   uncertain dispatch is never re-sent;
 * - fresh turn: the first agent tool call of the owner after an accepted dispatch;
 * - consume: wait_for_agent_events called by the owner for the Agent with exactly that cursor.
 * Accepted dispatch alone proves neither of the others.
 *
 * A card's pending events are the Agent's events after the furthest cursor
 * wait_for_agent_events has delivered to the owner (`refs.agent_event_reads`).
 */
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure, ToolInput, Result } from "@webcodex/contracts";
import type { Database, Principal } from "@webcodex/platform";
import type { AgentContinuation, AgentStore } from "./agent-store.js";

const schema = "refs";
/** Pending events shown on a card at most; pending_count says how many there are. */
export const CARD_EVENTS = 20;
const CURSOR = /^(0|[1-9][0-9]{0,17})$/;

export const AGENT_CONTINUATION_TOOLS = ["present_agent_continuation", "read_agent_continuation", "update_agent_continuation"] as const;
export type ContinuationFact = { subject: "agent"; id: string; fact: string };
type Json = Record<string, unknown>;
type ContinuationOutcome = Result<{ result: Json; facts: ContinuationFact[] }>;
/** A card's explicit target: the arguments read_agent_continuation and update_agent_continuation share. */
type CardTarget = ToolInput<"read_agent_continuation">;
/**
 * A handler for each continuation tool, taking that tool's arguments typed from its input schema.
 * (The function type is written out here, as for the agent tools' handlers.)
 */
type ContinuationHandlers = { [N in (typeof AGENT_CONTINUATION_TOOLS)[number]]: (p: Principal, args: ToolInput<N>) => Promise<ContinuationOutcome> };
/** A handler called with a call's arguments as they came over the wire (validated by the gateway). */
type WireContinuationHandler = (p: Principal, args: Json) => Promise<ContinuationOutcome>;

interface Row {
  dispatch: string;
  fresh_turn_at: Date | string | null;
  consumed_at: Date | string | null;
}

const iso = (v: unknown): string => (v instanceof Date ? v : new Date(String(v))).toISOString();

const recordNotFound = (): ToolFailure =>
  toolFailure(ReasonCode.invalidValue, PipelineStage.resolution, {
    detail_code: "continuation_not_found",
    message: "No agent continuation card was presented for this Endpoint generation and cursor.",
  });

export function createAgentContinuations(deps: { db: Database; agents: AgentStore }) {
  const { db, agents } = deps;
  /** Owners with an accepted dispatch and no fresh turn yet (per process; seeded from the table). */
  const awaiting = new Set<string>();
  const ownerKey = (p: Principal) => `${p.clientId}\u0000${p.subject}`;
  let seeded: Promise<void> | undefined;
  const seed = () =>
    (seeded ??= db
      .query<{ client_id: string; subject: string }>(
        `SELECT DISTINCT client_id, subject FROM ${schema}.agent_continuations WHERE dispatch = 'accepted' AND fresh_turn_at IS NULL`,
      )
      .then((r) => r.rows.forEach((x) => awaiting.add(`${x.client_id}\u0000${x.subject}`)))
      .catch(() => {
        seeded = undefined;
      }));

  /**
   * Delivered-cursor marks a woken wait did not wait for (it could consume nothing), per owner:
   * a card of that owner waits for them before it reads the mark, so a card presented on this
   * replica after a wait answered never shows that wait's events as pending.
   */
  const marking = new Map<string, Promise<unknown>>();
  const marked = (p: Principal) => marking.get(ownerKey(p));

  const keyOf = (p: Principal, c: AgentContinuation, cursor: string) => [p.clientId, p.subject, c.agentId, c.endpointId, c.controllerGeneration, cursor];
  const where = "client_id = $1 AND subject = $2 AND agent_id = $3 AND endpoint_id = $4 AND controller_generation = $5 AND after_cursor = $6";

  async function view(p: Principal, c: AgentContinuation, cursor: string): Promise<ContinuationOutcome> {
    await marked(p);
    const rec = (await db.query<Row>(`SELECT dispatch, fresh_turn_at, consumed_at FROM ${schema}.agent_continuations WHERE ${where}`, keyOf(p, c, cursor)))
      .rows[0];
    if (!rec) return { ok: false, failure: recordNotFound() };
    const [events, agent] = await Promise.all([
      db.query<{ seq: string; kind: string; task_id: string | null; attempt_id: string | null; at: Date | string }>(
        `SELECT seq, kind, task_id, attempt_id, at FROM ${schema}.agent_events WHERE agent_id = $1 AND seq > $2 ORDER BY seq LIMIT ${CARD_EVENTS}`,
        [c.agentId, cursor],
      ),
      db.query<{ last_event_seq: string }>(`SELECT last_event_seq FROM ${schema}.agents WHERE agent_id = $1`, [c.agentId]),
    ]);
    const last = BigInt(agent.rows[0]?.last_event_seq ?? cursor);
    return {
      ok: true,
      facts: [],
      result: {
        agent_id: c.agentId,
        endpoint_id: c.endpointId,
        controller_generation: c.controllerGeneration,
        after_cursor: cursor,
        pending_events: events.rows.map((e) => ({
          event_id: `${c.agentId}:${e.seq}`,
          kind: e.kind,
          ...(e.task_id ? { task_id: e.task_id } : {}),
          ...(e.attempt_id ? { attempt_id: e.attempt_id } : {}),
          at: iso(e.at),
        })),
        pending_count: Number(last > BigInt(cursor) ? last - BigInt(cursor) : 0n),
        continuation: {
          dispatch: rec.dispatch,
          fresh_turn: rec.fresh_turn_at !== null ? "observed" : "not_observed",
          consumed: rec.consumed_at !== null,
        },
      },
    };
  }

  /** The card's explicit target: the current Endpoint generation of an Agent of this owner, and a cursor. */
  async function cardTarget(p: Principal, args: CardTarget): Promise<Result<{ c: AgentContinuation; cursor: string }>> {
    const r = await agents.resolveContinuation(p, {
      ref: "",
      agentId: args.agent_id,
      endpointId: args.endpoint_id,
      expectedGeneration: args.expected_controller_generation,
    });
    if (!r.ok) return r;
    const cursor = args.after_cursor;
    if (!CURSOR.test(cursor)) return { ok: false, failure: recordNotFound() };
    return { ok: true, c: r.continuation, cursor };
  }

  async function present(p: Principal, args: ToolInput<"present_agent_continuation">): Promise<ContinuationOutcome> {
    const r = await agents.resolveContinuation(p, {
      ref: args.agent_continuation_ref ?? "",
      agentId: args.agent_id ?? "",
      endpointId: args.endpoint_id ?? "",
      expectedGeneration: args.expected_controller_generation ?? 0,
    });
    if (!r.ok) return r;
    const c = r.continuation;
    await marked(p);
    const read = await db.query<{ delivered_cursor: string }>(
      `SELECT delivered_cursor FROM ${schema}.agent_event_reads WHERE client_id = $1 AND subject = $2 AND agent_id = $3`,
      [p.clientId, p.subject, c.agentId],
    );
    const cursor = String(read.rows[0]?.delivered_cursor ?? "0");
    await db.query(
      `INSERT INTO ${schema}.agent_continuations (client_id, subject, agent_id, endpoint_id, controller_generation, after_cursor) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      keyOf(p, c, cursor),
    );
    return view(p, c, cursor);
  }

  async function update(p: Principal, args: ToolInput<"update_agent_continuation">): Promise<ContinuationOutcome> {
    const t = await cardTarget(p, args);
    if (!t.ok) return t;
    const { step } = args;
    const sql =
      step === "claim"
        ? `UPDATE ${schema}.agent_continuations SET dispatch = 'claimed', dispatch_at = now() WHERE ${where} AND dispatch = 'none'`
        : `UPDATE ${schema}.agent_continuations SET dispatch = $7, dispatch_at = now() WHERE ${where} AND dispatch = 'claimed'`;
    const res = await db.query(sql, step === "claim" ? keyOf(p, t.c, t.cursor) : [...keyOf(p, t.c, t.cursor), step]);
    const applied = (res.rowCount ?? 0) > 0;
    if (applied && step === "accepted") awaiting.add(ownerKey(p));
    const v = await view(p, t.c, t.cursor);
    if (!v.ok) return v;
    if (step === "claim" && !applied) {
      // Someone already claimed (or answered) this dispatch: never send a second message.
      return {
        ok: false,
        failure: toolFailure(ReasonCode.invalidValue, PipelineStage.preflight, {
          detail_code: "dispatch_already_claimed",
          evidence: { dispatch: (v.result["continuation"] as Json)["dispatch"] as string },
          message: "This continuation was already dispatched (or its delivery is uncertain); it is never sent twice.",
        }),
      };
    }
    return { ...v, facts: applied ? [{ subject: "agent", id: t.c.agentId, fact: step === "claim" ? "dispatch_claimed" : `dispatch_${step}` }] : [] };
  }

  async function read(p: Principal, args: ToolInput<"read_agent_continuation">): Promise<ContinuationOutcome> {
    const t = await cardTarget(p, args);
    return t.ok ? view(p, t.c, t.cursor) : t;
  }

  const handlers: ContinuationHandlers = { present_agent_continuation: present, read_agent_continuation: read, update_agent_continuation: update };

  /**
   * wait_for_agent_events ran for this owner: the consume of a dispatched continuation with exactly
   * its cursor, and the delivered cursor moving on.
   */
  async function consume(
    p: Principal,
    args: ToolInput<"wait_for_agent_events">,
    result: Json,
    facts: ContinuationFact[],
    mayConsume: boolean,
  ): Promise<ContinuationFact[]> {
    let agentId = args.agent_id ?? "";
    if (agentId === "") {
      const r = await agents.resolveContinuation(p, { ref: args.agent_continuation_ref ?? "", agentId: "", endpointId: "", expectedGeneration: 0 });
      if (!r.ok) return facts;
      agentId = r.continuation.agentId;
    }
    const after = args.after_cursor ?? "0";
    const cursor = result["cursor"];
    const moved = typeof cursor === "string" && CURSOR.test(cursor) && cursor !== after;
    // One statement (one round trip, one commit): the consume of a dispatched continuation
    // with exactly this cursor, and the delivered cursor moving on. A consume commits as the
    // server is configured (synchronously by default). When nothing was consumed, only the
    // delivered cursor moved, a mark that only rises and that a card uses to tell pending
    // events from delivered ones: that commit does not wait for its WAL flush
    // (synchronous_commit off for this transaction alone), so a woken wait is not held up by a
    // second disk flush. A database crash within a fraction of a second after it can only lower
    // the mark again: a card then shows events as pending that were already delivered, which
    // the owner's own cursor skips. No event and no consume is lost.
    const consumed = await db.query<{ consumed: boolean }>(
      `WITH consumed AS (
         UPDATE ${schema}.agent_continuations SET consumed_at = now()
         WHERE $7::boolean AND client_id = $1 AND subject = $2 AND agent_id = $3 AND after_cursor = $4 AND dispatch <> 'none' AND consumed_at IS NULL RETURNING 1
       ), delivered AS (
         INSERT INTO ${schema}.agent_event_reads (client_id, subject, agent_id, delivered_cursor) SELECT $1::text, $2::text, $3::text, $5::bigint WHERE $6::boolean
         ON CONFLICT (client_id, subject, agent_id) DO UPDATE SET delivered_cursor = GREATEST(${schema}.agent_event_reads.delivered_cursor, EXCLUDED.delivered_cursor)
         RETURNING 1
       )
       SELECT EXISTS (SELECT 1 FROM consumed) AS consumed, (SELECT count(*) FROM delivered) AS delivered,
         set_config('synchronous_commit', CASE WHEN EXISTS (SELECT 1 FROM consumed) THEN current_setting('synchronous_commit') ELSE 'off' END, true) AS commit_mode`,
      [p.clientId, p.subject, agentId, after, moved ? cursor : "0", moved, mayConsume],
    );
    if (consumed.rows[0]?.consumed) facts.push({ subject: "agent", id: agentId, fact: "consumed" });
    return facts;
  }

  return {
    isContinuationTool: (tool: string) => (AGENT_CONTINUATION_TOOLS as readonly string[]).includes(tool),

    /**
     * Runs present_agent_continuation or a card helper with the call's wire arguments (the one
     * place they are taken as the tool's ToolInput).
     */
    async call(p: Principal, tool: string, args: Json): Promise<ContinuationOutcome> {
      const handler = Object.hasOwn(handlers, tool) ? (handlers[tool as keyof ContinuationHandlers] as WireContinuationHandler) : undefined;
      if (!handler) throw new Error(`not an agent continuation tool: ${tool}`);
      return handler(p, args);
    },

    /**
     * Read as a wait_for_agent_events starts (beside it, not after it): whether a dispatched
     * continuation of this owner awaits its consume at the call's cursor (for any of the
     * owner's Agents when the call names a continuation ref). Only a wait that starts after the
     * dispatch can be the turn that dispatch caused; one already waiting when it was dispatched
     * does not consume it. Resolves true for every other tool, and when in doubt.
     */
    async mayConsume(p: Principal, tool: string, args: Json): Promise<boolean> {
      if (tool !== "wait_for_agent_events") return true;
      const after = typeof args["after_cursor"] === "string" ? args["after_cursor"] : "0";
      // The wait refuses a malformed cursor itself, and consumes nothing then.
      if (!CURSOR.test(after)) return true;
      const agentId = typeof args["agent_id"] === "string" ? args["agent_id"] : "";
      const r = await db.query<{ pending: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM ${schema}.agent_continuations WHERE client_id = $1 AND subject = $2 AND after_cursor = $3 AND dispatch <> 'none' AND consumed_at IS NULL AND ($4::text = '' OR agent_id = $4::text)) AS pending`,
        [p.clientId, p.subject, after, agentId],
      );
      return r.rows[0]?.pending ?? true;
    },

    /**
     * An agent tool call of this owner ran: the first one after an accepted dispatch is the
     * fresh turn; a successful wait_for_agent_events consumes the dispatched continuation with
     * exactly its cursor and moves the delivered cursor on. Returns the facts it recorded.
     * `mayConsume` is what mayConsume read as the call started: when false, the wait can
     * consume nothing, and its delivered-cursor mark is written after the call is answered
     * (cards of this owner on this replica wait for it).
     */
    async observe(p: Principal, tool: string, args: Json, result: Json | undefined, mayConsume = true): Promise<ContinuationFact[]> {
      const facts: ContinuationFact[] = [];
      await seed();
      if (awaiting.has(ownerKey(p))) {
        awaiting.delete(ownerKey(p));
        const marked = await db.query<{ agent_id: string }>(
          `UPDATE ${schema}.agent_continuations SET fresh_turn_at = now() WHERE client_id = $1 AND subject = $2 AND dispatch = 'accepted' AND fresh_turn_at IS NULL RETURNING agent_id`,
          [p.clientId, p.subject],
        );
        for (const r of marked.rows) facts.push({ subject: "agent", id: r.agent_id, fact: "fresh_turn_observed" });
      }
      if (tool !== "wait_for_agent_events" || result === undefined) return facts;
      // The one place wait_for_agent_events's wire arguments are taken as its ToolInput (validated by the gateway).
      const waitArgs = args as ToolInput<"wait_for_agent_events">;
      if (mayConsume) return consume(p, waitArgs, result, facts, true);
      const key = ownerKey(p);
      const mark = (marking.get(key) ?? Promise.resolve())
        .then(() => consume(p, waitArgs, result, [], false))
        // An observation that cannot be recorded never fails a call; a lost mark only shows
        // delivered events as pending on a card, which the owner's own cursor skips.
        .catch(() => undefined);
      marking.set(key, mark);
      void mark.then(() => {
        if (marking.get(key) === mark) marking.delete(key);
      });
      return facts;
    },
  };
}

export type AgentContinuations = ReturnType<typeof createAgentContinuations>;
