// Range resolution of the analytics endpoints (api/governance/reads/analytics/range.ts): pure.
import test from "ava";
import { binStart, resolveBuckets, resolveRange, wholeHours } from "../../../api/governance/reads/analytics/range.ts";
import { ValidationError } from "../../../api/errors.ts";

const at = (s: string) => Date.parse(s);
const r = (start: string, end: string) => ({ start: new Date(start), end: new Date(end) });
const show = (x: { start: Date; end: Date }) => [x.start.toISOString(), x.end.toISOString()];

test("binStart: hours, 6-hour blocks from midnight UTC, UTC days and ISO weeks", (t) => {
  t.is(new Date(binStart(at("2026-11-18T13:45:10.5Z"), "1h")).toISOString(), "2026-11-18T13:00:00.000Z");
  t.is(new Date(binStart(at("2026-11-18T13:45:10.5Z"), "6h")).toISOString(), "2026-11-18T12:00:00.000Z");
  t.is(new Date(binStart(at("2026-11-18T13:45:10.5Z"), "1d")).toISOString(), "2026-11-18T00:00:00.000Z");
  t.is(new Date(binStart(at("2026-11-18T13:45:10.5Z"), "7d")).toISOString(), "2026-11-16T00:00:00.000Z", "a Monday");
  t.is(binStart(at("2026-11-18T13:00:00Z"), "1h"), at("2026-11-18T13:00:00Z"), "a boundary starts its own bucket");
  t.is(new Date(binStart(at("1999-12-31T23:30:00Z"), "1h")).toISOString(), "1999-12-31T23:00:00.000Z", "before the origin");
});

test("wholeHours: the whole hours inside a range; none for a range inside one hour", (t) => {
  t.deepEqual(show(wholeHours(r("2026-11-18T10:00:00Z", "2026-11-18T14:00:00Z"))), [
    "2026-11-18T10:00:00.000Z",
    "2026-11-18T14:00:00.000Z",
  ]);
  t.deepEqual(show(wholeHours(r("2026-11-18T10:00:00.001Z", "2026-11-18T13:59:59.999Z"))), [
    "2026-11-18T11:00:00.000Z",
    "2026-11-18T13:00:00.000Z",
  ]);
  t.deepEqual(
    show(wholeHours(r("2026-11-18T10:15:00Z", "2026-11-18T11:30:00Z"))),
    ["2026-11-18T11:00:00.000Z", "2026-11-18T11:00:00.000Z"],
    "no whole hour, edges meet",
  );
  t.deepEqual(
    show(wholeHours(r("2026-11-18T10:15:00Z", "2026-11-18T10:45:00Z"))),
    ["2026-11-18T10:45:00.000Z", "2026-11-18T10:45:00.000Z"],
    "inside one hour: the traces answer all of it",
  );
  t.deepEqual(show(wholeHours(r("2026-11-18T10:00:00Z", "2026-11-18T10:30:00Z"))), [
    "2026-11-18T10:00:00.000Z",
    "2026-11-18T10:00:00.000Z",
  ]);
});

test("resolveRange: defaults to the last 7 days; start must be before end", (t) => {
  const now = at("2026-11-21T12:00:00Z");
  t.deepEqual(show(resolveRange({}, now)), ["2026-11-14T12:00:00.000Z", "2026-11-21T12:00:00.000Z"]);
  t.deepEqual(show(resolveRange({ end: "2026-11-20T00:00:00Z" }, now)), ["2026-11-13T00:00:00.000Z", "2026-11-20T00:00:00.000Z"]);
  const e = t.throws(() => resolveRange({ start: "2026-11-20T00:00:00Z", end: "2026-11-20T00:00:00Z" }, now), {
    instanceOf: ValidationError,
  });
  t.regex(JSON.stringify(e), /query\.start/);
});

test("resolveBuckets: 24 default buckets ending with the current one; the first label floors start; at most 2000", (t) => {
  const now = at("2026-11-21T12:34:00Z");
  const d = resolveBuckets({ interval: "1h" }, now);
  t.is(d.count, 24);
  t.is(d.first.toISOString(), "2026-11-20T13:00:00.000Z");
  const u = resolveBuckets({ interval: "6h", start: "2026-11-20T05:00:00Z", end: "2026-11-21T00:00:01Z" }, now);
  t.deepEqual([u.first.toISOString(), u.count], ["2026-11-20T00:00:00.000Z", 5]);
  t.throws(() => resolveBuckets({ interval: "1h", start: "2026-01-01T00:00:00Z", end: "2026-11-01T00:00:00Z" }, now), {
    instanceOf: ValidationError,
    message: /./,
  });
  t.is(
    resolveBuckets({ interval: "1h", start: "2026-08-01T00:00:00Z", end: "2026-10-23T08:00:00Z" }, now).count,
    2000,
    "exactly the cap is allowed",
  );
});
