// Analytics of one app's traces: SQL over the app's store, in a read-only transaction
// under the app's role (GovernanceDb.appTx), so an app's analytics can only ever read its own
// schema. The Governance service resolves the app to its store (404 app_not_found,
// governance_not_provisioned) exactly as for the other service-scoped reads.
import type { z } from "zod";
import type { Governance } from "../../service.ts";
import type { StoreRef } from "../reader.ts";
import { resolveBuckets, resolveRange, wholeHours, type BucketRange, type Range } from "./range.ts";
import { BUCKET_ORIGIN, INTERVALS, SCORE_BUCKETS, type RangeQuery, type TimeseriesQuery } from "./schemas.ts";
import type { EvalDistribution, Summary, Timeseries, TokenUsage } from "./schemas.ts";
import { evalDistributionSql, summarySql, timeseriesSql, tokenUsageSql } from "./sql.ts";

type Row = Record<string, unknown>;

const period = (r: Range) => ({ start: r.start.toISOString(), end: r.end.toISOString() });

/** $1 start, $2 end, $3 from, $4 to: the range and its whole hours (the part the rollups answer). */
export function rangeParams(r: Range): string[] {
  const whole = wholeHours(r);
  return [r.start.toISOString(), r.end.toISOString(), whole.start.toISOString(), whole.end.toISOString()];
}

/** The parameters of timeseriesSql for resolved buckets. */
export function timeseriesParams(b: BucketRange): unknown[] {
  return [...rangeParams(b), `${INTERVALS[b.interval] / 1000} seconds`, BUCKET_ORIGIN, b.first.toISOString(), b.count];
}

export class AnalyticsService {
  // Only kept here: the OpenAPI generator builds the routes from a stand-in that throws on any use.
  readonly #g: Governance;
  readonly #now: () => number;

  constructor(governance: Governance, opts: { now?: () => number } = {}) {
    this.#g = governance;
    this.#now = opts.now ?? Date.now;
  }

  async summary(workspaceId: string, appId: string, q: RangeQuery): Promise<z.input<typeof Summary>> {
    const range = resolveRange(q, this.#now());
    return this.summaryOf(await this.#g.store(workspaceId, appId), appId, range);
  }

  async timeseries(workspaceId: string, appId: string, q: TimeseriesQuery): Promise<z.input<typeof Timeseries>> {
    const buckets = resolveBuckets(q, this.#now());
    return this.timeseriesOf(await this.#g.store(workspaceId, appId), q.metric, buckets);
  }

  async tokenUsage(workspaceId: string, appId: string, q: RangeQuery): Promise<z.input<typeof TokenUsage>> {
    const range = resolveRange(q, this.#now());
    return this.tokenUsageOf(await this.#g.store(workspaceId, appId), range);
  }

  async evalDistribution(workspaceId: string, appId: string, q: RangeQuery): Promise<z.input<typeof EvalDistribution>> {
    const range = resolveRange(q, this.#now());
    return this.evalDistributionOf(await this.#g.store(workspaceId, appId), appId, range);
  }

  // ---- over a resolved store (also what hack/bench/analytics.ts measures) ----------------------

  async summaryOf(store: StoreRef, appId: string, range: Range): Promise<z.input<typeof Summary>> {
    const r = await this.#read(store, summarySql(store.schema), rangeParams(range));
    const row = r[0]!;
    const calls = Number(row.calls);
    return {
      appId,
      period: period(range),
      totalCalls: calls,
      totalTokens: Number(row.tokens),
      avgLatencyMs: row.avg_latency as number,
      totalCostUsd: row.cost as number,
      blockedByGuard: Number(row.blocked),
      errorRate: calls === 0 ? 0 : Number(row.errors) / calls,
    };
  }

  async timeseriesOf(
    store: StoreRef,
    metric: TimeseriesQuery["metric"],
    b: ReturnType<typeof resolveBuckets>,
  ): Promise<z.input<typeof Timeseries>> {
    const rows = await this.#read(store, timeseriesSql(store.schema, metric), timeseriesParams(b));
    return { metric, interval: b.interval, labels: rows.map((r) => r.label as string), values: rows.map((r) => r.v as number) };
  }

  async tokenUsageOf(store: StoreRef, range: Range): Promise<z.input<typeof TokenUsage>> {
    const row = (await this.#read(store, tokenUsageSql(store.schema), rangeParams(range)))[0]!;
    return { promptTokens: Number(row.prompt), completionTokens: Number(row.completion), totalTokens: Number(row.total) };
  }

  async evalDistributionOf(store: StoreRef, appId: string, range: Range): Promise<z.input<typeof EvalDistribution>> {
    const rows = await this.#read(store, evalDistributionSql(store.schema), rangeParams(range));
    const types = new Map<string, { count: number; sum: number; passed: number; counts: number[] }>();
    for (const r of rows) {
      const t = types.get(r.eval_type as string) ?? { count: 0, sum: 0, passed: 0, counts: new Array<number>(SCORE_BUCKETS).fill(0) };
      types.set(r.eval_type as string, t);
      const n = Number(r.n);
      t.count += n;
      t.sum += r.score_sum as number;
      t.passed += Number(r.passed);
      t.counts[(r.bucket as number) - 1]! += n;
    }
    return {
      appId,
      period: period(range),
      buckets: Array.from({ length: SCORE_BUCKETS }, (_, i) => ({ lower: i / SCORE_BUCKETS, upper: (i + 1) / SCORE_BUCKETS })),
      byType: [...types.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([evalType, t]) => ({
          evalType: evalType as z.input<typeof EvalDistribution>["byType"][number]["evalType"],
          count: t.count,
          mean: t.sum / t.count,
          passRate: t.passed / t.count,
          counts: t.counts,
        })),
    };
  }

  #read(store: StoreRef, sql: string, args: unknown[]): Promise<Row[]> {
    return this.#g.db.appTx(store.role, async (c) => (await c.query(sql, args)).rows as Row[], { readOnly: true });
  }
}
