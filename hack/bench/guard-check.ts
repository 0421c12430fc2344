// Benchmark of guard checks, run by hand against the local PostgreSQL (./hack/up, or the test
// database server) and control plane; the template database must be migrated
// (`node hack/db.ts template <admin-url>`):
//   node hack/bench/guard-check.ts [--iterations 2000] [--warmup 200] [--workers N] [--templates]
// What a toolkit without the guard engine pays to ask the API (POST /governance/guard-check) for
// a decision, against the TypeScript toolkit deciding in-process. Serves the real API (node
// api/main.ts, a separate process, its guard budget off) on a fresh database, provisions an app's
// store, fetches GET /governance/config with its key and compiles the engine from it, as the
// toolkit does at boot. Then, per scenario, the same prompts both ways, one call at a time, in
// alternating rounds of 100 so that both see the same machine:
//   in-process   evaluateWithClassifier on the compiled engine (what the TypeScript toolkit runs)
//   API          POST /governance/guard-check over a kept-alive loopback connection, answer parsed
// Scenarios: a short prompt (about 60 characters) and a 4 KB one, each made distinct per call.
// The first answer of each scenario is compared, whole, with the in-process decision (the bench
// stops if they differ). Prints wall p50/p99 of both, the latency the API adds (API minus
// in-process, per percentile), the ratio API / in-process, and the HTTP floor of the same
// connection (GET /healthz) for scale. --workers sets BERTH_INGEST_WORKERS of the API (0: checks
// on its main thread); --templates adds a redacting PII template and a toxicity template.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { pino } from "pino";
import { openOrm } from "../../api/db/orm.ts";
import { uncachedApps } from "../../api/governance/stores/apps.ts";
import { Governance } from "../../api/governance/service.ts";
import { ToolkitConfig } from "../../api/governance/schemas.ts";
import {
  evaluateWithClassifier,
  GuardEngine,
  GuardTemplateConfig,
  sharedInjectionClassifier,
  usesClassifier,
} from "../../toolkit/src/index.ts";
import { KubeClient, loadKubeConfig } from "../../kube/client.ts";
import { freePort, untilHealthy } from "./proc.ts";
import { quantile } from "./series.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "2000" },
    warmup: { type: "string", default: "200" },
    workers: { type: "string" },
    templates: { type: "boolean", default: false },
  },
});
const N = Number(values.iterations);
const WARMUP = Number(values.warmup);
const ROUND = 100;
const root = join(import.meta.dirname, "../..");
const ADMIN = process.env.BERTH_TEST_ADMIN_DATABASE_URL ?? "postgres://berth:berth-local@127.0.0.1:26432/postgres";
const KUBECONFIG = process.env.KUBECONFIG ?? join(root, ".local/kubeconfig");

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

// ---- prompts ----------------------------------------------------------------------------------

function toLength(base: string, n: number): string {
  let s = base;
  while (s.length < n) s += " " + base;
  return s.slice(0, n);
}
const SUPPORT =
  "Hello, I placed an order last Tuesday for a pair of running shoes and a rain jacket, and the delivery was supposed to arrive on Friday. " +
  "The tracking page still says the parcel is being prepared, which seems odd after almost a week. Could you check whether the shipping " +
  "label was created and whether the payment went through? I would also like to know if I can change the delivery address to my office.";
const SCENARIOS: { name: string; prompt: (i: number) => string }[] = [
  { name: "short prompt", prompt: (i) => `Can I still change the delivery address of order ${1_000_000 + i}?` },
  // distinct per call: the call number leads, so the 4 KB stay 4 KB
  { name: "4 KB prompt", prompt: (i) => toLength(`(${i}) ${SUPPORT}`, 4096) },
];

// ---- the API server process ------------------------------------------------------------------

async function startServer(url: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(root, "api/main.ts")], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      KUBECONFIG,
      BERTH_API_HOST: "127.0.0.1",
      BERTH_API_PORT: String(port),
      BERTH_LOG_LEVEL: "warn",
      // thousands of checks in a row with one key: far above its budget, which is not measured here
      BERTH_RATE_LIMIT_GUARD_PER_SECOND: "0",
      ...(values.workers === undefined ? {} : { BERTH_INGEST_WORKERS: values.workers }),
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  return untilHealthy(child, port);
}

// ---- measurement -------------------------------------------------------------------------------

interface Percentiles {
  p50: number;
  p99: number;
}
const percentiles = (ms: readonly number[]): Percentiles => ({ p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) });

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

// ---- main ------------------------------------------------------------------------------------

const db = `bench_guard_check_${randomBytes(4).toString("hex")}`;
await admin(`create database ${db} template berth_template`);
const url = dbUrl(db);
const workspaceId = `ws${[...randomBytes(10)].map((b) => "abcdefghijklmnopqrstuvwxyz234567"[b & 31]).join("")}`;
const namespace = `berth-${workspaceId}`;
const orm = await openOrm(url, { poolMax: 2 });
const pool = new pg.Pool({ connectionString: url, max: 2 });
let server: ChildProcess | undefined;
const roles: string[] = [];
try {
  await pool.query(`insert into workspaces (id, name, namespace) values ($1, 'guard-check bench', $2)`, [workspaceId, namespace]);
  const gov = new Governance({
    orm,
    apps: uncachedApps(new KubeClient(loadKubeConfig(KUBECONFIG)), "bench"),
    namespaceOf: () => Promise.resolve(namespace),
    host: "127.0.0.1:8080",
    log: pino({ level: "warn" }),
  });
  const p = await gov.provisioning.provisionForOperator({ namespace, appName: "bench", appUid: "bench-uid", generation: 1 });
  roles.push(`govr_${workspaceId}_bench`);
  const key = /^govdb:\/\/([^@]+)@/.exec(p.connectionString)![1]!;
  if (values.templates) {
    const em = orm.em.fork();
    const ids: string[] = [];
    for (const [name, guardType, config] of [
      ["Redact PII", "pii_detection", { action: "redact" }],
      ["Toxicity", "toxicity", {}],
    ] as const)
      ids.push(
        (await gov.templates.create(em, null, { name, description: null, guardType, config: GuardTemplateConfig.parse(config) })).id,
      );
    await gov.configs.update(orm.em.fork(), workspaceId, "bench", {
      guards: { custom_templates: ids.map((template_id) => ({ template_id })) },
    });
  }
  const port = await freePort();
  server = await startServer(url, port);
  const base = `http://127.0.0.1:${port}`;
  const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };

  // the toolkit's boot: the engine config the API serves to this key, compiled once
  const configAnswer = await fetch(`${base}/api/v1/governance/config`, { headers });
  if (!configAnswer.ok) throw new Error(`GET /governance/config: ${configAnswer.status}`);
  const engine = new GuardEngine(ToolkitConfig.parse(await configAnswer.json()).engine);
  const classifier = usesClassifier(engine) ? await sharedInjectionClassifier() : undefined;
  const inProcess = async (text: string) => {
    const { verdicts: _, ...decision } = await evaluateWithClassifier(engine, text, "input", classifier);
    return decision;
  };
  const viaApi = async (text: string): Promise<unknown> => {
    const res = await fetch(`${base}/api/v1/governance/guard-check`, {
      method: "POST",
      headers,
      body: JSON.stringify({ phase: "input", text }),
    });
    const body: unknown = await res.json();
    if (res.status !== 200) throw new Error(`guard check: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    return body;
  };

  console.log(
    `guard-check benchmark: ${N} calls per scenario and side after ${WARMUP} warm-up, one at a time, in alternating rounds of ${ROUND}; ` +
      `${values.templates ? "default config + PII redaction and toxicity templates" : "default config"}; API scoring workers ${values.workers ?? "default"}`,
  );
  console.log(
    `node ${process.version}, ${availableParallelism()} cores, load average before ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}; the API, PostgreSQL and this client share the machine`,
  );

  const f = (ms: number) => ms.toFixed(3).padStart(7);
  console.log("\nscenario       | in-process p50     p99 | API p50     p99 | added p50     p99 | ratio p50    p99  (ms)");
  for (const s of SCENARIOS) {
    const first = s.prompt(0);
    const [api, local] = [await viaApi(first), await inProcess(first)];
    if (!isDeepStrictEqual(api, JSON.parse(JSON.stringify(local))))
      throw new Error(`${s.name}: the API's decision differs from the in-process one:\n${JSON.stringify(api)}\n${JSON.stringify(local)}`);
    for (let i = 1; i <= WARMUP; i++) {
      await viaApi(s.prompt(-i));
      await inProcess(s.prompt(-i));
    }
    const apiMs: number[] = [];
    const localMs: number[] = [];
    for (let at = 1; at <= N; at += ROUND) {
      const calls = Array.from({ length: Math.min(ROUND, N - at + 1) }, (_, k) => s.prompt(at + k));
      for (const text of calls) apiMs.push(await timed(() => viaApi(text)));
      for (const text of calls) localMs.push(await timed(() => inProcess(text)));
    }
    const a = percentiles(apiMs);
    const l = percentiles(localMs);
    console.log(
      `${s.name.padEnd(14)} |        ${f(l.p50)} ${f(l.p99)} | ${f(a.p50)} ${f(a.p99)} |   ${f(a.p50 - l.p50)} ${f(a.p99 - l.p99)} | ${(a.p50 / l.p50).toFixed(1).padStart(7)} ${(a.p99 / l.p99).toFixed(1).padStart(6)}`,
    );
  }
  const floor: number[] = [];
  for (let i = 0; i < N; i++) floor.push(await timed(async () => (await fetch(`${base}/healthz`)).text()));
  const h = percentiles(floor);
  console.log(`\nHTTP floor, same client and server (GET /healthz): p50 ${f(h.p50)} ms, p99 ${f(h.p99)} ms`);
  console.log(
    `load average after ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
} catch (err) {
  // the message only: a pg error object carries its client, and the client its connection settings
  console.error(`bench failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  server?.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 500));
  await pool.end();
  await orm.close();
  await admin(`drop database if exists ${db} with (force)`);
  for (const r of roles) await admin(`drop role if exists "${r}"`);
}
