// The model price table: exact names, dated snapshots and tags, provider paths, unknown models,
// configured extra prices and the version recorded on traces.
import test from "ava";
import {
  BUILTIN_PRICE_VERSION,
  BUILTIN_PRICES,
  ModelPricesConfig,
  PriceTable,
  normalizeModel,
} from "../../../api/governance/ingest/pricing.ts";
import { loadConfig } from "../../../api/config.ts";

const table = new PriceTable();

const cases: [string, string | null][] = [
  ["gpt-4o", "gpt-4o"],
  ["gpt-4o-2024-08-06", "gpt-4o"],
  ["gpt-4o-mini-2024-07-18", "gpt-4o-mini"],
  ["GPT-4o-Mini", "gpt-4o-mini"],
  ["openai/gpt-4.1-nano", "gpt-4.1-nano"],
  ["gpt-4-0613", "gpt-4"],
  ["gpt-4-turbo-2024-04-09", "gpt-4-turbo"],
  ["gpt-4.5-preview", null],
  ["gpt-4o1", null],
  ["claude-3-5-sonnet-20241022", "claude-3-5-sonnet"],
  ["claude-sonnet-4@20250514", "claude-sonnet-4"],
  ["claude-sonnet-4-5-20250929", "claude-sonnet-4-5"],
  ["models/gemini-1.5-pro", "gemini-1.5-pro"],
  ["gemini-2.5-flash-lite", "gemini-2.5-flash-lite"],
  ["o3-mini", "o3-mini"],
  ["llama3:8b", null],
  ["", null],
];
for (const [model, want] of cases) {
  test(`${JSON.stringify(model)} is priced as ${String(want)}`, (t) => {
    t.is(table.match(model), want);
  });
}

test("cost is tokens times the price per million; unknown models cost 0 and are flagged", (t) => {
  t.deepEqual(table.cost("gpt-4o", 1_000_000, 1_000_000), { costUsd: 12.5, priced: true, pricedAs: "gpt-4o" });
  t.deepEqual(table.cost("gpt-4o-mini", 1000, 500), { costUsd: 0.00045, priced: true, pricedAs: "gpt-4o-mini" });
  t.deepEqual(table.cost("my-model", 1000, 500), { costUsd: 0, priced: false, pricedAs: null });
  t.is(table.version, BUILTIN_PRICE_VERSION);
});

test("configured prices add models and override built-in ones; the version says so", (t) => {
  const extra = new PriceTable({
    version: "acme-2",
    models: { "Acme-LLM": { prompt: 1, completion: 2 }, "gpt-4o": { prompt: 1, completion: 1 } },
  });
  t.is(extra.version, `${BUILTIN_PRICE_VERSION}+acme-2`);
  t.is(extra.cost("acme-llm-v3", 1_000_000, 0).costUsd, 1);
  t.is(extra.cost("gpt-4o", 1_000_000, 1_000_000).costUsd, 2);
  const unversioned = new PriceTable({ models: { x: { prompt: 1, completion: 1 } } });
  t.regex(unversioned.version, new RegExp(`^${BUILTIN_PRICE_VERSION}\\+custom\\.[0-9a-f]{8}$`));
  t.is(new PriceTable({ models: { x: { prompt: 1, completion: 1 } } }).version, unversioned.version, "same prices, same version");
});

test("every built-in price is sane", (t) => {
  for (const [model, p] of Object.entries(BUILTIN_PRICES)) {
    t.is(normalizeModel(model), model);
    t.true(p.prompt > 0 && p.prompt < 100 && p.completion >= 0 && p.completion < 200, model);
  }
});

test("BERTH_MODEL_PRICES is parsed with zod once, in the config", (t) => {
  const base = { DATABASE_URL: "postgres://u:p@localhost/db" };
  t.deepEqual(loadConfig({ ...base, BERTH_MODEL_PRICES: '{"models":{"m":{"prompt":1,"completion":2}}}' }).BERTH_MODEL_PRICES, {
    models: { m: { prompt: 1, completion: 2 } },
  });
  t.is(loadConfig(base).BERTH_MODEL_PRICES, undefined);
  t.throws(() => loadConfig({ ...base, BERTH_MODEL_PRICES: "{not json" }), { message: /BERTH_MODEL_PRICES: must be JSON/ });
  t.throws(() => loadConfig({ ...base, BERTH_MODEL_PRICES: '{"models":{"m":{"prompt":-1,"completion":2}}}' }), {
    message: /models\.m\.prompt/,
  });
  t.false(ModelPricesConfig.safeParse({ models: {}, extra: 1 }).success);
});
