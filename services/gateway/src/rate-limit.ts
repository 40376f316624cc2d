/**
 * Per-tenant rate limits: one token bucket per client id, refilled continuously at the
 * tenant's per-minute rate, holding at most `burst` calls. A denied call is a structured
 * `rate_limited` failure that says when to retry; nothing ran.
 *
 * Buckets live in process memory: with N gateway replicas behind a load balancer a tenant
 * gets up to N times its limit. That bounds abuse per replica without a shared store on the
 * hot path.
 */
import { FailureStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

export interface RateLimitOptions {
  /** Calls per minute per tenant; 0 disables the limit for tenants without an override. */
  perMinute: number;
  /** Bucket size (calls that may arrive at once); default: the per-minute rate, at least 1. */
  burst?: number;
  /** Per-tenant calls per minute, overriding `perMinute` (0 = unlimited for that tenant). */
  perClient?: Readonly<Record<string, number>>;
  /** Clock in ms (tests). */
  now?: () => number;
  /** Idle, full buckets are dropped once more than this many tenants are tracked. */
  maxTrackedTenants?: number;
}

export type RateDecision =
  | { ok: true }
  | { ok: false; retryAfterMs: number; limitPerMinute: number };

export interface RateLimiter {
  /** Takes one call from the tenant's bucket. */
  take(clientId: string): RateDecision;
}

/** A rate_limited failure carries when to retry, top-level and in evidence. */
export type RateLimitedFailure = ToolFailure & { retry_after_ms: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/** Parses `client=perMinute` pairs separated by commas, e.g. `acme=120,trial-co=10`. */
export function parseRateLimitOverrides(text: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of (text ?? "").split(",").map((p) => p.trim()).filter(Boolean)) {
    const eq = part.lastIndexOf("=");
    const client = part.slice(0, eq).trim();
    const n = Number(part.slice(eq + 1));
    if (eq <= 0 || !client || !Number.isInteger(n) || n < 0) throw new Error(`rate limit override ${JSON.stringify(part)} must be client=calls_per_minute`);
    out[client] = n;
  }
  return out;
}

export function createRateLimiter(options: RateLimitOptions): RateLimiter {
  const now = options.now ?? (() => performance.now());
  const maxTracked = options.maxTrackedTenants ?? 10_000;
  const buckets = new Map<string, Bucket>();
  const limitFor = (clientId: string) => options.perClient?.[clientId] ?? options.perMinute;
  const burstFor = (perMinute: number) => Math.max(1, options.burst ?? perMinute);

  function sweep(t: number) {
    for (const [id, b] of buckets) {
      const perMinute = limitFor(id);
      if (perMinute === 0 || b.tokens + ((t - b.updatedMs) * perMinute) / 60_000 >= burstFor(perMinute)) buckets.delete(id);
    }
  }

  return {
    take(clientId) {
      const perMinute = limitFor(clientId);
      if (perMinute <= 0) return { ok: true };
      const burst = burstFor(perMinute);
      const t = now();
      let bucket = buckets.get(clientId);
      if (!bucket) {
        if (buckets.size >= maxTracked) sweep(t);
        bucket = { tokens: burst, updatedMs: t };
        buckets.set(clientId, bucket);
      }
      bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.updatedMs) * perMinute) / 60_000);
      bucket.updatedMs = t;
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { ok: true };
      }
      return { ok: false, retryAfterMs: Math.max(1, Math.ceil(((1 - bucket.tokens) * 60_000) / perMinute)), limitPerMinute: perMinute };
    },
  };
}

/** The model-facing failure of a denied call. */
export function rateLimitedFailure(decision: { retryAfterMs: number; limitPerMinute: number }): RateLimitedFailure {
  return {
    ...toolFailure(ReasonCode.rateLimited, FailureStage.admission, {
      detail_code: "tenant_rate_limit",
      evidence: { retry_after_ms: decision.retryAfterMs, limit_per_minute: decision.limitPerMinute },
      message: `Too many tool calls for this tenant; nothing ran. Retry after ${decision.retryAfterMs} ms.`,
    }),
    retry_after_ms: decision.retryAfterMs,
  };
}

/**
 * Pipeline hook: takes one call from the caller's bucket and returns the rate_limited failure
 * when the bucket is empty, or undefined when the call may proceed.
 */
export function admitRate(limiter: RateLimiter | undefined, clientId: string): RateLimitedFailure | undefined {
  if (!limiter) return undefined;
  const decision = limiter.take(clientId);
  return decision.ok ? undefined : rateLimitedFailure(decision);
}

/** Seconds for an HTTP Retry-After header (at least 1). */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1000)));
