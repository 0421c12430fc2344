// The benchmarks' statistics (hack/bench/series.ts): the quantile every benchmark reports.
import test from "ava";
import { quantile, slope } from "../../../hack/bench/series.ts";

test("quantile: the nearest rank, a value of the sample, whatever its order", (t) => {
  const xs = [9, 1, 5, 3, 7, 2, 8, 4, 10, 6];
  t.is(quantile(xs, 0.5), 5);
  t.is(quantile(xs, 0.9), 9);
  t.is(quantile(xs, 0.99), 10, "p99 of ten samples is the largest");
  t.is(quantile(xs, 0.1), 1);
  t.is(quantile([42], 0.5), 42);
  t.deepEqual(xs, [9, 1, 5, 3, 7, 2, 8, 4, 10, 6], "the input is not reordered");
});

test("slope: least squares, 0 without two points", (t) => {
  t.is(slope([0, 1, 2, 3], [1, 3, 5, 7]), 2);
  t.is(slope([1], [5]), 0);
});
