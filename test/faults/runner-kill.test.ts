/**
 * kill -9 a real Runner process during multi-file transactions: with the write journal every
 * transaction is fully applied or fully absent after the restart, and what the caller was told
 * matches; without recovery the same harness finds partial transactions. WEBCODEX_FAULTS_KILLS
 * sets the number of kills (`make faults` runs 1,000; `make test` a bounded sample);
 * WEBCODEX_FAULTS_KILL_SHARDS runs them as that many harnesses side by side (each its own
 * workspace and Runner process), which only shortens the wall time.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runKillHarness, type KillRunFigures } from "./kill-harness.js";
import { recordFigures } from "./figures.js";

const kills = Number(process.env["WEBCODEX_FAULTS_KILLS"] ?? 10);
const shards = Math.max(1, Math.min(kills, Number(process.env["WEBCODEX_FAULTS_KILL_SHARDS"] ?? 1)));

/** Sums the counts of side-by-side runs; restart times come from all their samples. */
function merge(runs: KillRunFigures[], restarts: number[]): KillRunFigures {
  const out = { ...runs[0] } as KillRunFigures & Record<string, unknown>;
  for (const key of Object.keys(out) as Array<keyof KillRunFigures>) {
    if (typeof out[key] === "number") (out as Record<string, number>)[key] = runs.reduce((sum, r) => sum + (r[key] as number), 0);
  }
  out.problems = runs.flatMap((r) => r.problems);
  const sorted = [...restarts].sort((a, b) => a - b);
  out.restart_ms_p50 = Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0);
  out.restart_ms_max = Math.round(sorted[sorted.length - 1] ?? 0);
  return out;
}

describe("Runner killed with SIGKILL during write transactions", () => {
  it(
    `${kills} kills: every transaction is fully applied or fully absent, and the caller's view matches`,
    { timeout: Math.max(120_000, (kills / shards) * 20_000) },
    async () => {
      const seed = Number(process.env["WEBCODEX_FAULTS_SEED"] ?? Date.now() % 100_000);
      const restarts: number[] = [];
      const latest: KillRunFigures[] = [];
      const figuresList = await Promise.all(
        Array.from({ length: shards }, (_, s) =>
          runKillHarness({
            transactions: Math.floor(kills / shards) + (s < kills % shards ? 1 : 0),
            recover: true,
            seed: seed + s,
            restartSamples: restarts,
            // Judged so far (the transaction in flight at a checkpoint is judged after the next restart).
            onCheckpoint: (partial) => {
              latest[s] = partial;
              return recordFigures("runner_kill", {
                ...merge(
                  latest.filter((f) => f !== undefined),
                  restarts,
                ),
                run_complete: false,
                kills_planned: kills,
                shards,
                seed,
              });
            },
          }),
        ),
      );
      const figures = merge(figuresList, restarts);
      await recordFigures("runner_kill", { ...figures, run_complete: true, kills_planned: kills, shards, seed });
      assert.deepEqual(figures.problems, []);
      assert.equal(figures.partial, 0);
      assert.equal(figures.misreported, 0);
      assert.equal(figures.recovery_mismatches, 0);
      assert.equal(figures.unreported_applied, 0, "a call cut off after its changes landed is reported by recovery");
      assert.equal(figures.leftover_temp_files, 0, "recovery removes the temp files a killed transaction left");
      assert.equal(figures.applied + figures.absent, kills);
      assert.ok(figures.killed_mid_call > 0, "some kills landed during a call");
    },
  );

  it("the journal is needed: with recovery off, the same harness finds a partial transaction", { timeout: 480_000 }, async () => {
    // It stops at the first partial transaction; a fast apply phase leaves a narrow window, so
    // up to 120 kills are tried before the control is judged to have found none.
    const figures = await runKillHarness({ transactions: 120, recover: false, stopOnPartial: true, seed: 7 });
    await recordFigures("runner_kill_without_recovery", figures);
    assert.ok(figures.partial > 0, `no partial transaction in ${figures.transactions_tried} kills without recovery`);
  });
});
