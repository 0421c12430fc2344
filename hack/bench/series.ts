// Small statistics over sampled series, for the load scripts.

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two points. */
export function slope(x: readonly number[], y: readonly number[]): number {
  const n = Math.min(x.length, y.length);
  if (n < 2) return 0;
  let sx = 0, sy = 0;
  for (let i = 0; i < n; i++) { sx += x[i]!; sy += y[i]!; }
  const mx = sx / n, my = sy / n;
  let num = 0, den = 0;
  for (let i = 0; i < n; i++) { num += (x[i]! - mx) * (y[i]! - my); den += (x[i]! - mx) ** 2; }
  return den === 0 ? 0 : num / den;
}
