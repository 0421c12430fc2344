// Per-caller rate limits (pure: the time is passed in). A budget is a token bucket of `burst`
// requests refilled at `perSecond`, kept as one number per caller (GCRA: the theoretical arrival
// time of the next request), so a caller costs 8 bytes plus its key and disappears once its bucket
// is full again. Callers are named by the router: "<kind>:<key id>" for a key (never the key
// itself), "addr:<address>" for a request without a valid key. docs/api.md "Rate limits" has the
// decisions (budgets, headers, per-replica counting).
import { isIP, isIPv6 } from "node:net";
import { DomainError } from "../errors.ts";

/** A budget: `burst` requests at once, refilled at `perSecond`. perSecond 0 turns the limit off. */
export interface Budget {
  perSecond: number;
  burst: number;
}

/** Which budget a route spends: "api" (the default), "ingest" (trace ingestion), "guard" (guard checks), or "none". */
export type LimitClass = "api" | "ingest" | "guard" | "none";

export type Decision =
  | { allowed: true; limit: number; remaining: number; resetSeconds: number }
  | { allowed: false; limit: number; remaining: 0; resetSeconds: number; retryAfterSeconds: number };

/** Default bound on the callers remembered at once (each is a few dozen bytes). */
export const DEFAULT_MAX_CALLERS = 100_000;

export class RateLimiter {
  readonly budget: Budget;
  readonly #maxCallers: number;
  /** caller -> theoretical arrival time (ms): the bucket is full when it is <= now. */
  readonly #tat = new Map<string, number>();
  /** ms per request, and the bucket's depth in ms. */
  readonly #interval: number;
  readonly #depth: number;

  constructor(budget: Budget, opts: { maxCallers?: number } = {}) {
    if (!(budget.perSecond >= 0) || !(budget.burst >= 1) || !Number.isInteger(budget.burst))
      throw new Error(`invalid budget ${JSON.stringify(budget)}`);
    this.budget = budget;
    this.#maxCallers = opts.maxCallers ?? DEFAULT_MAX_CALLERS;
    this.#interval = budget.perSecond > 0 ? 1000 / budget.perSecond : 0;
    this.#depth = this.#interval * budget.burst;
  }

  get enabled(): boolean {
    return this.budget.perSecond > 0;
  }

  /** Callers currently remembered (those whose bucket is not full). */
  get size(): number {
    return this.#tat.size;
  }

  /**
   * Spends `cost` units (1: one request) of `caller`'s budget at `nowMs`, or says how long to wait.
   * A cost above the burst is charged as the burst (it could never be allowed otherwise).
   */
  take(caller: string, nowMs: number, cost = 1): Decision {
    const limit = this.budget.burst;
    if (!this.enabled) return { allowed: true, limit, remaining: limit, resetSeconds: 0 };
    if (!(cost >= 1) || !Number.isInteger(cost)) throw new Error(`invalid cost ${cost}`);
    const tat = Math.max(this.#tat.get(caller) ?? nowMs, nowMs);
    const next = tat + this.#interval * Math.min(cost, limit);
    if (next - nowMs > this.#depth) {
      // Allowed again once next - now <= depth.
      const waitMs = next - this.#depth - nowMs;
      return {
        allowed: false,
        limit,
        remaining: 0,
        resetSeconds: Math.ceil((tat - nowMs) / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
      };
    }
    if (!this.#tat.has(caller) && this.#tat.size >= this.#maxCallers) this.#evict(nowMs);
    this.#tat.set(caller, next);
    return {
      allowed: true,
      limit,
      remaining: Math.floor((this.#depth - (next - nowMs)) / this.#interval + 1e-9),
      resetSeconds: Math.ceil((next - nowMs) / 1000),
    };
  }

  /** Forgets callers whose bucket is full again; if that is not enough, the longest-known ones (they start over with a full bucket). */
  #evict(nowMs: number): void {
    for (const [caller, tat] of this.#tat) if (tat <= nowMs) this.#tat.delete(caller);
    for (const caller of this.#tat.keys()) {
      if (this.#tat.size < this.#maxCallers) break;
      this.#tat.delete(caller);
    }
  }
}

/** The budgets of the API's routes, one limiter each. */
export class RateLimits {
  readonly api: RateLimiter;
  readonly ingest: RateLimiter;
  readonly guard: RateLimiter;

  constructor(budgets: { api: Budget; ingest: Budget; guard: Budget }, opts: { maxCallers?: number } = {}) {
    this.api = new RateLimiter(budgets.api, opts);
    this.ingest = new RateLimiter(budgets.ingest, opts);
    this.guard = new RateLimiter(budgets.guard, opts);
  }

  /** The limiter of a route's class; undefined for "none" or a budget that is off. */
  of(cls: LimitClass): RateLimiter | undefined {
    const l = cls === "none" ? undefined : this[cls];
    return l?.enabled ? l : undefined;
  }
}

/** The name of a caller without a valid key: its address; IPv4-mapped IPv6 as IPv4, IPv6 by its /64 (one host usually has a whole /64). */
export function addressCaller(address: string | undefined): string {
  if (!address) return "addr:unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return `addr:${mapped[1]}`;
  if (!isIPv6(address)) return `addr:${address}`;
  const [head = "", tail = ""] = address.split("%")[0]!.split("::");
  const h = head === "" ? [] : head.split(":");
  const t = tail === "" ? [] : tail.split(":");
  const groups = address.includes("::") ? [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t] : h;
  return `addr:${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}

/**
 * The client's address: the socket's peer, or, when that peer is a trusted proxy (the ingress
 * controller), the address X-Forwarded-For names, read from the right past every trusted hop (a
 * client can prepend anything to the header, but not past the proxy that appended its address).
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: ((address: string) => boolean) | undefined,
): string | undefined {
  const bare = (a: string) => a.trim().replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, "$1");
  if (!peer || !trusted || !forwardedFor || !trusted(bare(peer))) return peer;
  const hops = forwardedFor.split(",").map(bare).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    if (!isIP(hops[i]!)) return peer; // a malformed hop: the proxy's own word stands
    if (!trusted(hops[i]!)) return hops[i];
  }
  return hops[0] ?? peer;
}

/** The budget a caller spends: a workspace's keys share one, other keys have their own, operators theirs. */
export function budgetName(caller: { kind: string; keyId?: string; workspaceId?: string; username?: string }): string {
  if (caller.kind === "workspace") return `workspace:${caller.workspaceId}`;
  if (caller.kind === "operator") return `operator:${caller.username}`;
  return `${caller.kind}:${caller.keyId}`;
}

/** The RateLimit-Policy and RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-10). */
export function rateLimitHeaders(policy: string, d: Decision, budget: Budget): Record<string, string> {
  const window = Math.ceil(budget.burst / budget.perSecond);
  return {
    "RateLimit-Policy": `"${policy}";q=${d.limit};w=${window}`,
    RateLimit: `"${policy}";r=${d.remaining};t=${d.resetSeconds}`,
  };
}

/** 429: the caller spent its budget. The renderer adds Retry-After. */
export class TooManyRequestsError extends DomainError {
  readonly retryAfterSeconds: number;
  constructor(policy: string, retryAfterSeconds: number) {
    super(
      429,
      "rate_limited",
      `Too many requests: the ${policy} budget of this ${policy === "ingest" || policy === "guard" ? "app key" : policy === "model" ? "app" : policy === "edge" ? "viewer" : "caller"} is spent; retry after ${retryAfterSeconds} s.`,
      { details: { policy, retryAfterSeconds } },
    );
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
