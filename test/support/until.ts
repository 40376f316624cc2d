import { setTimeout as sleep } from "node:timers/promises";

/** Polls `fn` until it returns a truthy value (returned), or fails naming `what` after `timeoutMs`. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, stepMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(stepMs);
  }
}

/**
 * The one kind of fixed wait a test may hold: a window in which something must NOT happen
 * (no second message, no early exit). `why` names what the window proves. Anything that waits
 * FOR something uses until() or an event instead.
 */
export async function quietWindow(ms: number, why: string): Promise<void> {
  if (!why) throw new Error("quietWindow needs the reason for its fixed wait");
  await sleep(ms);
}
