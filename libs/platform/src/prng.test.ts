import { test } from "node:test";
import assert from "node:assert/strict";
import { mulberry32 } from "./prng.test-support.js";

test("a seed replays the same sequence, a different seed does not, and every value is in [0, 1)", () => {
  const take = (seed: number) => {
    const next = mulberry32(seed);
    return Array.from({ length: 1000 }, () => next());
  };
  const a = take(0x5eed);
  assert.deepEqual(take(0x5eed), a);
  assert.notDeepEqual(take(0x5eee), a);
  assert.ok(a.every((v) => v >= 0 && v < 1));
  // Spread over the interval: each tenth gets a fair share of 1,000 draws.
  for (let d = 0; d < 10; d++) assert.ok(a.filter((v) => Math.floor(v * 10) === d).length > 60, `decile ${d}`);
});
