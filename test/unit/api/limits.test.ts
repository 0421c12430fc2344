// Rate limits (pure, time passed in): the token bucket of a caller, its independence from other
// callers, the headers, the bounded memory, and the addresses that name callers without a key.
import test from "ava";
import {
  RateLimiter,
  RateLimits,
  TooManyRequestsError,
  addressCaller,
  budgetName,
  clientAddress,
  rateLimitHeaders,
} from "../../../api/http/limits.ts";

test("a caller gets its burst at once, then one request per interval; Retry-After says when", (t) => {
  const l = new RateLimiter({ perSecond: 2, burst: 3 });
  const now = 1_000_000;
  const seen = [1, 2, 3].map(() => l.take("key:a", now));
  t.true(seen.every((d) => d.allowed));
  t.deepEqual(
    seen.map((d) => d.remaining),
    [2, 1, 0],
  );
  const refused = l.take("key:a", now);
  t.false(refused.allowed);
  if (!refused.allowed) t.is(refused.retryAfterSeconds, 1, "one request every 500 ms: the next passes within a second");
  t.false(l.take("key:a", now + 499).allowed);
  const later = l.take("key:a", now + 500);
  t.true(later.allowed);
  t.is(later.remaining, 0);
  t.false(l.take("key:a", now + 500).allowed, "a refused request spends nothing, an allowed one the token it got");
  t.true(l.take("key:a", now + 1000).allowed);
});

test("the bucket refills up to the burst, never beyond", (t) => {
  const l = new RateLimiter({ perSecond: 10, burst: 5 });
  for (let i = 0; i < 5; i++) t.true(l.take("c", 0).allowed);
  t.false(l.take("c", 0).allowed);
  const after = 60_000; // a minute idle: full again, but only 5
  for (let i = 0; i < 5; i++) t.true(l.take("c", after).allowed);
  t.false(l.take("c", after).allowed);
});

test("Retry-After rounds up to whole seconds and is at least 1", (t) => {
  const slow = new RateLimiter({ perSecond: 0.1, burst: 1 });
  t.true(slow.take("c", 0).allowed);
  const d = slow.take("c", 2_500);
  t.false(d.allowed);
  if (!d.allowed) t.is(d.retryAfterSeconds, 8, "10 s per request, 2.5 s gone: 7.5 s, rounded up");
  t.true(slow.take("c", 10_000).allowed);
});

test("callers do not share a budget", (t) => {
  const l = new RateLimiter({ perSecond: 1, burst: 2 });
  t.true(l.take("workspace:k1", 0).allowed);
  t.true(l.take("workspace:k1", 0).allowed);
  t.false(l.take("workspace:k1", 0).allowed);
  t.true(l.take("workspace:k2", 0).allowed);
  t.true(l.take("addr:10.0.0.1", 0).allowed);
});

test("api, ingest and guard are separate budgets; a budget of 0 per second is off", (t) => {
  const one = { perSecond: 1, burst: 1 };
  const limits = new RateLimits({ api: one, ingest: one, guard: one });
  t.true(limits.of("api")!.take("app:k", 0).allowed);
  t.false(limits.of("api")!.take("app:k", 0).allowed);
  t.true(limits.of("ingest")!.take("app:k", 0).allowed, "the ingest budget of the same caller is untouched");
  t.false(limits.of("ingest")!.take("app:k", 0).allowed);
  t.true(limits.of("guard")!.take("app:k", 0).allowed, "guard checks do not spend ingestion's budget, nor it theirs");
  t.false(limits.of("guard")!.take("app:k", 0).allowed);
  t.is(limits.of("none"), undefined);
  const off = new RateLimits({ api: { perSecond: 0, burst: 1 }, ingest: { perSecond: 5, burst: 1 }, guard: { perSecond: 0, burst: 1 } });
  t.is(off.of("api"), undefined);
  t.truthy(off.of("ingest"));
  t.is(off.of("guard"), undefined);
});

test("the 429 of an app key's budgets names the key, not a caller", (t) => {
  for (const policy of ["ingest", "guard"]) t.regex(new TooManyRequestsError(policy, 2).message, /budget of this app key is spent/);
  t.regex(new TooManyRequestsError("api", 2).message, /budget of this caller is spent/);
});

test("callers whose bucket is full again are forgotten, and memory stays bounded", (t) => {
  const l = new RateLimiter({ perSecond: 1, burst: 2 }, { maxCallers: 3 });
  for (const c of ["a", "b", "c"]) l.take(c, 0);
  t.is(l.size, 3);
  l.take("d", 5_000); // a, b and c are full again: swept
  t.is(l.size, 1);
  for (const c of ["e", "f", "g", "h"]) l.take(c, 5_000); // nobody is full: the longest-known go
  t.is(l.size, 3);
  t.true(l.take("h", 5_000).allowed, "a remembered caller keeps its count");
  t.false(l.take("h", 5_000).allowed);
});

test("the RateLimit header fields", (t) => {
  const budget = { perSecond: 2, burst: 10 };
  const l = new RateLimiter(budget);
  const d = l.take("c", 0);
  t.deepEqual(rateLimitHeaders("api", d, budget), { "RateLimit-Policy": '"api";q=10;w=5', RateLimit: '"api";r=9;t=1' });
});

test("callers without a key are named by their address; IPv6 by its /64", (t) => {
  t.is(addressCaller("10.1.2.3"), "addr:10.1.2.3");
  t.is(addressCaller("::ffff:10.1.2.3"), "addr:10.1.2.3");
  t.is(addressCaller("2001:db8:0:1:aaaa::1"), "addr:2001:db8:0:1::/64");
  t.is(addressCaller("2001:db8:0:1:bbbb:cccc:dddd:eeee"), "addr:2001:db8:0:1::/64");
  t.is(addressCaller("2001:db8::1"), "addr:2001:db8:0:0::/64");
  t.is(addressCaller("::1"), "addr:0:0:0:0::/64");
  t.is(addressCaller(undefined), "addr:unknown");
});

test("the client's address: the peer's, or behind a trusted proxy the rightmost hop of X-Forwarded-For that is not one", (t) => {
  const trusted = (a: string) => a.startsWith("10.") || a === "127.0.0.1";
  t.is(clientAddress("203.0.113.9", "198.51.100.1", trusted), "203.0.113.9", "an untrusted peer's header is ignored");
  t.is(clientAddress("10.0.0.5", "198.51.100.1", trusted), "198.51.100.1");
  t.is(clientAddress("::ffff:10.0.0.5", "198.51.100.1", trusted), "198.51.100.1", "an IPv4-mapped peer");
  t.is(
    clientAddress("10.0.0.5", "1.2.3.4, 198.51.100.1, 10.0.0.9", trusted),
    "198.51.100.1",
    "prepended hops and trusted hops are passed over",
  );
  t.is(clientAddress("10.0.0.5", "10.0.0.7, 10.0.0.9", trusted), "10.0.0.7", "all trusted: the first");
  t.is(clientAddress("10.0.0.5", "not-an-ip", trusted), "10.0.0.5", "a malformed hop: the proxy's own address");
  t.is(clientAddress("10.0.0.5", undefined, trusted), "10.0.0.5");
  t.is(clientAddress("10.0.0.5", "198.51.100.1", undefined), "10.0.0.5", "no trusted proxies configured");
  t.is(budgetName({ kind: "workspace", keyId: "k1", workspaceId: "ws1" }), "workspace:ws1");
  t.is(budgetName({ kind: "app", keyId: "k2" }), "app:k2");
  t.is(
    budgetName({ kind: "operator", username: "system:serviceaccount:berth-system:berth-operator" }),
    "operator:system:serviceaccount:berth-system:berth-operator",
  );
});

test("a request may cost several units: it needs them all at once, and one above the burst costs the burst", (t) => {
  const l = new RateLimiter({ perSecond: 10, burst: 5 });
  const now = 1_000_000;
  t.like(l.take("model:ws/a", now, 3), { allowed: true, remaining: 2 });
  const refused = l.take("model:ws/a", now, 3);
  t.false(refused.allowed, "3 more do not fit in the 2 left");
  if (!refused.allowed) t.is(refused.retryAfterSeconds, 1);
  t.like(l.take("model:ws/a", now, 2), { allowed: true, remaining: 0 }, "a refused request spent nothing");
  t.like(l.take("model:ws/a", now + 500, 5), { allowed: true, remaining: 0 }, "refilled: 5 units in 500 ms");
  t.like(l.take("model:ws/b", now, 500), { allowed: true, remaining: 0 }, "above the burst: charged as the burst, else never allowed");
  t.throws(() => l.take("model:ws/c", now, 0), { message: /invalid cost/ });
  t.throws(() => l.take("model:ws/c", now, 1.5), { message: /invalid cost/ });
  t.is(new TooManyRequestsError("model", 2).message, "Too many requests: the model budget of this app is spent; retry after 2 s.");
});
