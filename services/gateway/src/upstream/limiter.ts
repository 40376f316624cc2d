/**
 * Per-upstream admission: at most `maxConcurrency` calls in flight, a bounded wait for a slot,
 * and a per-minute token bucket. Each upstream has its own, so one slow or hung upstream
 * holds only its own slots and never stalls calls to another upstream or to WebCodex.
 */

export type Admit = { ok: true; release: () => void } | { ok: false; reason: "rate_limited" | "queue_timeout" | "aborted"; retryAfterMs: number };

export interface UpstreamLimiter {
  acquire(signal?: AbortSignal): Promise<Admit>;
  inFlight(): number;
}

export function createUpstreamLimiter(o: { maxConcurrency: number; queueTimeoutMs: number; ratePerMinute: number; now?: () => number }): UpstreamLimiter {
  const now = o.now ?? Date.now;
  let active = 0;
  const waiting: Array<() => void> = [];
  // Token bucket: capacity = the per-minute rate (bursts up to one minute's worth).
  let tokens = o.ratePerMinute;
  let refilledAt = now();

  function takeToken(): number {
    if (o.ratePerMinute <= 0) return 0;
    const t = now();
    tokens = Math.min(o.ratePerMinute, tokens + ((t - refilledAt) * o.ratePerMinute) / 60_000);
    refilledAt = t;
    if (tokens >= 1) {
      tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - tokens) * 60_000) / o.ratePerMinute);
  }

  function release(): void {
    active -= 1;
    const next = waiting.shift();
    if (next) next();
  }

  async function acquire(signal?: AbortSignal): Promise<Admit> {
    const wait = takeToken();
    if (wait > 0) return { ok: false, reason: "rate_limited", retryAfterMs: wait };
    if (active < o.maxConcurrency) {
      active += 1;
      return { ok: true, release: once(release) };
    }
    return new Promise<Admit>((resolve) => {
      const grant = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        active += 1;
        resolve({ ok: true, release: once(release) });
      };
      const drop = (reason: "queue_timeout" | "aborted") => {
        const i = waiting.indexOf(grant);
        if (i >= 0) waiting.splice(i, 1);
        signal?.removeEventListener("abort", onAbort);
        resolve({ ok: false, reason, retryAfterMs: o.queueTimeoutMs });
      };
      const onAbort = () => {
        clearTimeout(timer);
        drop("aborted");
      };
      const timer = setTimeout(() => drop("queue_timeout"), o.queueTimeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      waiting.push(grant);
    });
  }

  return { acquire, inFlight: () => active };
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
