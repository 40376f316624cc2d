import { test } from "node:test";
import assert from "node:assert/strict";
import { admitRate, createRateLimiter, parseRateLimitOverrides, rateLimitedFailure, retryAfterSeconds } from "./rate-limit.js";

test("a tenant gets its burst at once, then one call per refill interval", () => {
  let t = 0;
  const limiter = createRateLimiter({ perMinute: 60, burst: 2, now: () => t });
  assert.deepEqual(limiter.take("a"), { ok: true });
  assert.deepEqual(limiter.take("a"), { ok: true });
  assert.deepEqual(limiter.take("a"), { ok: false, retryAfterMs: 1000, limitPerMinute: 60 });
  t = 400;
  assert.deepEqual(limiter.take("a"), { ok: false, retryAfterMs: 600, limitPerMinute: 60 });
  t = 1000;
  assert.deepEqual(limiter.take("a"), { ok: true });
});

test("tenants have separate buckets and overrides win (0 = unlimited)", () => {
  const limiter = createRateLimiter({ perMinute: 1, perClient: { vip: 0, small: 2 }, now: () => 0 });
  assert.equal(limiter.take("a").ok, true);
  assert.equal(limiter.take("a").ok, false);
  assert.equal(limiter.take("b").ok, true, "another tenant is not affected");
  for (let i = 0; i < 100; i++) assert.equal(limiter.take("vip").ok, true);
  assert.equal(limiter.take("small").ok, true);
  assert.equal(limiter.take("small").ok, true);
  assert.equal(limiter.take("small").ok, false);
});

test("perMinute 0 disables the limit", () => {
  const limiter = createRateLimiter({ perMinute: 0 });
  for (let i = 0; i < 1000; i++) assert.equal(limiter.take("a").ok, true);
});

test("idle full buckets are dropped when many tenants are tracked", () => {
  let t = 0;
  const limiter = createRateLimiter({ perMinute: 60, burst: 1, now: () => t, maxTrackedTenants: 2 });
  limiter.take("a");
  limiter.take("b");
  t = 60_000;
  limiter.take("c");
  assert.equal(limiter.take("a").ok, true, "a's bucket was refilled (dropped and recreated full)");
});

test("the rate_limited failure says when to retry and that nothing ran", () => {
  const f = rateLimitedFailure({ retryAfterMs: 1500, limitPerMinute: 60 });
  assert.equal(f.reason_code, "rate_limited");
  assert.equal(f.failure_stage, "admission");
  assert.equal(f.retry_after_ms, 1500);
  assert.equal(f.state_changed, false);
  assert.equal(f.outcome_unknown, false);
  assert.deepEqual(f.evidence, { retry_after_ms: 1500, limit_per_minute: 60 });
  assert.equal(retryAfterSeconds(1500), "2");
  assert.equal(retryAfterSeconds(1), "1");
  assert.equal(admitRate(undefined, "a"), undefined);
  const limiter = createRateLimiter({ perMinute: 1, now: () => 0 });
  assert.equal(admitRate(limiter, "a"), undefined);
  assert.equal(admitRate(limiter, "a")?.reason_code, "rate_limited");
});

test("overrides parse as client=per_minute pairs and reject anything else", () => {
  assert.deepEqual(parseRateLimitOverrides("acme=120, trial-co=10"), { acme: 120, "trial-co": 10 });
  assert.deepEqual(parseRateLimitOverrides(""), {});
  assert.deepEqual(parseRateLimitOverrides(undefined), {});
  assert.throws(() => parseRateLimitOverrides("acme"), /client=calls_per_minute/);
  assert.throws(() => parseRateLimitOverrides("acme=-1"), /client=calls_per_minute/);
  assert.throws(() => parseRateLimitOverrides("=5"), /client=calls_per_minute/);
});
