/**
 * Rate limits per principal with a tenant ceiling: one token bucket per (tenant, subject),
 * refilled continuously at the per-principal rate, and one per tenant at its ceiling. A call
 * needs a token from both: one person cannot starve the others of their tenant, and the
 * tenant as a whole stays under its ceiling. A denied call is a structured `rate_limited`
 * failure that says when to retry and which limit it hit; nothing ran.
 *
 * Buckets live in process memory: with N gateway replicas behind a load balancer a caller
 * gets up to N times its limit. That bounds abuse per replica without a shared store on the
 * hot path.
 */
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

export interface RateLimitOptions {
  /** Calls per minute per principal (tenant, subject); 0: no per-principal limit. */
  perMinute: number;
  /** Bucket size (calls that may arrive at once); default: the bucket's per-minute rate, at least 1. */
  burst?: number;
  /** Calls per minute per tenant, all its principals together; 0 or absent: no ceiling. */
  tenantPerMinute?: number;
  /** Per-tenant ceilings, overriding `tenantPerMinute` (0 = no ceiling for that tenant). */
  perClient?: Readonly<Record<string, number>>;
  /** Clock in ms (tests). */
  now?: () => number;
  /** Idle, full buckets are dropped once more than this many are tracked. */
  maxTrackedTenants?: number;
}

/** Which limit refused a call. */
export type RateScope = "principal" | "tenant";

export type RateDecision = { ok: true } | { ok: false; retryAfterMs: number; limitPerMinute: number; scope: RateScope };

export interface RateLimited {
  readonly clientId: string;
  readonly subject: string;
}

export interface RateLimiter {
  /** Takes one call from the principal's bucket and its tenant's. */
  take(principal: RateLimited): RateDecision;
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
  for (const part of (text ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.lastIndexOf("=");
    const client = part.slice(0, eq).trim();
    const n = Number(part.slice(eq + 1));
    if (eq <= 0 || !client || !Number.isInteger(n) || n < 0) throw new Error(`rate limit override ${JSON.stringify(part)} must be client=calls_per_minute`);
    out[client] = n;
  }
  return out;
}

/** One family of buckets keyed by string, each with its own per-minute rate. */
function bucketFamily(options: RateLimitOptions, limitFor: (key: string) => number) {
  const now = options.now ?? (() => performance.now());
  const maxTracked = options.maxTrackedTenants ?? 10_000;
  const buckets = new Map<string, Bucket>();
  const burstFor = (perMinute: number) => Math.max(1, options.burst ?? perMinute);
  const refill = (b: Bucket, perMinute: number, t: number) => {
    b.tokens = Math.min(burstFor(perMinute), b.tokens + ((t - b.updatedMs) * perMinute) / 60_000);
    b.updatedMs = t;
  };
  function sweep(t: number) {
    for (const [id, b] of buckets) {
      const perMinute = limitFor(id);
      if (perMinute === 0 || b.tokens + ((t - b.updatedMs) * perMinute) / 60_000 >= burstFor(perMinute)) buckets.delete(id);
    }
  }
  return {
    /** Takes a token; the decision, and a refund should a later check refuse the call. */
    take(key: string): { decision: RateDecision; refund: () => void } {
      const perMinute = limitFor(key);
      if (perMinute <= 0) return { decision: { ok: true }, refund: () => {} };
      const t = now();
      let bucket = buckets.get(key);
      if (!bucket) {
        if (buckets.size >= maxTracked) sweep(t);
        bucket = { tokens: burstFor(perMinute), updatedMs: t };
        buckets.set(key, bucket);
      }
      refill(bucket, perMinute, t);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        const b = bucket;
        return {
          decision: { ok: true },
          refund: () => {
            b.tokens = Math.min(burstFor(perMinute), b.tokens + 1);
          },
        };
      }
      const retryAfterMs = Math.max(1, Math.ceil(((1 - bucket.tokens) * 60_000) / perMinute));
      return { decision: { ok: false, retryAfterMs, limitPerMinute: perMinute, scope: "principal" }, refund: () => {} };
    },
  };
}

export function createRateLimiter(options: RateLimitOptions): RateLimiter {
  const principals = bucketFamily(options, () => options.perMinute);
  const tenants = bucketFamily(options, (clientId) => options.perClient?.[clientId] ?? options.tenantPerMinute ?? 0);
  return {
    take(principal) {
      const own = principals.take(`${principal.clientId}\u0000${principal.subject}`);
      if (!own.decision.ok) return { ...own.decision, scope: "principal" };
      const tenant = tenants.take(principal.clientId);
      if (tenant.decision.ok) return { ok: true };
      own.refund();
      return { ...tenant.decision, scope: "tenant" };
    },
  };
}

/** The model-facing failure of a denied call. */
export function rateLimitedFailure(decision: { retryAfterMs: number; limitPerMinute: number; scope: RateScope }): RateLimitedFailure {
  const tenant = decision.scope === "tenant";
  return {
    ...toolFailure(ReasonCode.rateLimited, PipelineStage.admission, {
      detail_code: tenant ? "tenant_rate_limit" : "principal_rate_limit",
      evidence: { retry_after_ms: decision.retryAfterMs, limit_per_minute: decision.limitPerMinute },
      message: `Too many tool calls ${tenant ? "for this tenant" : "from you"}; nothing ran. Retry after ${decision.retryAfterMs} ms.`,
    }),
    retry_after_ms: decision.retryAfterMs,
  };
}

/**
 * Pipeline hook: takes one call from the caller's buckets and returns the rate_limited
 * failure when one is empty, or undefined when the call may proceed.
 */
export function admitRate(limiter: RateLimiter | undefined, principal: RateLimited): RateLimitedFailure | undefined {
  if (!limiter) return undefined;
  const decision = limiter.take(principal);
  return decision.ok ? undefined : rateLimitedFailure(decision);
}

/** Seconds for an HTTP Retry-After header (at least 1). */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1000)));
