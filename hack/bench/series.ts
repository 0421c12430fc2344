// Small statistics over sampled series, for the load scripts.

/** The p-quantile (0 < p <= 1) of xs by the nearest-rank method: a value of xs. */
export function quantile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two points. */
export function slope(x: readonly number[], y: readonly number[]): number {
  const n = Math.min(x.length, y.length);
  if (n < 2) return 0;
  let sx = 0,
    sy = 0;
  for (let i = 0; i < n; i++) {
    sx += x[i]!;
    sy += y[i]!;
  }
  const mx = sx / n,
    my = sy / n;
  let num = 0,
    den = 0;
  for (let i = 0; i < n; i++) {
    num += (x[i]! - mx) * (y[i]! - my);
    den += (x[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export interface Trend {
  /** Least-squares slope per minute. */
  perMin: number;
  /** The growth that slope predicts from the first sample to the last. */
  growth: number;
  /** FLAT when |growth| is under 10 % of the first value (of 1 when it is smaller), else GROWING or FALLING. */
  verdict: "FLAT" | "GROWING" | "FALLING";
}

/** The load scripts' verdict on a series sampled at `minutes`. */
export function trend(minutes: readonly number[], ys: readonly number[]): Trend {
  const perMin = slope(minutes, ys);
  const growth = ys.length > 1 ? perMin * (minutes[ys.length - 1]! - minutes[0]!) : 0;
  const verdict = Math.abs(growth) < 0.1 * Math.max(ys[0] ?? 0, 1) ? "FLAT" : growth > 0 ? "GROWING" : "FALLING";
  return { perMin, growth, verdict };
}
