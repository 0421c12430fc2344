// The classifier's budget per app (api/governance/ingest/model-runs.ts, BERTH_RATE_LIMIT_MODEL_*),
// as a hostile tenant meets it: a model run costs the shared scoring threads 1-7 ms of CPU, so an
// app that floods guard checks of prompts, or batches of unscored traces under
// classifier_on_ingestion, is refused with 429 (policy "model") once its own runs are spent, while
// another workspace's app is served with its model, and what runs no model (responses, traces that
// carry the request path's score, a config with the classifier off) is not counted. The same flood
// against an API without the budget is served in full: the protection is what refuses it.
// Real API servers (one with a small budget, one without), PostgreSQL, scoring threads, the model.
import test from "ava";
import { startApi, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { provisionApp, traceBody } from "../helpers/governance.ts";

const PROMPT = "Summarise the refund policy for annual plans.";
let guarded: TestApi;
let open: TestApi;
let victim: TestWorkspace;
const keys: Record<string, string> = {};

test.before(async () => {
  const token = (await identity("operator")).token;
  // 3 runs at once, then one every 10 s: small enough to spend in a test
  guarded = await startApi({ env: { BERTH_RATE_LIMIT_MODEL_PER_SECOND: "0.1", BERTH_RATE_LIMIT_MODEL_BURST: "3" } });
  open = await startApi({ env: { BERTH_RATE_LIMIT_MODEL_PER_SECOND: "0" } });
  victim = await guarded.createWorkspace("victim team");
  keys.flood = (await provisionApp(guarded, token, "flood")).key;
  keys.ingest = (await provisionApp(guarded, token, "ingest-flood")).key;
  keys.long = (await provisionApp(guarded, token, "long-prompts")).key;
  keys.victim = (await provisionApp(guarded, token, "victim", victim)).key;
  keys.unguarded = (await provisionApp(open, token, "flood")).key;
});
test.after.always(async () => {
  await guarded?.stop();
  await open?.stop();
});

const check = (api: TestApi, key: string, phase: "input" | "output", text = PROMPT) =>
  api.fetchJson("POST", "/governance/guard-check", { key, body: { phase, text } });

const trace = traceBody;

test.serial("guard checks: one app's flood of prompts is refused past its runs; the other workspace's app keeps its model", async (t) => {
  // the attack where the budget is off: every check of a prompt runs the model
  for (let i = 0; i < 8; i++) {
    const r = await check(open, keys.unguarded!, "input", `${PROMPT} (${i})`);
    t.is(r.status, 200, r.text);
    t.is(typeof r.body.classifierScore, "number", "the model ran");
  }
  // with the budget: its three runs, then 429 before any run
  for (let i = 0; i < 3; i++) {
    const r = await check(guarded, keys.flood!, "input", `${PROMPT} (${i})`);
    t.is(r.status, 200, r.text);
    t.is(typeof r.body.classifierScore, "number");
  }
  const refused = await check(guarded, keys.flood!, "input");
  t.is(refused.status, 429, refused.text);
  t.like(refused.body, { code: "rate_limited", details: { policy: "model" } });
  t.true(Number(refused.headers.get("retry-after")) >= 1);
  t.is(refused.headers.get("content-type"), "application/problem+json");
  // what runs no model is not refused: a response
  t.is((await check(guarded, keys.flood!, "output")).status, 200);
  // the victim, in another workspace, is served with its model
  for (let i = 0; i < 3; i++) {
    const r = await check(guarded, keys.victim!, "input", `${PROMPT} [${i}]`);
    t.is(r.status, 200, r.text);
    t.is(typeof r.body.classifierScore, "number");
  }
  // an app that turns the classifier off checks prompts on the patterns, uncounted
  const off = await guarded.fetchJson("PUT", `/workspaces/${guarded.workspaceId}/governance/apps/flood/observability-config`, {
    body: { guards: { prompt_injection: { classifier: false } } },
  });
  t.is(off.status, 200, off.text);
  const plain = await check(guarded, keys.flood!, "input");
  t.is(plain.status, 200, plain.text);
  t.is(plain.body.classifierScore, undefined);
});

test.serial("a long prompt, read in many windows, spends more of the budget than a short one", async (t) => {
  // 8 KB: the model reads it in 32 windows, four runs' worth (charged the burst of 3 here)
  const long = `${PROMPT} `.repeat(Math.ceil(8192 / (PROMPT.length + 1)));
  // without the budget, both are served
  t.is((await check(open, keys.unguarded!, "input", long)).status, 200);
  t.is((await check(open, keys.unguarded!, "input")).status, 200);
  const first = await check(guarded, keys.long!, "input", long);
  t.is(first.status, 200, first.text);
  t.is(typeof first.body.classifierScore, "number");
  // three short prompts would have been served; after the long one, the next is refused
  const next = await check(guarded, keys.long!, "input");
  t.is(next.status, 429, next.text);
  t.like(next.body, { code: "rate_limited", details: { policy: "model" } });
});

test.serial(
  "ingestion: unscored traces under classifier_on_ingestion spend the app's runs; scored ones and other apps' do not",
  async (t) => {
    const on = await guarded.fetchJson("PUT", `/workspaces/${guarded.workspaceId}/governance/apps/ingest-flood/observability-config`, {
      body: { guards: { prompt_injection: { classifier_on_ingestion: true } } },
    });
    t.is(on.status, 200, on.text);
    const send = (key: string, traces: unknown[]) => guarded.fetchJson("POST", "/governance/traces", { key, body: { traces } });
    const first = await send(keys.ingest!, [trace(`${PROMPT} a`), trace(`${PROMPT} b`)]);
    t.is(first.status, 200, first.text);
    const refused = await send(keys.ingest!, [trace(`${PROMPT} c`), trace(`${PROMPT} d`)]);
    t.is(refused.status, 429, refused.text);
    t.like(refused.body, { code: "rate_limited", details: { policy: "model" } });
    // traces that carry the request path's score run no model: accepted
    const scored = await send(keys.ingest!, [
      trace(`${PROMPT} e`, { classifierScores: { promptInjection: 0.1 } }),
      trace(`${PROMPT} f`, { classifierScores: { promptInjection: 0.2 } }),
    ]);
    t.is(scored.status, 200, scored.text);
    // so do traces that carry only a toxicity template's score (the injection head had no say)
    const toxicityScored = await send(keys.ingest!, [
      trace(`${PROMPT} g`, { classifierScores: { toxicity: 0.1 } }),
      trace(`${PROMPT} h`, { classifierScores: { toxicity: 0.2 } }),
    ]);
    t.is(toxicityScored.status, 200, toxicityScored.text);
    // the victim's plain-path traces (its defaults: no model on ingestion) are served
    for (let i = 0; i < 3; i++) t.is((await send(keys.victim!, [trace(`${PROMPT} ${i}`), trace(`${PROMPT} ${i}!`)])).status, 200);
  },
);
