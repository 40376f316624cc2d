import { test } from "node:test";
import assert from "node:assert/strict";
import { admitRate, createRateLimiter, parseRateLimitOverrides, rateLimitedFailure, retryAfterSeconds } from "./rate-limit.js";

const who = (clientId: string, subject = "u") => ({ clientId, subject });

test("a principal gets its burst at once, then one call per refill interval", () => {
  let t = 0;
  const limiter = createRateLimiter({ perMinute: 60, burst: 2, now: () => t });
  assert.deepEqual(limiter.take(who("a")), { ok: true });
  assert.deepEqual(limiter.take(who("a")), { ok: true });
  assert.deepEqual(limiter.take(who("a")), { ok: false, retryAfterMs: 1000, limitPerMinute: 60, scope: "principal" });
  t = 400;
  assert.deepEqual(limiter.take(who("a")), { ok: false, retryAfterMs: 600, limitPerMinute: 60, scope: "principal" });
  t = 1000;
  assert.deepEqual(limiter.take(who("a")), { ok: true });
});

test("two people of one tenant have separate buckets; another tenant too", () => {
  const limiter = createRateLimiter({ perMinute: 1, now: () => 0 });
  assert.equal(limiter.take(who("acme", "alice")).ok, true);
  assert.equal(limiter.take(who("acme", "alice")).ok, false);
  assert.equal(limiter.take(who("acme", "bob")).ok, true, "bob is not limited by alice's calls");
  assert.equal(limiter.take(who("other", "alice")).ok, true, "the same subject in another tenant is another principal");
});

test("the tenant ceiling bounds all its principals together and says so; a refused call costs the principal nothing", () => {
  let t = 0;
  const limiter = createRateLimiter({ perMinute: 2, tenantPerMinute: 3, now: () => t });
  assert.equal(limiter.take(who("acme", "alice")).ok, true);
  assert.equal(limiter.take(who("acme", "alice")).ok, true);
  assert.equal(limiter.take(who("acme", "bob")).ok, true);
  assert.deepEqual(limiter.take(who("acme", "bob")), { ok: false, retryAfterMs: 20_000, limitPerMinute: 3, scope: "tenant" });
  assert.equal(limiter.take(who("beta", "carol")).ok, true, "other tenants are not affected");
  t = 20_000;
  // bob's refused call did not spend his token: the refilled tenant token is his.
  assert.equal(limiter.take(who("acme", "bob")).ok, true);
});

test("per-tenant ceilings override the default (0 = no ceiling); with no per-principal rate only the ceiling applies", () => {
  const limiter = createRateLimiter({ perMinute: 0, tenantPerMinute: 1, perClient: { vip: 0, small: 2 }, now: () => 0 });
  assert.equal(limiter.take(who("a")).ok, true);
  assert.equal(limiter.take(who("a", "other")).ok, false);
  for (let i = 0; i < 100; i++) assert.equal(limiter.take(who("vip", `u${i % 3}`)).ok, true);
  assert.equal(limiter.take(who("small", "x")).ok, true);
  assert.equal(limiter.take(who("small", "y")).ok, true);
  assert.equal(limiter.take(who("small", "z")).ok, false);
});

test("all rates 0 disables the limit", () => {
  const limiter = createRateLimiter({ perMinute: 0 });
  for (let i = 0; i < 1000; i++) assert.equal(limiter.take(who("a")).ok, true);
});

test("idle full buckets are dropped when many are tracked", () => {
  let t = 0;
  const limiter = createRateLimiter({ perMinute: 60, burst: 1, now: () => t, maxTrackedTenants: 2 });
  limiter.take(who("a"));
  limiter.take(who("b"));
  t = 60_000;
  limiter.take(who("c"));
  assert.equal(limiter.take(who("a")).ok, true, "a's bucket was refilled (dropped and recreated full)");
});

test("the rate_limited failure says when to retry, which limit, and that nothing ran", () => {
  const f = rateLimitedFailure({ retryAfterMs: 1500, limitPerMinute: 60, scope: "principal" });
  assert.equal(f.reason_code, "rate_limited");
  assert.equal(f.failure_stage, "admission");
  assert.equal(f.detail_code, "principal_rate_limit");
  assert.equal(f.retry_after_ms, 1500);
  assert.equal(f.state_changed, false);
  assert.equal(f.outcome_unknown, false);
  assert.deepEqual(f.evidence, { retry_after_ms: 1500, limit_per_minute: 60 });
  assert.equal(rateLimitedFailure({ retryAfterMs: 1, limitPerMinute: 5, scope: "tenant" }).detail_code, "tenant_rate_limit");
  assert.equal(retryAfterSeconds(1500), "2");
  assert.equal(retryAfterSeconds(1), "1");
  assert.equal(admitRate(undefined, who("a")), undefined);
  const limiter = createRateLimiter({ perMinute: 1, now: () => 0 });
  assert.equal(admitRate(limiter, who("a")), undefined);
  assert.equal(admitRate(limiter, who("a"))?.reason_code, "rate_limited");
});

test("overrides parse as client=per_minute pairs and reject anything else", () => {
  assert.deepEqual(parseRateLimitOverrides("acme=120, trial-co=10"), { acme: 120, "trial-co": 10 });
  assert.deepEqual(parseRateLimitOverrides(""), {});
  assert.deepEqual(parseRateLimitOverrides(undefined), {});
  assert.throws(() => parseRateLimitOverrides("acme"), /client=calls_per_minute/);
  assert.throws(() => parseRateLimitOverrides("acme=-1"), /client=calls_per_minute/);
  assert.throws(() => parseRateLimitOverrides("=5"), /client=calls_per_minute/);
});
