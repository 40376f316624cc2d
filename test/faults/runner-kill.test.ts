/**
 * kill -9 a real Runner process during multi-file transactions: with the write journal every
 * transaction is fully applied or fully absent after the restart, and what the caller was told
 * matches; without recovery the same harness finds partial transactions. WEBCODEX_FAULTS_KILLS
 * sets the number of kills (`make faults` runs 1,000; `make test` a bounded sample).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runKillHarness } from "./kill-harness.js";
import { recordFigures } from "./figures.js";

const kills = Number(process.env["WEBCODEX_FAULTS_KILLS"] ?? 10);

describe("Runner killed with SIGKILL during write transactions", () => {
  it(`${kills} kills: every transaction is fully applied or fully absent, and the caller's view matches`, { timeout: Math.max(120_000, kills * 5_000) }, async () => {
    const figures = await runKillHarness({
      transactions: kills, recover: true, seed: Number(process.env["WEBCODEX_FAULTS_SEED"] ?? Date.now() % 100_000),
      // Judged so far (the transaction in flight at a checkpoint is judged after the next restart).
      onCheckpoint: (partial) => recordFigures("runner_kill", { ...partial, run_complete: false, kills_planned: kills }),
    });
    await recordFigures("runner_kill", { ...figures, run_complete: true, kills_planned: kills });
    assert.deepEqual(figures.problems, []);
    assert.equal(figures.partial, 0);
    assert.equal(figures.misreported, 0);
    assert.equal(figures.recovery_mismatches, 0);
    assert.equal(figures.leftover_temp_files, 0, "recovery removes the temp files a killed transaction left");
    assert.equal(figures.applied + figures.absent, kills);
    assert.ok(figures.killed_mid_call > 0, "some kills landed during a call");
  });

  it("the journal is needed: with recovery off, the same harness finds a partial transaction", { timeout: 180_000 }, async () => {
    const figures = await runKillHarness({ transactions: 40, recover: false, stopOnPartial: true, seed: 7 });
    await recordFigures("runner_kill_without_recovery", figures);
    assert.ok(figures.partial > 0, `no partial transaction in ${figures.transactions_tried} kills without recovery`);
  });
});
