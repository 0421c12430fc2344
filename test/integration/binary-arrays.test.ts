// Array parameters in PostgreSQL's binary format (api/db/binary-arrays.ts), round-tripped through a
// real server: every element type ingestion sends, with NULLs, empty arrays and edge values, read
// back as text (or epoch milliseconds) and compared with what was meant; and a multi-row insert
// written from a column table (api/db/unnest.ts). Real PostgreSQL.
import test from "ava";
import pg from "pg";
import { binaryArray } from "../../api/db/binary-arrays.ts";
import { StatementParams } from "../../api/db/unnest.ts";
import { adminUrl } from "../helpers/db.ts";

let client: pg.Client;
test.before(async () => {
  client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
});
test.after.always(async () => {
  await client?.end();
});

/** The elements of the array parameter as the server sees them, as text (NULL stays null), in order. */
async function roundTrip(type: string, param: Buffer, as = "x::text"): Promise<(string | null)[]> {
  const { rows } = await client.query<{ v: string | null }>(
    `select ${as} as v from unnest($1::${type}[]) with ordinality as u(x, i) order by i`,
    [param],
  );
  return rows.map((r) => r.v);
}

test("uuid: canonical strings of either case, NULLs; the server reads the 16 bytes", async (t) => {
  const ids = [
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "0190F3C2-7A4B-7C1D-8E2F-0123456789AB",
    null,
  ];
  t.deepEqual(await roundTrip("uuid", binaryArray("uuid", ids)), [
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "0190f3c2-7a4b-7c1d-8e2f-0123456789ab",
    null,
  ]);
  t.throws(() => binaryArray("uuid", ["0190f3c2-7a4b-7c1d-8e2f-0123456789a"]), { instanceOf: TypeError });
  t.throws(() => binaryArray("uuid", ["0190f3c2x7a4b-7c1d-8e2f-0123456789ab"]), { instanceOf: TypeError });
  t.throws(() => binaryArray("uuid", ["0190f3c2-7a4b-7c1d-8e2f-0123456789ag"]), { instanceOf: TypeError });
  // runs of one id (the eval rows of a trace) reuse the bytes just written; a NULL or another id breaks the run
  const a = "0190f3c2-7a4b-7c1d-8e2f-0123456789ab";
  const b = "ffffffff-0000-7c1d-8e2f-0123456789ab";
  const runs = [a, a, a, b, b, null, a, a];
  t.deepEqual(await roundTrip("uuid", binaryArray("uuid", runs)), runs);
});

test("text: empty, accents, emoji (surrogate pairs), quotes and backslashes, long text, NULL", async (t) => {
  const texts = ["", "héllo wörld", "🚀 launch 👩🏽‍💻", `"quoted" \\ back\\slash {braces}, commas`, "x".repeat(100_000), null, "NULL"];
  t.deepEqual(await roundTrip("text", binaryArray("text", texts)), texts);
  t.deepEqual(
    await roundTrip("text", binaryArray("text", texts), "octet_length(x)::text"),
    texts.map((s) => (s === null ? null : String(Buffer.byteLength(s)))),
  );
  t.throws(() => binaryArray("text", [42]), { instanceOf: TypeError });
  // arrays are built in a reused scratch buffer and copied out: one built later leaves an earlier one intact
  const first = binaryArray("text", ["first", "élan"]);
  const before = Buffer.from(first);
  binaryArray("text", ["second array, longer than the first one", "x".repeat(70_000)]);
  t.true(first.equals(before));
  t.deepEqual(await roundTrip("text", first), ["first", "élan"]);
  // beyond the scratch buffer's cap (4 MiB by the upper bound of 3 bytes per unit), an array gets a buffer of its own
  const huge = ["é".repeat(1_500_000), "tail"];
  t.deepEqual(await roundTrip("text", binaryArray("text", huge), "length(x)::text"), ["1500000", "4"]);
});

test("int2, int4, int8: the limits of each, negatives, NULL; int8 beyond 32 bits and unsafe integers refused", async (t) => {
  t.deepEqual(await roundTrip("int2", binaryArray("int2", [0, 1, -1, 32767, -32768, null])), ["0", "1", "-1", "32767", "-32768", null]);
  t.deepEqual(await roundTrip("int4", binaryArray("int4", [0, -1, 2147483647, -2147483648, null])), [
    "0",
    "-1",
    "2147483647",
    "-2147483648",
    null,
  ]);
  const big = [0, -1, 2 ** 32, -(2 ** 32), 2 ** 40 + 7, -(2 ** 40) - 7, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, null];
  t.deepEqual(
    await roundTrip("int8", binaryArray("int8", big)),
    big.map((n) => (n === null ? null : String(n))),
  );
  t.throws(() => binaryArray("int8", [2 ** 53]), { instanceOf: TypeError });
  t.throws(() => binaryArray("int8", [1.5]), { instanceOf: TypeError });
});

test("float8: fractions, negative zero, extremes, infinities, NaN, NULL", async (t) => {
  const xs = [0.1, 1 / 3, -0, 1e308, 5e-324, -2.5, Infinity, -Infinity, NaN, null];
  t.deepEqual(await roundTrip("float8", binaryArray("float8", xs)), [
    "0.1",
    "0.3333333333333333",
    "-0",
    "1e+308",
    "5e-324",
    "-2.5",
    "Infinity",
    "-Infinity",
    "NaN",
    null,
  ]);
});

test("bool and jsonb: true, false, NULL; JSON objects, arrays, scalars and the JSON null (not SQL NULL)", async (t) => {
  t.deepEqual(await roundTrip("bool", binaryArray("bool", [true, false, null])), ["true", "false", null]);
  const docs = [`{"b":[1,2,{"c":"é🚀"}],"a":null}`, "[]", `"text"`, "3.5", "null", null];
  t.deepEqual(await roundTrip("jsonb", binaryArray("jsonb", docs)), [
    `{"a": null, "b": [1, 2, {"c": "é🚀"}]}`,
    "[]",
    `"text"`,
    "3.5",
    "null",
    null,
  ]);
  // malformed JSON is the server's to refuse (the encoder does not parse it)
  await t.throwsAsync(roundTrip("jsonb", binaryArray("jsonb", ["{not json"])), { message: /invalid input syntax for type json/ });
});

test("timestamptz: ISO strings with offsets, Dates, Unix milliseconds, before PostgreSQL's epoch (2000), far future, milliseconds kept, NULL", async (t) => {
  const at = [
    "2026-11-22T10:15:30.123Z",
    "2026-11-22T12:15:30.123+02:00",
    new Date("1999-12-31T23:59:59.999Z"),
    "1970-01-01T00:00:00.000Z",
    "2000-01-01T00:00:00.001Z",
    "2300-06-01T00:00:00.000Z",
    null,
    Date.parse("2026-11-22T10:15:30.456Z"),
    -1,
    946_684_800_000,
  ];
  const ms = at.map((v) => (v === null ? null : String(typeof v === "number" ? v : typeof v === "string" ? Date.parse(v) : v.getTime())));
  t.deepEqual(await roundTrip("timestamptz", binaryArray("timestamptz", at), "(extract(epoch from x) * 1000)::bigint::text"), ms);
  t.throws(() => binaryArray("timestamptz", ["yesterday"]), { instanceOf: TypeError });
});

test("empty arrays of every type are empty arrays (not NULL); an element type that does not match the cast is refused", async (t) => {
  for (const type of ["uuid", "text", "int2", "int4", "int8", "float8", "bool", "jsonb", "timestamptz"] as const) {
    const { rows } = await client.query<{ n: number | null; isnull: boolean }>(
      `select cardinality($1::${type}[]) as n, $1::${type}[] is null as isnull`,
      [binaryArray(type, [])],
    );
    t.deepEqual(rows[0], { n: 0, isnull: false }, type);
  }
  await t.throwsAsync(client.query("select $1::int8[]", [binaryArray("int4", [1])]), {
    message: /array element type 23 \(integer\) instead of expected 20 \(bigint\)/,
  });
});

test("an insert from a column table: each column gets its own values, a shared parameter serves several columns", async (t) => {
  interface Rows {
    ids: string[];
    names: (string | null)[];
    scores: number[];
    batch: string;
  }
  const p = new StatementParams<Rows>();
  const batch = p.param((r) => r.batch);
  // the table's column order differs from the parameters' (the shared one is numbered first)
  const text = `${p.insert("unnest_rows", [
    { column: "name", type: "text", values: (r) => r.names },
    { column: "batch", param: batch },
    { column: "id", type: "uuid", values: (r) => r.ids },
    { column: "label", param: batch },
    { column: "score", type: "float8", values: (r) => r.scores },
  ])} where u.score >= 0`;
  t.regex(text, /unnest\(\$2::text\[\], \$3::uuid\[\], \$4::float8\[\]\) as u\(name, id, score\)/);
  await client.query("create temp table unnest_rows (id uuid, name text, score float8, batch text, label text)");
  const ids = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002", "00000000-0000-0000-0000-000000000003"];
  const r = await client.query(text, p.values({ ids, names: ["a", null, "c"], scores: [0.5, 1, -1], batch: "b1" }));
  t.is(r.rowCount, 2);
  const { rows } = await client.query("select id, name, score, batch, label from unnest_rows order by id");
  t.deepEqual(rows, [
    { id: ids[0], name: "a", score: 0.5, batch: "b1", label: "b1" },
    { id: ids[1], name: null, score: 1, batch: "b1", label: "b1" },
  ]);
});
