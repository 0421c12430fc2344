// The hourly rollups behind the analytics (store-sql.ts, analytics/sql.ts) against the real API and
// PostgreSQL. Traces and evals with pseudo-random values (a seeded generator: the same data every
// run) are inserted straight into a store from several connections at once, so the rollup rows are
// spread over shards; then every analytics endpoint, for ranges aligned and unaligned on hours,
// inside one hour, and random, must equal what this file computes from the same data in plain
// JavaScript. Also: ingestion through the API keeps the rollups equal to the traces under
// concurrent batches; a store made by the previous template (no rollups) is completed by
// upgradeStores with its history backfilled; the app's role can read the rollups, never change them.
import test, { type ExecutionContext } from "ava";
import pg from "pg";
import { STORE_TEMPLATE_VERSION } from "../../api/governance/stores/store-sql.ts";
import { INTERVALS, type Interval, type Metric } from "../../api/governance/reads/analytics/schemas.ts";
import { binStart } from "../../api/governance/reads/analytics/range.ts";
import { query } from "../helpers/db.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { provisionApp } from "../helpers/governance.ts";

let api: TestApi;
let token: string;

const H = 3_600_000;
const DAY = 24 * H;
const T0 = Math.floor((Date.now() - 5 * DAY) / DAY) * DAY; // midnight UTC five days ago
const SPAN = 50 * H;
const iso = (ms: number) => new Date(ms).toISOString();

/** mulberry32: a small seeded generator, so that a failure can be reproduced. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

interface Row {
  id: string;
  at: number;
  latency: number;
  p: number;
  c: number;
  error: boolean;
  blocked: boolean;
  cost: number;
}
interface Ev {
  trace: number;
  type: string;
  score: number;
  passed: boolean;
}

function generate(seed: number, n: number): { rows: Row[]; evals: Ev[] } {
  const r = rng(seed);
  const rows: Row[] = [];
  const evals: Ev[] = [];
  const types = ["relevance", "safety", "policy_compliance", "latency"];
  const scores = [0, 0.25, 0.5, 0.75, 1]; // exact in binary: the bucket of each is unambiguous
  for (let i = 0; i < n; i++) {
    // every tenth trace sits exactly on an hour, some a millisecond either side of one
    const at = i % 10 === 0 ? T0 + Math.floor(r() * 50) * H + (i % 30 === 0 ? -1 : i % 20 === 0 ? 1 : 0) : T0 + Math.floor(r() * SPAN);
    const p = Math.floor(r() * 500);
    const c = Math.floor(r() * 300);
    rows.push({
      id: crypto.randomUUID(),
      at,
      latency: Math.floor(r() * 3000) + r(),
      p,
      c,
      error: r() < 0.1,
      blocked: r() < 0.12,
      cost: r() / 100,
    });
    const k = Math.floor(r() * 4);
    for (let j = 0; j < k; j++)
      evals.push({ trace: i, type: types[Math.floor(r() * 4)]!, score: r() < 0.5 ? scores[Math.floor(r() * 5)]! : r(), passed: r() < 0.6 });
  }
  return { rows, evals };
}

async function insert(url: string, schema: string, rows: Row[], evals: Ev[], ids: string[]): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(
      `insert into "${schema}".traces (trace_id, model, prompt, response, error, prompt_tokens, completion_tokens, total_tokens, latency_ms, guard_blocked,
                                       guard_evaluations, eval_score, cost_usd, priced, price_version, created_at)
       select u.id, 'gpt-4o', 'p', 'r', case when u.err then 'failed' end, u.p, u.c, u.p + u.c, u.lat, u.blocked, '[]', 0.5, u.cost, true, 'v', u.at
         from unnest($1::uuid[], $2::bool[], $3::int[], $4::int[], $5::float8[], $6::bool[], $7::float8[], $8::timestamptz[]) as u(id, err, p, c, lat, blocked, cost, at)`,
      [
        rows.map((x) => x.id),
        rows.map((x) => x.error),
        rows.map((x) => x.p),
        rows.map((x) => x.c),
        rows.map((x) => x.latency),
        rows.map((x) => x.blocked),
        rows.map((x) => x.cost),
        rows.map((x) => iso(x.at)),
      ],
    );
    if (evals.length > 0) {
      await c.query(
        `insert into "${schema}".evals (trace_id, eval_type, score, passed, details) select * , '' from unnest($1::uuid[], $2::text[], $3::float8[], $4::bool[])`,
        [evals.map((e) => ids[e.trace]), evals.map((e) => e.type), evals.map((e) => e.score), evals.map((e) => e.passed)],
      );
    }
  } finally {
    await c.end();
  }
}

/** Inserts the data in `parts` statements over `parts` connections at once. */
async function insertConcurrently(schema: string, data: { rows: Row[]; evals: Ev[] }, parts: number): Promise<void> {
  const ids = data.rows.map((x) => x.id);
  const size = Math.ceil(data.rows.length / parts);
  await Promise.all(
    Array.from({ length: parts }, (_, k) => {
      const lo = k * size;
      const hi = Math.min(data.rows.length, lo + size);
      return insert(
        api.db.url,
        schema,
        data.rows.slice(lo, hi),
        data.evals.filter((e) => e.trace >= lo && e.trace < hi),
        ids,
      );
    }),
  );
}

// ---- the expectations, in plain JavaScript --------------------------------------------------------

interface Sums {
  calls: number;
  tokens: number;
  p: number;
  c: number;
  latency: number;
  cost: number;
  blocked: number;
  errors: number;
}
function sums(rows: Row[]): Sums {
  const s = { calls: 0, tokens: 0, p: 0, c: 0, latency: 0, cost: 0, blocked: 0, errors: 0 };
  for (const x of rows) {
    s.calls++;
    s.tokens += x.p + x.c;
    s.p += x.p;
    s.c += x.c;
    s.latency += x.latency;
    s.cost += x.cost;
    if (x.blocked) s.blocked++;
    if (x.error) s.errors++;
  }
  return s;
}
const within = (rows: Row[], start: number, end: number) => rows.filter((x) => x.at >= start && x.at < end);
function metricOf(s: Sums, m: Metric): number {
  if (s.calls === 0) return 0;
  return {
    total_calls: s.calls,
    total_tokens: s.tokens,
    avg_latency: s.latency / s.calls,
    total_cost: s.cost,
    error_rate: s.errors / s.calls,
  }[m];
}
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));

const provision = (name: string) => provisionApp(api, token, name);

const base = (app: string) => `/workspaces/${api.workspaceId}/governance/apps/${app}/analytics`;
const q = (start: number, end: number) => `start=${encodeURIComponent(iso(start))}&end=${encodeURIComponent(iso(end))}`;

/** Checks summary, token usage and eval distribution of [start, end) against the data. */
async function checkRange(t: ExecutionContext, app: string, data: { rows: Row[]; evals: Ev[] }, start: number, end: number): Promise<void> {
  const label = `[${iso(start)}, ${iso(end)})`;
  const rows = within(data.rows, start, end);
  const s = sums(rows);
  const summary = await api.fetchJson("GET", `${base(app)}/summary?${q(start, end)}`);
  t.is(summary.status, 200, summary.text);
  t.deepEqual(
    [summary.body.totalCalls, summary.body.totalTokens, summary.body.blockedByGuard],
    [s.calls, s.tokens, s.blocked],
    `summary ${label}`,
  );
  t.true(
    close(summary.body.avgLatencyMs, s.calls ? s.latency / s.calls : 0),
    `avgLatencyMs ${label}: ${summary.body.avgLatencyMs} vs ${s.latency / s.calls}`,
  );
  t.true(close(summary.body.totalCostUsd, s.cost), `totalCostUsd ${label}`);
  t.true(close(summary.body.errorRate, s.calls ? s.errors / s.calls : 0), `errorRate ${label}`);

  const tokens = await api.fetchJson("GET", `${base(app)}/token-usage?${q(start, end)}`);
  t.deepEqual(tokens.body, { promptTokens: s.p, completionTokens: s.c, totalTokens: s.tokens }, `token usage ${label}`);

  const dist = await api.fetchJson("GET", `${base(app)}/eval-distribution?${q(start, end)}`);
  const inRange = new Set(rows.map((x) => x.id));
  const expected = new Map<string, { count: number; sum: number; passed: number; counts: number[] }>();
  for (const e of data.evals) {
    if (!inRange.has(data.rows[e.trace]!.id)) continue;
    const x = expected.get(e.type) ?? { count: 0, sum: 0, passed: 0, counts: new Array<number>(10).fill(0) };
    expected.set(e.type, x);
    x.count++;
    x.sum += e.score;
    if (e.passed) x.passed++;
    x.counts[Math.min(Math.max(Math.floor(e.score * 10) + 1, 1), 10) - 1]!++;
  }
  const got = dist.body.byType as { evalType: string; count: number; mean: number; passRate: number; counts: number[] }[];
  t.deepEqual(
    got.map((g) => g.evalType),
    [...expected.keys()].sort(),
    `eval types ${label}`,
  );
  for (const g of got) {
    const x = expected.get(g.evalType)!;
    t.deepEqual([g.count, g.counts], [x.count, x.counts], `eval distribution ${g.evalType} ${label}`);
    t.true(close(g.mean, x.sum / x.count) && close(g.passRate, x.passed / x.count), `eval mean/pass rate ${g.evalType} ${label}`);
  }
}

async function checkSeries(
  t: ExecutionContext,
  app: string,
  data: { rows: Row[] },
  start: number,
  end: number,
  interval: Interval,
  metric: Metric,
): Promise<void> {
  const r = await api.fetchJson("GET", `${base(app)}/timeseries?${q(start, end)}&interval=${interval}&metric=${metric}`);
  t.is(r.status, 200, r.text);
  const w = INTERVALS[interval];
  const labels: string[] = [];
  const values: number[] = [];
  for (let b = binStart(start, interval); b < end; b += w) {
    labels.push(iso(b));
    values.push(metricOf(sums(within(data.rows, Math.max(b, start), Math.min(b + w, end))), metric));
  }
  t.deepEqual(r.body.labels, labels, `labels ${interval} [${iso(start)}, ${iso(end)})`);
  const bad = values.findIndex((v, i) => !close(r.body.values[i] as number, v));
  t.is(
    bad,
    -1,
    `${metric}/${interval} [${iso(start)}, ${iso(end)}): bucket ${labels[bad]} is ${r.body.values[bad]}, expected ${values[bad]}`,
  );
}

let roll: { rows: Row[]; evals: Ev[] };

test.before(async () => {
  api = await startApi();
  token = (await identity("operator")).token;
  const { schema } = await provision("roll");
  roll = generate(20261121, 3000);
  await insertConcurrently(schema, roll, 4);
});
test.after.always(async () => {
  await api?.stop();
});

test("summary, token usage and eval distribution equal the traces for aligned, unaligned, one-hour and random ranges", async (t) => {
  const ranges: [number, number][] = [
    [T0 - DAY, T0 + 3 * DAY], // everything
    [T0, T0 + SPAN], // whole hours only
    [T0 + 5 * H, T0 + 6 * H], // exactly one hour
    [T0 + 5 * H + 1, T0 + 6 * H - 1], // inside one hour, no whole hour
    [T0 + 5 * H + 17 * 60_000, T0 + 5 * H + 43 * 60_000],
    [T0 + 5 * H - 1, T0 + 6 * H + 1], // one whole hour and a millisecond either side
    [T0 + 7 * H + 1234, T0 + 30 * H], // unaligned start, aligned end
    [T0 + 7 * H, T0 + 30 * H + 999], // aligned start, unaligned end
    [T0 + 10 * H + 1, T0 + 11 * H], // the same hour's end: from = to
  ];
  const r = rng(7);
  for (let i = 0; i < 20; i++) {
    const a = T0 - H + Math.floor(r() * (SPAN + 2 * H));
    const b = T0 - H + Math.floor(r() * (SPAN + 2 * H));
    if (a !== b) ranges.push([Math.min(a, b), Math.max(a, b)]);
  }
  for (const [start, end] of ranges) await checkRange(t, "roll", roll, start, end);
});

test("timeseries equal the traces for every metric and interval, with unaligned edges", async (t) => {
  const metrics: Metric[] = ["total_calls", "total_tokens", "avg_latency", "total_cost", "error_rate"];
  const r = rng(11);
  for (const interval of Object.keys(INTERVALS) as Interval[]) {
    for (const metric of metrics) {
      await checkSeries(t, "roll", roll, T0 - H, T0 + SPAN + H, interval, metric);
      const a = T0 + Math.floor(r() * SPAN);
      const b = T0 + Math.floor(r() * SPAN);
      if (a !== b) await checkSeries(t, "roll", roll, Math.min(a, b), Math.max(a, b), interval, metric);
    }
  }
  await checkSeries(t, "roll", roll, T0 + 3 * H + 5, T0 + 3 * H + 50_000, "1h", "total_calls");
});

test("ingestion through the API under concurrent batches keeps the rollups equal to the traces", async (t) => {
  const { key, schema } = await provision("ingested");
  const r = rng(3);
  const batches = Array.from({ length: 8 }, () =>
    Array.from({ length: 40 }, () => {
      const p = Math.floor(r() * 100);
      return {
        traceId: crypto.randomUUID(),
        input: "What are your opening hours?",
        output: "Nine to five.",
        model: "gpt-4o",
        latency: Math.floor(r() * 500),
        tokens: { prompt: p, completion: 5, total: p + 5 },
        timestamp: iso(T0 + Math.floor(r() * 3 * H)),
      };
    }),
  );
  const results = await Promise.all(batches.map((traces) => api.fetchJson("POST", "/governance/traces", { key, body: { traces } })));
  t.deepEqual(
    results.map((x) => x.body.created),
    new Array(8).fill(40),
  );
  // a retried batch is all duplicates: the rollups do not move
  await api.fetchJson("POST", "/governance/traces", { key, body: { traces: batches[0] } });
  const byHour = (sql: string) => query<{ hour: string; calls: string; tokens: string; evals: string }>(api.db.url, sql);
  const raw = await byHour(
    `select date_bin('1 hour', created_at, '2000-01-03Z') as hour, count(*) as calls, sum(total_tokens) as tokens from "${schema}".traces group by 1 order by 1`,
  );
  const rolled = await byHour(
    `select hour, sum(calls) as calls, sum(total_tokens) as tokens from "${schema}".traces_hourly group by 1 order by 1`,
  );
  t.deepEqual(
    rolled.map((x) => [String(x.hour), x.calls, x.tokens]),
    raw.map((x) => [String(x.hour), x.calls, x.tokens]),
  );
  t.is(
    raw.reduce((a, x) => a + Number(x.calls), 0),
    320,
  );
  const [evals] = await query<{ raw: string; rolled: string }>(
    api.db.url,
    `select (select count(*) from "${schema}".evals) as raw, (select sum(n) from "${schema}".evals_hourly) as rolled`,
  );
  t.is(evals!.rolled, evals!.raw);
  t.true(Number(evals!.raw) > 0);
});

test("a store of the previous template is completed at start: rollups created and backfilled once", async (t) => {
  const { schema } = await provision("legacy");
  const before = generate(99, 400);
  await insertConcurrently(schema, before, 2);
  // what a store made by template version 1 looks like: no rollups, no evals.called_at, store_version 1
  await query(api.db.url, `drop table "${schema}".traces_hourly, "${schema}".evals_hourly`);
  await query(api.db.url, `alter table "${schema}".evals drop column called_at`);
  await query(api.db.url, `drop function "${schema}".traces_rollup() cascade`);
  await query(api.db.url, `drop function "${schema}".evals_rollup() cascade`);
  await query(api.db.url, `update governance_projects set store_version = 1 where app_id = 'legacy'`);

  t.is(await api.services.governance.provisioning.upgradeStores(), 1);
  t.is(await api.services.governance.provisioning.upgradeStores(), 0, "a second run finds nothing to do");
  const [row] = await query<{ store_version: number }>(api.db.url, `select store_version from governance_projects where app_id = 'legacy'`);
  t.is(row!.store_version, STORE_TEMPLATE_VERSION);

  // history backfilled, and what is inserted after the upgrade counted once
  const after = generate(100, 200);
  await insert(
    api.db.url,
    schema,
    after.rows,
    after.evals,
    after.rows.map((x) => x.id),
  );
  const all = {
    rows: [...before.rows, ...after.rows],
    evals: [...before.evals, ...after.evals.map((e) => ({ ...e, trace: e.trace + before.rows.length }))],
  };
  await checkRange(t, "legacy", all, T0 - DAY, T0 + 3 * DAY);
  await checkRange(t, "legacy", all, T0 + 2 * H + 1, T0 + 20 * H - 1);
});

test("the app's role reads the rollups and can change none of them", async (t) => {
  const [p] = await query<{ schema_name: string; role_name: string }>(
    api.db.url,
    `select schema_name, role_name from governance_projects where app_id = 'roll'`,
  );
  const c = new pg.Client({ connectionString: api.db.url });
  await c.connect();
  try {
    await c.query("begin");
    await c.query(`set local role "${p!.role_name}"`);
    const { rows } = await c.query(`select count(*)::int as n from "${p!.schema_name}".traces_hourly`);
    t.true(rows[0].n > 0);
    for (const sql of [
      `update "${p!.schema_name}".traces_hourly set calls = 0`,
      `delete from "${p!.schema_name}".evals_hourly`,
      `insert into "${p!.schema_name}".traces_hourly (hour, shard, calls, prompt_tokens, completion_tokens, total_tokens, latency_sum, cost_usd, blocked, errors) values (now(), 9, 1, 0, 0, 0, 0, 0, 0, 0)`,
    ]) {
      await c.query("savepoint s");
      const err = await c.query(sql).then(
        () => undefined,
        (e: { code?: string }) => e,
      );
      t.is(err?.code, "42501", `refused: ${sql}`);
      await c.query("rollback to savepoint s");
    }
  } finally {
    await c.query("rollback").catch(() => undefined);
    await c.end();
  }
});
