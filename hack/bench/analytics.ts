// Benchmark of the governance analytics endpoints, run by hand against the local PostgreSQL (./hack/up, or the
// test database server); the template database must be migrated (`node hack/db.ts template <admin-url>`):
//   node hack/bench/analytics.ts [--traces 1000000] [--days 30] [--calls 50]
// Makes a fresh database, provisions one app's store (the real provisioning service), bulk-inserts
// --traces traces spread evenly over the last --days days with generate_series, as the API's
// database user (errors on 1 in 50, guard blocks on 1 in 20; the store's triggers fill its hourly
// rollups in the same statement), VACUUM ANALYZEs, then times --calls
// sequential calls of each query through AnalyticsService (the SQL the endpoints run, in a
// read-only transaction under the app's role; HTTP, auth and the app lookup are not included):
//   summary 7d        the default summary range (the last 7 days)
//   summary 30d       every trace
//   timeseries 30d/1h total_calls and avg_latency, 720 hourly buckets over every trace
// Every range ends at an unaligned instant, so the traces answer a partial hour at each edge.
// Baseline in the same run: the same 30-day summary and timeseries computed by scanning the traces
// (the SQL before the rollups). Prints p50/p95/max in ms, the ratio to the baseline, and the
// comparison with the goal: p95 under 200 ms.
import { randomBytes } from "node:crypto";
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import pg from "pg";
import { pino } from "pino";
import { openOrm } from "../../api/db/orm.ts";
import { uncachedApps } from "../../api/governance/stores/apps.ts";
import { Governance } from "../../api/governance/service.ts";
import { ident } from "../../api/governance/stores/names.ts";
import { AnalyticsService, timeseriesParams } from "../../api/governance/reads/analytics/service.ts";
import { resolveBuckets, resolveRange } from "../../api/governance/reads/analytics/range.ts";
import { timeseriesSql } from "../../api/governance/reads/analytics/sql.ts";
import { KubeClient, loadKubeConfig } from "../../kube/client.ts";

const { values } = parseArgs({
  options: {
    traces: { type: "string", default: "1000000" },
    days: { type: "string", default: "30" },
    calls: { type: "string", default: "50" },
  },
});
const N = Number(values.traces);
const DAYS = Number(values.days);
const CALLS = Number(values.calls);
const GOAL_P95_MS = 200;
const ADMIN = process.env.BERTH_TEST_ADMIN_DATABASE_URL ?? "postgres://berth:berth-local@127.0.0.1:26432/postgres";
const dbUrl = (db: string) => {
  const u = new URL(ADMIN);
  u.pathname = `/${db}`;
  return u.toString();
};
async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: ADMIN });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

const db = `bench_analytics_${randomBytes(4).toString("hex")}`;
await admin(`create database ${db} template berth_template`);
const url = dbUrl(db);
const workspaceId = `ws${[...randomBytes(10)].map((b) => "abcdefghijklmnopqrstuvwxyz234567"[b & 31]).join("")}`;
const namespace = `berth-${workspaceId}`;
const orm = await openOrm(url, { poolMax: 4 });
const pool = new pg.Pool({ connectionString: url, max: 2 });
const roles: string[] = [];
try {
  await pool.query(`insert into workspaces (id, name, namespace) values ($1, 'analytics bench', $2)`, [workspaceId, namespace]);
  const gov = new Governance({
    orm,
    apps: uncachedApps(new KubeClient(loadKubeConfig(process.env.KUBECONFIG)), "bench"),
    namespaceOf: () => Promise.resolve(namespace),
    host: "127.0.0.1:8080",
    log: pino({ level: "warn" }),
  });
  await gov.provisioning.provisionForOperator({ namespace, appName: "bench", appUid: "bench-uid", generation: 1 });
  const project = await gov.provisioning.project(workspaceId, "bench");
  if (!project) throw new Error("provisioning left no project");
  const store = { schema: project.schema, role: project.role };
  roles.push(project.role);
  const s = ident(store.schema);

  const now = Date.now();
  const t0 = performance.now();
  const span = DAYS * 86_400_000;
  await pool.query(
    `insert into ${s}.traces (trace_id, session_id, model, prompt, response, error, prompt_tokens, completion_tokens, total_tokens, latency_ms,
                              guard_blocked, guard_evaluations, eval_score, cost_usd, priced, price_version, created_at)
     select gen_random_uuid(), 's-' || (i % 1000), 'gpt-4o', 'How do I reset my password, question ' || i || '?', 'Open settings and choose reset password.',
            case when i % 50 = 0 then 'upstream timeout' end, 20 + i % 100, 10 + i % 50, 30 + i % 100 + i % 50, 100 + (i % 900),
            i % 20 = 0, '[]', 0.9, ((20 + i % 100) * 2.5 + (10 + i % 50) * 10) / 1e6, true, '2025-10-01',
            to_timestamp($2::float8 / 1000) - make_interval(secs => (i::float8 * $3::float8 / $1::float8) / 1000)
       from generate_series(1, $1::int) as i`,
    [N, now, span],
  );
  await pool.query(`vacuum analyze ${s}.traces`);
  await pool.query(`vacuum analyze ${s}.traces_hourly`);
  console.log(
    `analytics benchmark: ${N} traces over ${DAYS} days inserted and vacuumed in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${CALLS} sequential calls per query`,
  );
  console.log(
    `node ${process.version}, ${availableParallelism()} cores, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}; PostgreSQL and this client share the machine`,
  );

  const a = new AnalyticsService(gov);
  const end = new Date(now + 1000).toISOString();
  const runs: [string, () => Promise<unknown>][] = [
    ["summary 7d (default)", () => a.summaryOf(store, "bench", resolveRange({ end }, now))],
    [`summary ${DAYS}d`, () => a.summaryOf(store, "bench", resolveRange({ start: new Date(now - span - 1000).toISOString(), end }, now))],
    [
      `timeseries ${DAYS}d/1h total_calls`,
      () =>
        a.timeseriesOf(
          store,
          "total_calls",
          resolveBuckets({ start: new Date(now - span - 1000).toISOString(), end, interval: "1h" }, now),
        ),
    ],
    [
      `timeseries ${DAYS}d/1h avg_latency`,
      () =>
        a.timeseriesOf(
          store,
          "avg_latency",
          resolveBuckets({ start: new Date(now - span - 1000).toISOString(), end, interval: "1h" }, now),
        ),
    ],
  ];
  const check = await a.summaryOf(store, "bench", resolveRange({ start: new Date(now - span - 1000).toISOString(), end }, now));
  if (check.totalCalls !== N) throw new Error(`expected ${N} calls, got ${check.totalCalls}`);
  // the baseline: the same answers from a scan of the traces (the analytics SQL before the rollups)
  const start30 = new Date(now - span - 1000).toISOString();
  const scan = (sql: string, args: unknown[]) => () => gov.db.appTx(store.role, (c) => c.query(sql, args), { readOnly: true });
  const baseline: [string, () => Promise<unknown>][] = [
    [
      `baseline: summary ${DAYS}d, scan`,
      scan(
        `select count(*), sum(total_tokens), avg(latency_ms), sum(cost_usd), count(*) filter (where guard_blocked), count(*) filter (where error is not null)
         from ${s}.traces where created_at >= $1 and created_at < $2`,
        [start30, end],
      ),
    ],
    [
      `baseline: timeseries ${DAYS}d/1h, scan`,
      scan(
        `select date_bin('1 hour', created_at, '2000-01-03Z'), count(*) from ${s}.traces where created_at >= $1 and created_at < $2 group by 1 order by 1`,
        [start30, end],
      ),
    ],
  ];
  const time = async (fn: () => Promise<unknown>) => {
    for (let i = 0; i < 3; i++) await fn(); // warm-up
    const ms: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await fn();
      ms.push(performance.now() - t);
    }
    ms.sort((x, y) => x - y);
    const q = (f: number) => ms[Math.min(ms.length - 1, Math.ceil(f * ms.length) - 1)]!;
    return { p50: q(0.5), p95: q(0.95), max: ms.at(-1)! };
  };
  const row = (name: string, r: { p50: number; p95: number; max: number }, extra = "") =>
    console.log(
      `${name.padEnd(34)} ${r.p50.toFixed(1).padStart(7)}  ${r.p95.toFixed(1).padStart(7)}  ${r.max.toFixed(1).padStart(7)}${extra}`,
    );
  let met = true;
  console.log("\nquery                              p50 ms   p95 ms   max ms");
  const base: Record<string, number> = {};
  for (const [name, fn] of baseline) {
    const r = await time(fn);
    base[name.includes("summary") ? "summary" : "timeseries"] = r.p95;
    row(name, r);
  }
  for (const [name, fn] of runs) {
    const r = await time(fn);
    if (r.p95 >= GOAL_P95_MS) met = false;
    const b = base[name.startsWith("summary") ? "summary" : "timeseries"]!;
    row(name, r, `   p95 ${(r.p95 / b).toFixed(3)}x the scan's`);
  }
  const plan = await pool.query(
    `explain (analyze, buffers) ${timeseriesSql(store.schema, "total_calls")}`,
    timeseriesParams(resolveBuckets({ start: start30, end, interval: "1h" }, now)),
  );
  console.log(
    `\nplan of the 30-day hourly timeseries:\n${plan.rows.map((r: Record<string, string>) => `  ${r["QUERY PLAN"]}`).join("\n")}`,
  );
  console.log(`\ncomparison: p95 under ${GOAL_P95_MS} ms for every query: ${met ? "MET" : "MISSED"}`);
  await gov.close();
} finally {
  await pool.end();
  await orm.close();
  await admin(`drop database if exists ${db} with (force)`);
  for (const r of roles) await admin(`drop role if exists "${r}"`);
}
