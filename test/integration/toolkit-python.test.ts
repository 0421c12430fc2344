// The Python toolkit (toolkit/python) against the real Berth API and PostgreSQL, as users get it:
// the wheel is built with `python -m build` and installed into a virtualenv under the Berth cache,
// then its pytest suite runs with the connection strings of apps provisioned here. This file is
// the driver: it provisions the apps (the default config, and one with PII-redact, toxicity,
// off_topic and custom templates), computes the golden corpus with the TypeScript GuardEngine fed
// the config the API serves each app (every example of test/fixtures/guards, as input and as
// output), runs pytest, and then checks what the Python side recorded: each record as the Python
// tests expect it and equal to what the TypeScript wrapper records for the same call (ids,
// timestamps, sessions and measured latencies aside), and every trace sent across an outage stored
// exactly once.
import test from "ava";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EngineConfigInput, Phase } from "../../toolkit/src/index.ts";
import { Governance, GuardBlockedError, GuardEngine, scoreWithClassifier, sharedInjectionClassifier } from "../../toolkit/src/index.ts";
import { withGovernance } from "../../toolkit/src/langchain/index.ts";
import { toolkitPython } from "../../hack/lib/python.ts";
import { freePort } from "../../hack/bench/proc.ts";
import { UsageChatModel } from "../helpers/chat-models.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { provisionApp, type ProvisionedApp } from "../helpers/governance.ts";
import { query } from "../helpers/db.ts";

const root = join(import.meta.dirname, "../..");
const fixtures = join(root, "test/fixtures/guards");

/** The connection names the Python tests read, and the app behind each. */
const APPS = { default: "pydefault", templates: "pytemplates", records: "pyrecords", queue: "pyqueue" } as const;
type ConfigName = keyof typeof APPS;

interface GoldenItem {
  id: string;
  phase: Phase;
  text: string;
  config_name: ConfigName;
  expected: Record<string, unknown>;
}

interface PyRecord {
  case: string;
  app: ConfigName;
  traceId: string;
  sessionId: string;
  call:
    | { kind: "invoke" | "stream"; prompts: string[]; responses: string[] }
    | { kind: "batch"; prompts: string[]; responses: string[]; index: number }
    | { kind: "plain"; sameAs: string };
  expected: Record<string, unknown>;
}

interface PyQueue {
  app: ConfigName;
  sessionId: string;
  plain: string[];
  wrapped: { traceId: string; metadata: Record<string, unknown> }[];
}

let api: TestApi;
const apps = new Map<ConfigName, ProvisionedApp>();
const work = mkdtempSync(join(tmpdir(), "berth-toolkit-python-"));
const out = join(work, "out");
let pytest: { code: number | null; output: string } | undefined;

const appPath = (name: ConfigName) => `/workspaces/${api.workspaceId}/governance/apps/${APPS[name]}`;

async function traceDetail(name: ConfigName, traceId: string) {
  const r = await api.fetchJson("GET", `${appPath(name)}/traces/${traceId}`);
  if (r.status !== 200) throw new Error(`trace ${traceId} of ${APPS[name]}: ${r.status} ${r.text}`);
  return r.body as Record<string, unknown>;
}

async function sessionTraces(name: ConfigName, sessionId: string) {
  const r = await api.fetchJson("GET", `${appPath(name)}/traces?session_id=${encodeURIComponent(sessionId)}&limit=100`);
  if (r.status !== 200) throw new Error(r.text);
  return r.body as { data: { traceId: string }[]; total: number };
}

/**
 * What the API recorded for a trace, without what differs between two records of the same call:
 * ids, timestamps, the session, the measured latency and the latency eval's text (which quotes it).
 */
async function recordOf(name: ConfigName, traceId: string) {
  const { traceId: _t, createdAt: _c, ingestedAt: _i, latencyMs: _l, sessionId: _s, ...trace } = await traceDetail(name, traceId);
  const evals = (await api.fetchJson("GET", `${appPath(name)}/evals?trace_id=${traceId}`)).body as Record<string, unknown>[];
  const blocks = ((await api.fetchJson("GET", `${appPath(name)}/guard-blocks?limit=100`)).body as Record<string, unknown>[]).filter(
    (b) => b.traceId === traceId,
  );
  const strip = ({ id: _id, traceId: _tid, createdAt: _ca, ...rest }: Record<string, unknown>) => rest;
  return {
    trace,
    evals: evals
      .map(strip)
      .map((e) => (e.evalType === "latency" ? { ...e, details: "(measured)" } : e))
      .sort((a, b) => String(a.evalType).localeCompare(String(b.evalType))),
    blocks: blocks.map(strip),
  };
}

async function createTemplate(name: string, guardType: string, config: Record<string, unknown>): Promise<string> {
  const r = await api.fetchJson("POST", "/governance/guard-templates", { key: api.adminKey, body: { name, guardType, config } });
  if (r.status !== 201) throw new Error(`template ${name}: ${r.text}`);
  return r.body.id as string;
}

/** The golden corpus: every fixture example, as input and as output, decided by the TypeScript engine with each app's served config. */
async function goldenCorpus(): Promise<GoldenItem[]> {
  const texts: { id: string; text: string }[] = [];
  for (const file of readdirSync(fixtures).filter((f) => f.endsWith(".json"))) {
    const parsed = JSON.parse(readFileSync(join(fixtures, file), "utf8")) as
      { id: string; text: string }[] | { examples: { id: string; text: string }[] };
    texts.push(...(Array.isArray(parsed) ? parsed : parsed.examples).map((e) => ({ id: e.id, text: e.text })));
  }
  const items: GoldenItem[] = [];
  for (const name of ["default", "templates"] as const) {
    const r = await api.fetchJson("GET", "/governance/config", { key: apps.get(name)!.key });
    if (r.status !== 200) throw new Error(`config of ${APPS[name]}: ${r.text}`);
    const engine = new GuardEngine(r.body.engine as EngineConfigInput);
    for (const { id, text } of texts) {
      for (const phase of ["input", "output"] as const) {
        // the classifier is on by default: the API's model (the same files as this process's) scores prompts
        const { decision: d, score, scores } = await scoreWithClassifier(engine, text, phase, await sharedInjectionClassifier());
        const { verdicts: _verdicts, ...decision } = d;
        const expected = {
          ...decision,
          ...(score === undefined ? {} : { classifierScore: score }),
          ...(scores === undefined ? {} : { classifierScores: scores }),
        };
        items.push({ id: `${name}/${id}/${phase}`, phase, text, config_name: name, expected: JSON.parse(JSON.stringify(expected)) });
      }
    }
  }
  return items;
}

test.before(async () => {
  const port = await freePort();
  api = await startApi({
    env: {
      BERTH_API_PORT: String(port),
      BERTH_GOVERNANCE_HOST: `127.0.0.1:${port}`,
      // the golden corpus is about 1,300 guard checks with one key: the budget would answer most with 429
      BERTH_RATE_LIMIT_API_PER_SECOND: "0",
      BERTH_RATE_LIMIT_INGEST_PER_SECOND: "0",
      BERTH_LOG_LEVEL: "warn",
    },
  });
  const operatorToken = (await identity("operator")).token;
  for (const [name, app] of Object.entries(APPS) as [ConfigName, string][]) apps.set(name, await provisionApp(api, operatorToken, app));

  const offTopic = JSON.parse(readFileSync(join(fixtures, "off_topic.json"), "utf8")) as { topics: { name: string; keywords: string[] }[] };
  const templates = [
    { name: "Redact PII", id: await createTemplate("Redact PII", "pii_detection", { action: "redact" }) },
    { name: "Toxicity", id: await createTemplate("Toxicity", "toxicity", { sensitivity: "medium" }) },
    { name: "Banking only", id: await createTemplate("Banking only", "off_topic", { topics: offTopic.topics }) },
    {
      name: "Project codes",
      id: await createTemplate("Project codes", "custom", {
        action: "redact",
        patterns: [{ pattern: "\\bPRJ-\\d{4}\\b", name: "project code", kind: "project_code" }],
        keywords: ["confidential"],
      }),
    },
  ];
  const cfg = await api.fetchJson("PUT", `${appPath("templates")}/observability-config`, {
    body: {
      guards: {
        // PII is redacted by the template, not blocked by the built-in guard
        sensitive_data: { enabled: false },
        custom_templates: templates.map((x) => ({ template_id: x.id, template_name: x.name, enabled: true })),
      },
    },
  });
  if (cfg.status !== 200) throw new Error(cfg.text);
});

test.after.always(async () => {
  await api?.stop();
  rmSync(work, { recursive: true, force: true });
});

test.serial("the Python toolkit's tests pass against the real API, from the built wheel", async (t) => {
  t.timeout(10 * 60_000);
  const golden = join(work, "golden.json");
  const items = await goldenCorpus();
  writeFileSync(golden, JSON.stringify(items));
  t.true(items.length > 1000, `the corpus: ${items.length} items`);

  const python = toolkitPython(); // made by ./hack/test's setup; here it is found, not installed
  const pip = join(python, "../pip");
  const dist = join(work, "dist");
  execFileSync(python, ["-m", "build", "--wheel", "--no-isolation", "--outdir", dist, join(root, "toolkit/python")], {
    stdio: ["ignore", "ignore", 2],
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
  });
  const wheel = readdirSync(dist).find((f) => f.endsWith(".whl"));
  if (!wheel) throw new Error("python -m build made no wheel");
  execFileSync(pip, ["uninstall", "--quiet", "--yes", "berth-toolkit"], { stdio: ["ignore", "ignore", 2] });
  // its dependencies are pinned in the virtualenv: the extra's range must be met by them, without an index
  execFileSync(pip, ["install", "--quiet", "--no-index", "--disable-pip-version-check", `${join(dist, wheel)}[langchain]`], {
    stdio: ["ignore", 2, 2],
  });

  const child = spawn(python, ["-m", "pytest", "toolkit/python/tests", "-q", "-p", "no:cacheprovider", "-rs"], {
    cwd: root,
    env: {
      ...process.env,
      PYTHONDONTWRITEBYTECODE: "1",
      BERTH_PY_IT_CONNECTIONS: JSON.stringify(Object.fromEntries([...apps].map(([name, app]) => [name, app.connectionString]))),
      BERTH_PY_IT_API: api.url,
      BERTH_PY_IT_GOLDEN: golden,
      BERTH_PY_IT_OUT: out,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  pytest = { code, output };
  if (code !== 0) t.log(output.slice(-30_000));
  t.is(code, 0, "pytest failed (its output is above)");
  t.notRegex(output, /skipped/, "the integration tests ran (none skipped)");
});

test.serial("what the Python wrapper and plain path recorded is what the TypeScript wrapper records for the same calls", async (t) => {
  if (pytest?.code !== 0) return t.fail("pytest did not pass");
  const records = JSON.parse(readFileSync(join(out, "records.json"), "utf8")) as PyRecord[];
  t.true(records.length >= 7);
  const g = new Governance({
    env: { GOVDB_CONNECTION: apps.get("records")!.connectionString, GOVERNANCE_PROJECT: APPS.records },
    lingerMs: 20,
  });
  t.teardown(() => g.shutdown());
  /** the TypeScript trace of the same call, by session and prompt */
  const tsTraces = new Map<string, string>();
  for (const r of records) {
    t.like(await traceDetail(r.app, r.traceId), { ...r.expected, sessionId: r.sessionId }, `${r.case}: stored as the Python test expects`);
    const call = r.call;
    if (call.kind === "plain") continue;
    const session = `ts-${call.kind === "batch" ? "batch" : r.case}`;
    if (!tsTraces.has(`${session}\n${call.prompts[0]}`)) {
      const fake = new UsageChatModel({ responses: call.responses, generationInfo: { finish_reason: "stop" } });
      const model = withGovernance(fake, { governance: g, sessionId: session });
      try {
        if (call.kind === "stream") for await (const _ of await model.stream(call.prompts[0]!));
        else if (call.kind === "batch") await model.batch(call.prompts, { maxConcurrency: 1 });
        else await model.invoke(call.prompts[0]!);
      } catch (err) {
        if (!(err instanceof GuardBlockedError)) throw err;
      }
      t.true(await g.flush(10_000));
      for (const { traceId } of (await sessionTraces(r.app, session)).data) {
        tsTraces.set(`${session}\n${(await traceDetail(r.app, traceId)).prompt as string}`, traceId);
      }
    }
    const prompt = call.kind === "batch" ? call.prompts[call.index]! : call.prompts[0]!;
    const ts = tsTraces.get(`${session}\n${prompt}`);
    if (!ts) {
      t.fail(`${r.case}: no TypeScript trace for the same call`);
      continue;
    }
    t.deepEqual(await recordOf(r.app, r.traceId), await recordOf(r.app, ts), `${r.case}: the same trace, evals and guard blocks`);
  }
  const plain = records.find((r) => r.case === "plain")!;
  const invoked = records.find((r) => r.case === "invoke")!;
  t.deepEqual(
    await recordOf("records", plain.traceId),
    await recordOf("records", invoked.traceId),
    "the plain path records the call alike",
  );
});

test.serial("every trace sent across the outage is stored exactly once", async (t) => {
  if (pytest?.code !== 0) return t.fail("pytest did not pass");
  const q = JSON.parse(readFileSync(join(out, "queue.json"), "utf8")) as PyQueue;
  const ids = [...q.plain, ...q.wrapped.map((w) => w.traceId)];
  t.is(ids.length, 15);
  const list = await sessionTraces(q.app, q.sessionId);
  t.is(list.total, ids.length);
  t.deepEqual(list.data.map((x) => x.traceId).sort(), [...ids].sort());
  const schema = apps.get(q.app)!.schema;
  const rows = await query<{ trace_id: string; n: string }>(
    api.db.url,
    `select trace_id::text, count(*) as n from "${schema}".traces where trace_id = any($1::uuid[]) group by trace_id`,
    [ids],
  );
  t.is(rows.length, ids.length);
  t.true(
    rows.every((r) => Number(r.n) === 1),
    "stored once each",
  );
  for (const w of q.wrapped) t.deepEqual((await traceDetail(q.app, w.traceId)).metadata, w.metadata, "the guards marked unavailable");
});
