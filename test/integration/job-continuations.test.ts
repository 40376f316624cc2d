/**
 * Job continuation records on Postgres: the one dispatch is claimed before it is sent and
 * never claimed twice; an uncertain or unanswered dispatch is never re-armed; a fresh turn is
 * observed only after an accepted dispatch, and consume only after a dispatch; the three are
 * separate facts.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createJobContinuationStore } from "@webcodex/runner-broker";
import { createBrokerTestDatabase } from "../support/index.js";
import type { BrokerTestDatabase } from "../support/index.js";

const project = "agent:acme:demo";

describe("job continuation records", () => {
  let tdb: BrokerTestDatabase;
  before(async () => {
    tdb = await createBrokerTestDatabase();
  });
  after(async () => tdb?.close());

  it("an accepted dispatch: one claim, then fresh turn and consume observed separately, once", async () => {
    const store = createJobContinuationStore({ db: tdb.db });
    const key = { projectCanonicalId: project, jobId: "job_a" };
    const presented = await store.apply(key, "acme", "present");
    assert.equal(presented.record?.dispatch, "none");
    assert.equal((await store.apply(key, "acme", "present")).applied, false, "presenting again keeps the record");
    // Nothing is observed before a dispatch.
    await store.observeModelCall(project);
    await store.observeConsume(key);
    let r = await store.get(key);
    assert.deepEqual([r?.freshTurnAtMs, r?.consumedAtMs], [undefined, undefined]);

    assert.equal((await store.apply(key, "acme", "claim")).applied, true);
    assert.equal((await store.apply(key, "acme", "claim")).applied, false, "a second claim is refused");
    assert.equal((await store.apply(key, "acme", "accepted")).record?.dispatch, "accepted");
    r = await store.get(key);
    assert.equal(r?.freshTurnAtMs, undefined, "an accepted dispatch is not a fresh turn");
    assert.deepEqual(await store.observeModelCall(project), ["job_a"], "the fresh turn names the Job it continued (for the audit row)");
    r = await store.get(key);
    assert.ok(r?.freshTurnAtMs !== undefined && r.consumedAtMs === undefined, "a fresh turn is not a consume");
    const firstTurn = r.freshTurnAtMs;
    assert.equal(await store.observeConsume(key), true);
    assert.equal(await store.observeConsume(key), false, "consumed once");
    assert.deepEqual(await store.observeModelCall(project), []);
    r = await store.get(key);
    assert.ok(r?.consumedAtMs !== undefined);
    assert.equal(r.freshTurnAtMs, firstTurn, "the fresh turn is recorded once");
    assert.equal((await store.apply(key, "acme", "accepted")).applied, false, "an answer is recorded once");
  });

  it("an uncertain or unanswered dispatch is never re-armed, and observes no fresh turn", async () => {
    const store = createJobContinuationStore({ db: tdb.db });
    const unanswered = { projectCanonicalId: project, jobId: "job_b" };
    await store.apply(unanswered, "acme", "present");
    await store.apply(unanswered, "acme", "claim");
    // The card died after claiming: the claim itself stands for uncertain delivery.
    assert.equal((await store.apply(unanswered, "acme", "claim")).applied, false);
    const uncertain = { projectCanonicalId: project, jobId: "job_c" };
    await store.apply(uncertain, "acme", "present");
    await store.apply(uncertain, "acme", "claim");
    assert.equal((await store.apply(uncertain, "acme", "uncertain")).record?.dispatch, "uncertain");
    assert.equal((await store.apply(uncertain, "acme", "claim")).applied, false, "never sent again");
    assert.equal((await store.apply(uncertain, "acme", "accepted")).applied, false, "an answer needs an open claim");
    await store.observeModelCall(project);
    assert.equal((await store.get(uncertain))?.freshTurnAtMs, undefined);
  });

  it("another tenant cannot advance or read a record through apply", async () => {
    const store = createJobContinuationStore({ db: tdb.db });
    const key = { projectCanonicalId: project, jobId: "job_d" };
    await store.apply(key, "acme", "present");
    const foreign = await store.apply(key, "globex", "claim");
    assert.deepEqual([foreign.applied, foreign.record], [false, undefined]);
    assert.equal((await store.get(key))?.dispatch, "none");
  });

  it("a restarted broker still observes the fresh turn of a dispatch accepted before", async () => {
    const key = { projectCanonicalId: "agent:acme:other", jobId: "job_e" };
    const before = createJobContinuationStore({ db: tdb.db });
    await before.apply(key, "acme", "present");
    await before.apply(key, "acme", "claim");
    await before.apply(key, "acme", "accepted");
    const after = createJobContinuationStore({ db: tdb.db });
    await after.observeModelCall("agent:acme:other");
    assert.ok((await after.get(key))?.freshTurnAtMs !== undefined);
  });
});
