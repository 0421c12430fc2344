// The SQL of the analytics endpoints, over one app's store (pure: builds statement text; the
// schema name is quoted with ident, every value is a server-side parameter).
//
// A range [start, end) is answered in two parts (range.ts wholeHours): its whole hours [from, to)
// from the store's hourly rollups (traces_hourly, evals_hourly: per-hour sums kept exact by
// triggers on every insert, stores/store-sql.ts), and the partial hours at its edges,
// [start, from) and [to, end), from the traces themselves through traces_created_at_idx. A 30-day
// range thus reads at most 720 x ROLLUP_SHARDS rollup rows and two hours of traces, however many
// traces it holds.
// Every statement takes $1 start, $2 end, $3 from, $4 to.
import { ident } from "../../stores/names.ts";
import { isoSql } from "../../stores/db.ts";
import { ROLLUP_SCORE_BUCKETS } from "../../stores/store-sql.ts";
import type { Metric } from "./schemas.ts";

const WHOLE = "hour >= $3::timestamptz and hour < $4::timestamptz";
const edges = (column: string) =>
  `((${column} >= $1::timestamptz and ${column} < $3::timestamptz) or (${column} >= $4::timestamptz and ${column} < $2::timestamptz))`;

/** Per-part sums of the traces: whole hours from the rollup, edges from the traces. `by` groups both (or nothing). */
function traceParts(schema: string, by?: { rollup: string; traces: string }): string {
  const s = ident(schema);
  const group = by ? " group by 1" : "";
  return `select ${by ? `${by.rollup} as bucket, ` : ""}sum(calls)::int8 as calls, sum(prompt_tokens)::int8 as prompt, sum(completion_tokens)::int8 as completion,
                 sum(total_tokens)::int8 as tokens, sum(latency_sum) as latency, sum(cost_usd) as cost, sum(blocked)::int8 as blocked, sum(errors)::int8 as errors
            from ${s}.traces_hourly where ${WHOLE}${group}
          union all
          select ${by ? `${by.traces}, ` : ""}count(*), sum(prompt_tokens), sum(completion_tokens), sum(total_tokens), sum(latency_ms), sum(cost_usd),
                 count(*) filter (where guard_blocked), count(*) filter (where error is not null)
            from ${s}.traces where ${edges("created_at")}${group}`;
}

/** $1 start, $2 end, $3 from, $4 to */
export function summarySql(schema: string): string {
  return `select coalesce(sum(calls), 0)::int8 as calls, coalesce(sum(tokens), 0)::int8 as tokens,
                 coalesce(sum(latency) / nullif(sum(calls), 0), 0)::float8 as avg_latency, coalesce(sum(cost), 0)::float8 as cost,
                 coalesce(sum(blocked), 0)::int8 as blocked, coalesce(sum(errors), 0)::int8 as errors
            from (${traceParts(schema)}) as p`;
}

/** $1 start, $2 end, $3 from, $4 to */
export function tokenUsageSql(schema: string): string {
  return `select coalesce(sum(prompt), 0)::int8 as prompt, coalesce(sum(completion), 0)::int8 as completion, coalesce(sum(tokens), 0)::int8 as total
            from (${traceParts(schema)}) as p`;
}

/** A metric of one bucket's sums (null for an empty bucket: 0 in the answer). */
const METRIC_SQL: Record<Metric, string> = {
  total_calls: "agg.calls",
  total_tokens: "agg.tokens",
  avg_latency: "agg.latency / nullif(agg.calls, 0)",
  total_cost: "agg.cost",
  error_rate: "agg.errors::float8 / nullif(agg.calls, 0)",
};

/**
 * $1 start, $2 end, $3 from, $4 to, $5 bucket width (an interval in seconds: absolute, whatever the
 * session's TimeZone), $6 bucket origin, $7 first bucket start, $8 bucket count. One row per
 * bucket, oldest first; buckets without traces are 0 (generate_series left-joined to the sums).
 * Every interval is a whole number of hours aligned on the rollup's hours, so a rollup hour falls
 * in exactly one bucket.
 */
export function timeseriesSql(schema: string, metric: Metric): string {
  const bin = (column: string) => `date_bin($5::interval, ${column}, $6::timestamptz)`;
  return `with agg as (
            select bucket, sum(calls) as calls, sum(tokens) as tokens, sum(latency) as latency, sum(cost) as cost, sum(errors) as errors
              from (${traceParts(schema, { rollup: bin("hour"), traces: bin("created_at") })}) as p group by bucket)
          select ${isoSql("b.bucket")} as label, coalesce(${METRIC_SQL[metric]}, 0)::float8 as v
            from (select $7::timestamptz + i * $5::interval as bucket from generate_series(0, $8::int - 1) as i) as b
            left join agg on agg.bucket = b.bucket
           order by b.bucket`;
}

/**
 * $1 start, $2 end, $3 from, $4 to. The evals of the calls in the range (by their trace's call
 * time), counted per eval type and score bucket: ROLLUP_SCORE_BUCKETS equal-width buckets over
 * [0, 1], clamped so that a score of exactly 1 (or outside [0, 1]) falls in the edge bucket.
 */
export function evalDistributionSql(schema: string): string {
  const s = ident(schema);
  const B = ROLLUP_SCORE_BUCKETS;
  return `select eval_type, bucket, sum(n)::int8 as n, sum(score_sum)::float8 as score_sum, sum(passed)::int8 as passed
            from (select eval_type, bucket::int as bucket, n, score_sum, passed from ${s}.evals_hourly where ${WHOLE}
                  union all
                  select e.eval_type, least(greatest(width_bucket(e.score, 0, 1, ${B}), 1), ${B}), 1, e.score, case when e.passed then 1 else 0 end
                    from ${s}.traces t join ${s}.evals e on e.trace_id = t.trace_id
                   where ${edges("t.created_at")}) as p
           group by 1, 2`;
}
