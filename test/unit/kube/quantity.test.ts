import test from "ava";
import { parseQuantity } from "../../../kube/quantity.ts";

const table: [string, number][] = [
  ["1", 1],
  ["250m", 0.25],
  ["12345n", 0.000012345],
  ["250u", 0.00025],
  ["1.5", 1.5],
  [".5", 0.5],
  ["128Mi", 128 * 2 ** 20],
  ["1Gi", 2 ** 30],
  ["12345Ki", 12345 * 1024],
  ["2k", 2000],
  ["1M", 1e6],
  ["1e3", 1000],
  ["5E-2", 0.05],
  ["-1", -1],
];
for (const [q, want] of table)
  test(`parseQuantity(${q})`, (t) => t.true(Math.abs(parseQuantity(q) - want) < 1e-12 * Math.max(1, want), `${parseQuantity(q)}`));

for (const bad of ["", "Mi", "1Xi", "1.2.3", "abc", "1 Gi"])
  test(`parseQuantity refuses ${JSON.stringify(bad)}`, (t) => {
    t.throws(() => parseQuantity(bad));
  });
