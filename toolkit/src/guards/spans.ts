// Questions about many [start, end) spans at once, answered by binary search. The guards ask, for
// each hit, whether it lies inside a quote, an allowlisted occurrence or a whitelisted word, or
// whether it overlaps a span an earlier PII detector claimed. Asked by scanning every span, that is
// hits x spans: quadratic on a long text full of both (the guards must stay linear in the text,
// docs/guards.md#performance). Pure.

/** How many values of a sorted (non-decreasing) array are below x: the first index i with a[i] >= x. */
export function lowerBound(a: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How many values of a sorted (non-decreasing) array are at most x: the first index i with a[i] > x. */
export function upperBound(a: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Spans sorted by start, with the largest end among the first i + 1 of them at maxEnds[i]. */
interface Run {
  starts: number[];
  maxEnds: number[];
}

/**
 * A set of [start, end) spans that says in O(log n) whether one of them contains or overlaps a
 * range. Among the spans that start at or before a point, the one that reaches furthest decides
 * both questions; kept sorted by start with the running maximum of their ends, that is one binary
 * search. Any spans (overlapping, nested, empty) give the answers a scan of all of them would.
 *
 * Spans added in order of start (as one regex scan finds them) extend the current run; a span that
 * starts before the last one opens a new run, and a question asks every run. A detector's spans
 * come from a few scans, so they make a few runs.
 */
export class SpanSet {
  readonly #runs: Run[] = [];

  /** A set of these spans (in any order: sorted here). */
  static of(spans: Iterable<{ readonly start: number; readonly end: number }>): SpanSet {
    const set = new SpanSet();
    for (const s of [...spans].sort((a, b) => a.start - b.start)) set.add(s.start, s.end);
    return set;
  }

  /** A set of these [start, end] pairs (in any order). */
  static ofPairs(pairs: Iterable<readonly [number, number]>): SpanSet {
    return SpanSet.of([...pairs].map(([start, end]) => ({ start, end })));
  }

  get size(): number {
    return this.#runs.reduce((n, r) => n + r.starts.length, 0);
  }

  add(start: number, end: number): void {
    let run = this.#runs.at(-1);
    if (!run || start < run.starts.at(-1)!) {
      run = { starts: [], maxEnds: [] };
      this.#runs.push(run);
    }
    run.starts.push(start);
    run.maxEnds.push(Math.max(end, run.maxEnds.at(-1) ?? end));
  }

  /** Whether a span of the set overlaps [start, end): one with s < end and start < e. */
  overlaps(start: number, end: number): boolean {
    for (const run of this.#runs) {
      const k = lowerBound(run.starts, end);
      if (k > 0 && run.maxEnds[k - 1]! > start) return true;
    }
    return false;
  }

  /** Whether a span of the set contains [start, end): one with s <= start and end <= e. */
  contains(start: number, end: number): boolean {
    for (const run of this.#runs) {
      const k = upperBound(run.starts, start);
      if (k > 0 && run.maxEnds[k - 1]! >= end) return true;
    }
    return false;
  }
}
