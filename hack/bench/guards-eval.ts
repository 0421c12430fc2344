// Accuracy of the guards on the evaluation set of issue 16 (test/fixtures/guards-eval/), run by hand:
//   node hack/bench/guards-eval.ts [--split test|dev|all] [--misses]
// The configuration is the one a new user gets: an app's default observability config
// (prompt_injection and sensitive_data on at their default thresholds) plus one toxicity guard
// template created with sensitivity medium and listed in custom_templates, built through the API's
// own functions (defaultObservabilityConfig, resolveCustomTemplates, engineInput), not a copy of them.
// Every item is checked as a prompt (input phase). An item counts as caught by a guard when that
// guard's result is not `pass`. Prints precision, recall and F1 per guard and per source, the
// totals per guard over the public sources and over every source, and the share of benign
// trigger-word texts (NotInject) that pass every guard. --misses lists the items each guard got
// wrong (use it on the dev split: the test split is for reporting, not for tuning).
//
// --model [--model-threshold 0.5] measures a candidate second layer for toxicity side by side with
// the lexical one: alt-profanity-check (PyPI, MIT), the one package in the registries here whose
// trained weights ship inside it (a TF-IDF vocabulary and calibrated linear SVMs, trained on
// Wikipedia talk comments and the Davidson 2017 tweets, so davidson-2017 is not independent for
// it). It runs in a virtualenv under ~/.cache/berth (installed once, never in the repository). Printed
// per source: the lexical layer, the model at the threshold, either of them; then which labelled
// items only one of the two gets right (listed with --misses).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { defaultObservabilityConfig, engineInput, resolveCustomTemplates } from "../../api/governance/configs/observability.ts";
import { evaluateGuards, GuardEngine, GuardTemplateSpec } from "../../toolkit/src/index.ts";
import { cacheRoot } from "../lib/pinned.ts";

const { values } = parseArgs({ options: {
  split: { type: "string", default: "test" }, misses: { type: "boolean", default: false },
  model: { type: "boolean", default: false }, "model-threshold": { type: "string", default: "0.5" },
} });
const SPLIT = values.split;
if (!["test", "dev", "all"].includes(SPLIT)) throw new Error(`--split is test, dev or all, not ${SPLIT}`);

const DIR = join(import.meta.dirname, "../../test/fixtures/guards-eval");
/** The --model candidate and the scikit-learn its pickled weights load with. */
const PROFANITY_CHECK = "1.9.1";
const SCIKIT_LEARN = "1.9.1";
const GUARDS = ["prompt_injection", "sensitive_data", "toxicity"] as const;
type Guard = (typeof GUARDS)[number];
/** Sources whose items we wrote ourselves: reported apart from the public ones. */
const AUTHORED = (source: string) => source.startsWith("authored-") || source === "pii-doc-vectors";

interface Item {
  id: string;
  source: string;
  split: "dev" | "test";
  labels: Partial<Record<Guard, boolean>>;
  text: string;
}

/** The split rule of the set: FNV-1a (32 bit) of the text, even -> dev, odd -> test. */
function splitOf(text: string): "dev" | "test" {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h % 2 === 0 ? "dev" : "test";
}

const items: Item[] = readdirSync(DIR)
  .filter((f) => f.endsWith(".jsonl"))
  .sort()
  .flatMap((f) => readFileSync(join(DIR, f), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Item));
for (const it of items) if (splitOf(it.text) !== it.split) throw new Error(`${it.id}: split ${it.split} is not the hash rule's ${splitOf(it.text)}`);

// The default configuration, as the API builds it for an app that lists one toxicity template.
const TOX_ID = "00000000-0000-4000-8000-000000000016";
const template = GuardTemplateSpec.parse({ guardType: "toxicity", config: { sensitivity: "medium" } });
const resolved = resolveCustomTemplates([{ template_id: TOX_ID }], new Map([[TOX_ID, { name: "Toxicity", guardType: template.guardType, config: template.config }]]));
if (resolved.errors.length > 0) throw new Error(JSON.stringify(resolved.errors));
const base = defaultObservabilityConfig();
const engine = new GuardEngine(engineInput({ ...base, guards: { ...base.guards, custom_templates: resolved.entries } }, resolved.snapshot));
const SOURCE_OF: Record<Guard, string> = { prompt_injection: "prompt_injection", sensitive_data: "sensitive_data", toxicity: `template:${TOX_ID}` };
console.log(`checks: ${engine.checks.map((c) => `${c.source === SOURCE_OF.toxicity ? "template:toxicity" : c.source} (threshold ${c.policy.threshold})`).join(", ")}; split: ${SPLIT}`);

interface Counts { tp: number; fp: number; fn: number; tn: number }
const zero = (): Counts => ({ tp: 0, fp: 0, fn: 0, tn: 0 });
/** Counts one item under `key` of `table`: a hit, a miss, a false alarm or a pass. */
function tally(table: Map<string, Counts>, key: string, expected: boolean, got: boolean): void {
  const c = table.get(key) ?? zero();
  if (expected && got) c.tp++;
  else if (expected) c.fn++;
  else if (got) c.fp++;
  else c.tn++;
  table.set(key, c);
}
const table = new Map<string, Counts>(); // `${guard}|${source}`
const misses: string[] = [];
let benign = 0;
let benignPassed = 0;
/** Toxicity as the lexical layer saw each item (for --model). */
const lexical: Array<{ it: Item; expected: boolean; got: boolean }> = [];

for (const it of items) {
  if (SPLIT !== "all" && it.split !== SPLIT) continue;
  const decision = evaluateGuards(it.text, "input", engine);
  const caught = (g: Guard) => decision.evaluations.some((e) => e.source === SOURCE_OF[g] && e.result !== "pass");
  if (it.source === "notinject") {
    benign++;
    if (GUARDS.every((g) => !caught(g))) benignPassed++;
  }
  for (const g of GUARDS) {
    const expected = it.labels[g];
    if (expected === undefined) continue;
    const got = caught(g);
    if (g === "toxicity") lexical.push({ it, expected, got });
    tally(table, `${g}|${it.source}`, expected, got);
    if (values.misses && got !== expected) {
      const v = decision.verdicts.find((_, i) => decision.evaluations[i]?.source === SOURCE_OF[g]);
      misses.push(`${expected ? "MISS" : "FALSE"} ${g} ${it.id} [${v?.confidence ?? 0}] ${JSON.stringify(it.text.slice(0, 160))}${v && v.matches.length > 0 ? ` <- ${v.matches.map((m) => m.description).join("; ").slice(0, 160)}` : ""}`);
    }
  }
}

const pct = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "  - ");
function line(name: string, c: Counts): string {
  const p = c.tp / (c.tp + c.fp);
  const r = c.tp / (c.tp + c.fn);
  const f1 = (2 * p * r) / (p + r);
  const n = c.tp + c.fp + c.fn + c.tn;
  return `  ${name.padEnd(26)} n=${String(n).padStart(3)}  tp=${String(c.tp).padStart(3)} fp=${String(c.fp).padStart(3)} fn=${String(c.fn).padStart(3)} tn=${String(c.tn).padStart(3)}  P=${pct(c.tp + c.fp === 0 ? NaN : p)} R=${pct(c.tp + c.fn === 0 ? NaN : r)} F1=${pct(c.tp === 0 ? (c.fp + c.fn === 0 ? NaN : 0) : f1)}`;
}
const add = (a: Counts, b: Counts): Counts => ({ tp: a.tp + b.tp, fp: a.fp + b.fp, fn: a.fn + b.fn, tn: a.tn + b.tn });

for (const g of GUARDS) {
  console.log(`\n${g}`);
  const rows = [...table.entries()].filter(([k]) => k.startsWith(`${g}|`)).map(([k, c]) => [k.slice(g.length + 1), c] as const).sort(([a], [b]) => a.localeCompare(b));
  for (const [source, c] of rows) console.log(line(`${source}${AUTHORED(source) ? " (authored)" : ""}`, c));
  const pub = rows.filter(([s]) => !AUTHORED(s)).reduce((a, [, c]) => add(a, c), zero());
  if (pub.tp + pub.fp + pub.fn + pub.tn > 0) console.log(line("= public sources", pub));
  console.log(line("= every source", rows.reduce((a, [, c]) => add(a, c), zero())));
}
if (benign > 0) console.log(`\nNotInject-style benign texts passing every guard: ${benignPassed}/${benign} = ${pct(benignPassed / benign)}`);
if (misses.length > 0) console.log(`\n${misses.join("\n")}`);

if (values.model) {
  const threshold = Number(values["model-threshold"]);
  const probs = profanityCheck(lexical.map((l) => l.it.text));
  const modes = { lexical: (i: number) => lexical[i]!.got, model: (i: number) => probs[i]! >= threshold, either: (i: number) => lexical[i]!.got || probs[i]! >= threshold };
  console.log(`\ntoxicity, side by side: the lexical layer, alt-profanity-check ${PROFANITY_CHECK} at ${threshold}, either (split: ${SPLIT})`);
  for (const [mode, caughtBy] of Object.entries(modes)) {
    const bySource = new Map<string, Counts>();
    lexical.forEach(({ it, expected }, i) => { tally(bySource, it.source, expected, caughtBy(i)); });
    console.log(` ${mode}`);
    const rows = [...bySource].sort(([a], [b]) => a.localeCompare(b));
    for (const [source, c] of rows) console.log(line(`${source}${AUTHORED(source) ? " (authored)" : ""}`, c));
    console.log(line("= public sources", rows.filter(([src]) => !AUTHORED(src)).reduce((a, [, c]) => add(a, c), zero())));
  }
  const only = (label: string, test: (i: number) => boolean) => {
    const hits = lexical.map((l, i) => ({ ...l, p: probs[i]! })).filter((_, i) => test(i));
    console.log(`${label}: ${hits.length}`);
    if (values.misses) for (const h of hits) console.log(`  [${h.p.toFixed(2)}] ${h.it.source} ${JSON.stringify(h.it.text.slice(0, 140))}`);
  };
  only("toxic items only the lexical layer catches", (i) => lexical[i]!.expected && modes.lexical(i) && !modes.model(i));
  only("toxic items only the model catches", (i) => lexical[i]!.expected && !modes.lexical(i) && modes.model(i));
  only("benign items only the lexical layer flags", (i) => !lexical[i]!.expected && modes.lexical(i) && !modes.model(i));
  only("benign items only the model flags", (i) => !lexical[i]!.expected && !modes.lexical(i) && modes.model(i));
}

/** alt-profanity-check's probability that each text is offensive, from its own package in a virtualenv under the cache. */
function profanityCheck(texts: string[]): number[] {
  const venv = join(cacheRoot(), `alt-profanity-check-${PROFANITY_CHECK}`);
  const python = join(venv, "bin/python");
  if (!existsSync(join(venv, ".berth-installed"))) {
    console.error(`installing alt-profanity-check ${PROFANITY_CHECK} into ${venv}`);
    execFileSync("python3", ["-m", "venv", "--clear", venv], { stdio: "inherit" });
    execFileSync(join(venv, "bin/pip"), ["install", "--quiet", "--disable-pip-version-check", `alt-profanity-check==${PROFANITY_CHECK}`, `scikit-learn==${SCIKIT_LEARN}`], { stdio: "inherit" });
    writeFileSync(join(venv, ".berth-installed"), "");
  }
  const score = "import json, sys, warnings\nwarnings.filterwarnings('ignore')\nfrom profanity_check import predict_prob\nprint(json.dumps([float(p) for p in predict_prob(json.load(sys.stdin))]))";
  const out = execFileSync(python, ["-c", score], { input: JSON.stringify(texts), maxBuffer: 64 * 2 ** 20 });
  return JSON.parse(out.toString()) as number[];
}
