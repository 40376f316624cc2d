/** A deterministic PRNG (mulberry32) for the fault harnesses and the benchmarks (test support: not in the images): a seed replays the same sequence, so a failing fault run can be repeated and a benchmark samples the same keys each run. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
