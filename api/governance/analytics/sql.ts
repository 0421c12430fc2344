// The SQL of the analytics endpoints, over one app's store (pure: builds statement text; the
// schema name is quoted with ident, every value is a server-side parameter).
//
// Every statement filters traces on `created_at >= $1 and created_at < $2` (the call time, the
// range [start, end)), which the store's traces_created_at_idx serves.
import { ident } from "../names.ts";
import { isoSql } from "../db.ts";
import type { Metric } from "./schemas.ts";

const RANGE = "created_at >= $1::timestamptz and created_at < $2::timestamptz";

/** $1 start, $2 end */
export function summarySql(schema: string): string {
  return `select count(*)::int8 as calls, coalesce(sum(total_tokens), 0)::int8 as tokens, coalesce(avg(latency_ms), 0)::float8 as avg_latency,
                 coalesce(sum(cost_usd), 0)::float8 as cost, (count(*) filter (where guard_blocked))::int8 as blocked,
                 (count(*) filter (where error is not null))::int8 as errors
            from ${ident(schema)}.traces where ${RANGE}`;
}

/** $1 start, $2 end */
export function tokenUsageSql(schema: string): string {
  return `select coalesce(sum(prompt_tokens), 0)::int8 as prompt, coalesce(sum(completion_tokens), 0)::int8 as completion,
                 coalesce(sum(total_tokens), 0)::int8 as total
            from ${ident(schema)}.traces where ${RANGE}`;
}

const METRIC_SQL: Record<Metric, string> = {
  total_calls: "count(*)::float8",
  total_tokens: "sum(total_tokens)::float8",
  avg_latency: "avg(latency_ms)::float8",
  total_cost: "sum(cost_usd)::float8",
  error_rate: "(count(*) filter (where error is not null))::float8 / count(*)",
};

/**
 * $1 start, $2 end, $3 bucket width (an interval in seconds: absolute, whatever the session's
 * TimeZone), $4 bucket origin, $5 first bucket start, $6 bucket count. One row per bucket, oldest
 * first; buckets without traces are 0 (generate_series left-joined to the aggregate).
 */
export function timeseriesSql(schema: string, metric: Metric): string {
  return `with agg as (
            select date_bin($3::interval, created_at, $4::timestamptz) as bucket, ${METRIC_SQL[metric]} as v
              from ${ident(schema)}.traces where ${RANGE} group by 1)
          select ${isoSql("b.bucket")} as label, coalesce(agg.v, 0)::float8 as v
            from (select $5::timestamptz + i * $3::interval as bucket from generate_series(0, $6::int - 1) as i) as b
            left join agg on agg.bucket = b.bucket
           order by b.bucket`;
}

/**
 * $1 start, $2 end, $3 number of score buckets. The evals of the calls in the range (joined to
 * their trace's call time), counted per eval type and score bucket: width_bucket over [0, 1],
 * clamped so that a score of exactly 1 (or outside [0, 1]) falls in the edge bucket.
 */
export function evalDistributionSql(schema: string): string {
  const s = ident(schema);
  return `select e.eval_type, least(greatest(width_bucket(e.score, 0, 1, $3::int), 1), $3::int) as bucket,
                 count(*)::int8 as n, sum(e.score)::float8 as score_sum, (count(*) filter (where e.passed))::int8 as passed
            from ${s}.traces t join ${s}.evals e on e.trace_id = t.trace_id
           where t.${RANGE.replace("and created_at", "and t.created_at")}
           group by 1, 2`;
}
