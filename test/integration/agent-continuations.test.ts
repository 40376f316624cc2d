/**
 * Agent continuation records in the ref-resolver on real Postgres, through CallAgentTool as
 * the gateway calls it: the one dispatch is claimed before it is sent and never claimed
 * twice; an uncertain or unanswered dispatch is never re-armed; the fresh turn is observed
 * only after an accepted dispatch and the consume only for a wait with exactly the card's
 * cursor; each fact is reported once, for the call's audit row; a later card starts after the
 * delivered events; another principal's Agent is answered like an unknown one.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@connectrpc/connect";
import { RefResolverService } from "@webcodex/proto";
import { createInProcessClient, createPostgresDatabase, principalHeaders } from "@webcodex/platform";
import type { Database, Principal } from "@webcodex/platform";
import { createRefResolver, migrateRefResolver } from "@webcodex/ref-resolver";
import { createTestDatabase, quietWindow } from "../support/index.js";
import type { TestDatabase } from "../support/index.js";

type RefClient = Client<typeof RefResolverService>;
type Json = Record<string, unknown>;
const as = (p: Principal) => ({ headers: principalHeaders(p) });
const lead: Principal = { clientId: "acme", subject: "lead" };
const other: Principal = { clientId: "acme", subject: "other" };

async function call(client: RefClient, p: Principal, tool: string, args: Json) {
  const res = await client.callAgentTool({ tool, argumentsJson: JSON.stringify(args) }, as(p));
  return {
    result: res.resultJson ? (JSON.parse(res.resultJson) as Json) : undefined,
    failure: res.failure ? { reasonCode: res.failure.reasonCode, detailCode: res.failure.detailCode } : undefined,
    facts: res.continuationFacts.map((f) => `${f.subject}:${f.fact}`),
  };
}

describe("agent continuation records on Postgres", () => {
  let database: TestDatabase;
  let db: Database;
  let client: RefClient;
  let taskN = 0;

  const newAgent = async () => {
    const a = (await call(client, lead, "create_agent", { name: "lead" })).result as Json;
    const target = { agent_id: a["agent_id"], endpoint_id: a["endpoint_id"], expected_controller_generation: a["controller_generation"] };
    const assign = async () => {
      const t = await call(client, lead, "create_agent_task", {
        project: "agent:acme:app",
        title: "t",
        instructions: "i",
        assignee_agent_id: a["agent_id"],
        idempotency_key: `k${++taskN}`,
      });
      assert.equal(t.failure, undefined, JSON.stringify(t.failure));
    };
    return { a, target, assign };
  };

  before(async () => {
    database = await createTestDatabase();
    db = createPostgresDatabase({ url: database.url, max: 10 });
    await migrateRefResolver(db);
    client = createInProcessClient(RefResolverService, createRefResolver({ db }));
    await client.registerProject({ clientId: "acme", projectId: "app", rootIdentity: "/srv/app", name: "app" }, as({ clientId: "acme", subject: "runner:r1" }));
  });
  after(async () => {
    await db.close();
    await database.drop();
  });

  it("an accepted dispatch: one claim, then the fresh turn and the exact consume, each recorded and reported once", async () => {
    const { a, target, assign } = await newAgent();
    const presented = await call(client, lead, "present_agent_continuation", { agent_continuation_ref: a["agent_continuation_ref"] });
    assert.deepEqual(
      [presented.result?.["after_cursor"], presented.result?.["pending_count"], presented.result?.["continuation"]],
      ["0", 0, { dispatch: "none", fresh_turn: "not_observed", consumed: false }],
    );
    const card = { ...target, after_cursor: "0" };
    await assign();
    const read = await call(client, lead, "read_agent_continuation", card);
    assert.deepEqual([read.result?.["pending_count"], (read.result?.["pending_events"] as Json[]).map((e) => e["kind"])], [1, ["task_assigned"]]);
    // Nothing is observed before a dispatch: neither a model call nor a wait with the cursor.
    const early = await call(client, lead, "wait_for_agent_events", { agent_id: a["agent_id"], after_cursor: "1", wait_ms: 0 });
    assert.deepEqual(early.facts, []);

    const claim = await call(client, lead, "update_agent_continuation", { ...card, step: "claim" });
    assert.deepEqual(claim.facts, ["agent:dispatch_claimed"]);
    const second = await call(client, lead, "update_agent_continuation", { ...card, step: "claim" });
    assert.deepEqual([second.failure?.detailCode, second.facts], ["dispatch_already_claimed", []]);
    const accepted = await call(client, lead, "update_agent_continuation", { ...card, step: "accepted" });
    assert.deepEqual(
      [(accepted.result?.["continuation"] as Json)["dispatch"], (accepted.result?.["continuation"] as Json)["fresh_turn"], accepted.facts],
      ["accepted", "not_observed", ["agent:dispatch_accepted"]],
    );
    assert.equal((await call(client, lead, "update_agent_continuation", { ...card, step: "uncertain" })).result?.["continuation"] !== undefined, true);
    assert.equal(
      ((await call(client, lead, "read_agent_continuation", card)).result?.["continuation"] as Json)["dispatch"],
      "accepted",
      "an answer is recorded once",
    );

    // Another principal's call is not this owner's fresh turn.
    assert.deepEqual((await call(client, other, "list_agent_tasks", {})).facts, []);
    // The owner's next agent call is the fresh turn; it is not a consume.
    const turn = await call(client, lead, "list_agent_tasks", {});
    assert.deepEqual(turn.facts, ["agent:fresh_turn_observed"]);
    assert.deepEqual((await call(client, lead, "read_agent_continuation", card)).result?.["continuation"], {
      dispatch: "accepted",
      fresh_turn: "observed",
      consumed: false,
    });
    // A wait with another cursor is not the exact consume.
    assert.deepEqual((await call(client, lead, "wait_for_agent_events", { agent_id: a["agent_id"], after_cursor: "1", wait_ms: 0 })).facts, []);
    const consume = await call(client, lead, "wait_for_agent_events", { agent_continuation_ref: a["agent_continuation_ref"], after_cursor: "0" });
    assert.deepEqual(consume.facts, ["agent:consumed"]);
    assert.deepEqual((await call(client, lead, "wait_for_agent_events", { agent_id: a["agent_id"], after_cursor: "0" })).facts, [], "consumed once");
    assert.deepEqual((await call(client, lead, "read_agent_continuation", card)).result?.["continuation"], {
      dispatch: "accepted",
      fresh_turn: "observed",
      consumed: true,
    });

    // The next card starts after the delivered events.
    const next = await call(client, lead, "present_agent_continuation", target);
    assert.deepEqual([next.result?.["after_cursor"], next.result?.["pending_count"]], ["1", 0]);
  });

  it("a wait already waiting when the dispatch is claimed is not its consume; the wait the dispatched turn starts is, and a card after a woken wait starts after its events", async () => {
    const { a, target, assign } = await newAgent();
    await call(client, lead, "present_agent_continuation", target);
    const card = { ...target, after_cursor: "0" };
    const waiting = call(client, lead, "wait_for_agent_events", { agent_id: a["agent_id"], after_cursor: "0", wait_ms: 10_000 });
    let settled = false;
    void waiting.then(() => (settled = true));
    await quietWindow(300, "the wait has started and keeps waiting: nothing is in the log yet");
    assert.equal(settled, false, "the wait is still waiting when the dispatch is claimed");
    assert.deepEqual((await call(client, lead, "update_agent_continuation", { ...card, step: "claim" })).facts, ["agent:dispatch_claimed"]);
    assert.deepEqual((await call(client, lead, "update_agent_continuation", { ...card, step: "accepted" })).facts, ["agent:dispatch_accepted"]);
    await assign();
    const woken = await waiting;
    assert.deepEqual(
      [woken.result?.["wait_state"], woken.result?.["cursor"], woken.facts],
      ["ready", "1", ["agent:fresh_turn_observed"]],
      "the woken wait answers the event and is the first call after the accepted dispatch, not its consume",
    );
    assert.equal(((await call(client, lead, "read_agent_continuation", card)).result?.["continuation"] as Json)["consumed"], false);
    // A card presented right after the woken wait answered starts after the events it delivered.
    const next = await call(client, lead, "present_agent_continuation", target);
    assert.deepEqual([next.result?.["after_cursor"], next.result?.["pending_count"]], ["1", 0]);
    const turn = await call(client, lead, "wait_for_agent_events", { agent_continuation_ref: a["agent_continuation_ref"], after_cursor: "0", wait_ms: 0 });
    assert.deepEqual(turn.facts, ["agent:consumed"]);
    assert.equal(((await call(client, lead, "read_agent_continuation", card)).result?.["continuation"] as Json)["consumed"], true);
  });

  it("an uncertain or unanswered dispatch is never re-armed and observes no fresh turn; another principal cannot see or claim it", async () => {
    const { target, assign } = await newAgent();
    await call(client, lead, "present_agent_continuation", target);
    await assign();
    const card = { ...target, after_cursor: "0" };
    assert.deepEqual((await call(client, lead, "update_agent_continuation", { ...card, step: "claim" })).facts, ["agent:dispatch_claimed"]);
    // The card died after claiming: the claim itself stands for uncertain delivery.
    assert.equal((await call(client, lead, "update_agent_continuation", { ...card, step: "claim" })).failure?.detailCode, "dispatch_already_claimed");
    assert.deepEqual((await call(client, lead, "update_agent_continuation", { ...card, step: "uncertain" })).facts, ["agent:dispatch_uncertain"]);
    // Presenting again finds the same record, still uncertain: nothing to send.
    const again = await call(client, lead, "present_agent_continuation", target);
    assert.equal((again.result?.["continuation"] as Json)["dispatch"], "uncertain");
    assert.equal((await call(client, lead, "update_agent_continuation", { ...card, step: "claim" })).failure?.detailCode, "dispatch_already_claimed");
    assert.deepEqual((await call(client, lead, "list_agent_tasks", {})).facts, [], "no fresh turn without an accepted dispatch");
    const r = await db.query<{ dispatch: string; fresh_turn_at: unknown }>(`SELECT dispatch, fresh_turn_at FROM refs.agent_continuations WHERE agent_id = $1`, [
      target.agent_id,
    ]);
    assert.deepEqual(r.rows, [{ dispatch: "uncertain", fresh_turn_at: null }]);

    // Another principal of the tenant: the same answer as for an Agent that does not exist.
    const foreign = await call(client, other, "read_agent_continuation", card);
    const unknown = await call(client, other, "read_agent_continuation", { ...card, agent_id: "wc_agent_00000000000000000000000000000000" });
    assert.deepEqual(foreign.failure, unknown.failure);
    assert.ok(foreign.failure !== undefined);
    assert.equal((await call(client, other, "update_agent_continuation", { ...card, step: "accepted" })).failure?.reasonCode, foreign.failure.reasonCode);
  });

  it("the database refuses a fresh turn without an accepted dispatch and a consume without a dispatch", async () => {
    const { target } = await newAgent();
    await call(client, lead, "present_agent_continuation", target);
    const key = [target.agent_id];
    await assert.rejects(db.query(`UPDATE refs.agent_continuations SET fresh_turn_at = now() WHERE agent_id = $1`, key), /check constraint/);
    await assert.rejects(db.query(`UPDATE refs.agent_continuations SET consumed_at = now() WHERE agent_id = $1`, key), /check constraint/);
  });
});
