// Query and response schemas of the analytics endpoints (docs/spec.md part 2 "Analytics objects" and
// part 4). Pure: no I/O. docs/analytics.md has the decisions.
import { z } from "zod";
import { EVAL_TYPES } from "../../../../toolkit/src/index.ts";
import { ROLLUP_ORIGIN, ROLLUP_SCORE_BUCKETS } from "../../stores/store-sql.ts";

export const METRICS = ["total_calls", "total_tokens", "avg_latency", "total_cost", "error_rate"] as const;
export type Metric = (typeof METRICS)[number];

/** Bucket widths, in milliseconds. */
export const INTERVALS = { "1h": 3_600_000, "6h": 21_600_000, "1d": 86_400_000, "7d": 604_800_000 } as const;
export type Interval = keyof typeof INTERVALS;
export const INTERVAL_NAMES = Object.keys(INTERVALS) as Interval[];

/**
 * Buckets are aligned to this instant (a Monday, midnight UTC): hours, 6-hour blocks from midnight
 * UTC, UTC days, ISO weeks. The store's rollup hours use the same origin, so a rollup hour falls in
 * exactly one bucket of every interval.
 */
export const BUCKET_ORIGIN = new Date(ROLLUP_ORIGIN).toISOString();
/** At most this many buckets per timeseries (e.g. 83 days of 1h buckets). */
export const MAX_BUCKETS = 2000;
/** Buckets of the default timeseries range. */
export const DEFAULT_BUCKETS = 24;
/** The default summary (and token-usage, eval-distribution) range: the last 7 days. */
export const DEFAULT_RANGE_MS = 7 * 86_400_000;
/** Equal-width score buckets of the eval distribution over [0, 1] (the store's eval rollup keeps these). */
export const SCORE_BUCKETS = ROLLUP_SCORE_BUCKETS;

const Timestamp = (what: string) =>
  z.iso
    .datetime({ offset: true, error: "must be an ISO 8601 timestamp with a time zone, e.g. 2025-06-01T00:00:00Z" })
    .optional()
    .describe(what);
const START = Timestamp("Start of the range, inclusive (ISO 8601 with Z or an offset)");
const END = Timestamp("End of the range, exclusive (ISO 8601 with Z or an offset); default now");

export const RangeQuery = z
  .object({
    start: START.describe("Start of the range, inclusive (ISO 8601 with Z or an offset); default 7 days before end"),
    end: END,
  })
  .strict();
export type RangeQuery = z.output<typeof RangeQuery>;

export const TimeseriesQuery = z
  .object({
    metric: z
      .enum(METRICS, { error: `must be one of ${METRICS.join(", ")}` })
      .default("total_calls")
      .describe("Default total_calls"),
    interval: z
      .enum(INTERVAL_NAMES as [Interval, ...Interval[]], { error: `must be one of ${INTERVAL_NAMES.join(", ")}` })
      .default("1h")
      .describe("Bucket width; default 1h"),
    start: START.describe(
      `Start of the range, inclusive; default the start of the bucket ${DEFAULT_BUCKETS - 1} intervals before the one holding end (${DEFAULT_BUCKETS} buckets)`,
    ),
    end: END,
  })
  .strict();
export type TimeseriesQuery = z.output<typeof TimeseriesQuery>;

const Iso = z.iso.datetime();
export const Period = z.object({ start: Iso, end: Iso }).strict().describe("The range: start inclusive, end exclusive (ISO 8601 UTC)");

export const Summary = z
  .object({
    appId: z.string(),
    period: Period,
    totalCalls: z.int().min(0),
    totalTokens: z.int().min(0),
    avgLatencyMs: z.number().min(0).describe("Mean latency of the calls in the range; 0 when there are none"),
    totalCostUsd: z
      .number()
      .min(0)
      .describe("Sum of each trace's cost, priced at ingestion with the model price table version of that time"),
    blockedByGuard: z.int().min(0).describe("Traces a guard blocked"),
    errorRate: z.number().min(0).max(1).describe("Fraction of the calls that carry an error; 0 when there are none"),
  })
  .strict()
  .describe("Summary object (docs/spec.md part 2)");

export const Timeseries = z
  .object({
    metric: z.enum(METRICS),
    interval: z.enum(INTERVAL_NAMES as [Interval, ...Interval[]]),
    labels: z.array(Iso).describe("Start of each bucket, oldest first (ISO 8601 UTC)"),
    values: z.array(z.number()).describe("One value per label; empty buckets are 0"),
  })
  .strict()
  .describe("Timeseries object (docs/spec.md part 2)");

export const TokenUsage = z
  .object({
    promptTokens: z.int().min(0),
    completionTokens: z.int().min(0),
    totalTokens: z.int().min(0),
  })
  .strict()
  .describe("Token usage object (docs/spec.md part 2)");

export const EvalDistribution = z
  .object({
    appId: z.string(),
    period: Period,
    buckets: z
      .array(z.object({ lower: z.number(), upper: z.number() }).strict())
      .describe(`${SCORE_BUCKETS} equal-width score buckets over [0, 1]: [lower, upper), the last one [0.9, 1] closed`),
    byType: z
      .array(
        z
          .object({
            evalType: z.enum(EVAL_TYPES),
            count: z.int().min(0),
            mean: z.number().describe("Mean score"),
            passRate: z.number().min(0).max(1).describe("Fraction of the evals that passed"),
            counts: z.array(z.int().min(0)).describe("Evals per score bucket, aligned with buckets"),
          })
          .strict(),
      )
      .describe("One entry per eval type present in the range, by evalType"),
  })
  .strict()
  .describe("Score distribution of the evals of the calls in the range");
