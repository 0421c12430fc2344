// Ranges and buckets of the analytics endpoints, resolved from the query before any SQL runs.
// Pure: no I/O (`now` is given). A range is [start, end): start inclusive, end exclusive.
import { ValidationError } from "../../../errors.ts";
import { BUCKET_ORIGIN, DEFAULT_BUCKETS, DEFAULT_RANGE_MS, INTERVALS, MAX_BUCKETS, type Interval } from "./schemas.ts";

export interface Range {
  start: Date;
  end: Date;
}

export interface BucketRange extends Range {
  interval: Interval;
  /** start of the first bucket (start, floored to the interval) */
  first: Date;
  /** number of buckets */
  count: number;
}

const ORIGIN_MS = Date.parse(BUCKET_ORIGIN);

/** The start of the bucket holding `t` (date_bin with BUCKET_ORIGIN, in UTC). */
export function binStart(t: number, interval: Interval): number {
  const w = INTERVALS[interval];
  return ORIGIN_MS + Math.floor((t - ORIGIN_MS) / w) * w;
}

function orderCheck(start: number, end: number): void {
  if (start >= end) {
    throw new ValidationError([
      { field: "query.start", message: `must be before end (start ${new Date(start).toISOString()}, end ${new Date(end).toISOString()})` },
    ]);
  }
}

/** Sub-millisecond digits are dropped (JavaScript dates). */
const parse = (s: string | undefined): number | undefined => (s === undefined ? undefined : Date.parse(s));

/** summary, token-usage, eval-distribution: default end now, start 7 days before end. */
export function resolveRange(q: { start?: string | undefined; end?: string | undefined }, now: number): Range {
  const end = parse(q.end) ?? now;
  const start = parse(q.start) ?? end - DEFAULT_RANGE_MS;
  orderCheck(start, end);
  return { start: new Date(start), end: new Date(end) };
}

/**
 * timeseries: default end now; default start the start of the bucket DEFAULT_BUCKETS - 1
 * intervals before the one holding end, so the default answer is DEFAULT_BUCKETS buckets, the
 * last one the current (partial) bucket. Buckets cover [binStart(start), end); at most
 * MAX_BUCKETS.
 */
export function resolveBuckets(q: { start?: string | undefined; end?: string | undefined; interval: Interval }, now: number): BucketRange {
  const w = INTERVALS[q.interval];
  const end = parse(q.end) ?? now;
  const start = parse(q.start) ?? binStart(end - 1, q.interval) - (DEFAULT_BUCKETS - 1) * w;
  orderCheck(start, end);
  const first = binStart(start, q.interval);
  const count = Math.ceil((end - first) / w);
  if (count > MAX_BUCKETS) {
    throw new ValidationError([
      {
        field: "query.start",
        message: `the range holds ${count} buckets of ${q.interval}; at most ${MAX_BUCKETS} are allowed: narrow the range or choose a wider interval`,
      },
    ]);
  }
  return { start: new Date(start), end: new Date(end), interval: q.interval, first: new Date(first), count };
}

/**
 * The whole hours inside a range, [from, to): the part the rollups answer; the traces answer the
 * rest, [start, from) and [to, end). A range inside one hour has no whole hour: from = to = end,
 * so the traces answer [start, end).
 */
export function wholeHours(r: Range): Range {
  const start = r.start.getTime();
  const end = r.end.getTime();
  const floor = binStart(start, "1h");
  const from = floor === start ? start : floor + INTERVALS["1h"];
  const to = binStart(end, "1h");
  return from <= to ? { start: new Date(from), end: new Date(to) } : { start: r.end, end: r.end };
}
