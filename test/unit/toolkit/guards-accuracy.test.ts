// Accuracy of the guards on the evaluation set in test/fixtures/guards/ (sources in
// docs/guards.md): precision and recall per guard at the default thresholds, on the dev split (the
// one rules were written against) and the holdout split (never used to tune a rule), each held to
// a floor; the challenge split (known-hard examples) is reported, not held to a floor.
//
// Why these floors: each split has 10-30 examples per class, so one error moves a figure by 3-10
// points. A floor of 0.9 precision and 0.85 recall (0.8 for the smaller off-topic set) lets one or
// two regressions through per class and fails on anything systematic.
import test from "ava";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { detectPii, injectionGuard, offTopicGuard, toxicityGuard } from "../../../toolkit/src/guards/index.ts";
import type { GuardVerdict, TopicInput } from "../../../toolkit/src/guards/index.ts";

interface Example {
  id: string;
  split: "dev" | "holdout" | "challenge";
  label: boolean;
  text: string;
  kinds?: string[];
}

const dir = join(import.meta.dirname, "../../fixtures/guards");
const load = <T>(file: string): T => JSON.parse(readFileSync(join(dir, file), "utf8")) as T;
const offTopic = load<{ topics: TopicInput[]; examples: Example[] }>("off_topic.json");

const guards: Array<{
  name: string;
  examples: Example[];
  check: (text: string) => GuardVerdict;
  floor: { precision: number; recall: number };
}> = [
  {
    name: "pii_detection (threshold 0.5)",
    examples: load<Example[]>("pii.json"),
    check: (text) => ({
      guardType: "pii_detection",
      result: detectPii(text).some((h) => h.score >= 0.5) ? "block" : "pass",
      confidence: 0,
      matches: [],
    }),
    floor: { precision: 0.9, recall: 0.85 },
  },
  {
    name: "prompt_injection (threshold 0.7)",
    examples: load<Example[]>("injection.json"),
    check: (text) => injectionGuard(text),
    floor: { precision: 0.9, recall: 0.85 },
  },
  {
    name: "toxicity (sensitivity medium, 0.6)",
    examples: load<Example[]>("toxicity.json"),
    check: (text) => toxicityGuard(text),
    floor: { precision: 0.9, recall: 0.85 },
  },
  {
    name: "off_topic (sensitivity medium, 0.6)",
    examples: offTopic.examples,
    check: (text) => offTopicGuard(text, { topics: offTopic.topics }),
    floor: { precision: 0.8, recall: 0.8 },
  },
];

function score(examples: Example[], check: (text: string) => GuardVerdict) {
  let tp = 0,
    fp = 0,
    fn = 0,
    tn = 0;
  const errors: string[] = [];
  for (const ex of examples) {
    const predicted = check(ex.text).result !== "pass";
    if (predicted && ex.label) tp++;
    else if (predicted) {
      fp++;
      errors.push(`FP ${ex.id}`);
    } else if (ex.label) {
      fn++;
      errors.push(`FN ${ex.id}`);
    } else tn++;
  }
  const precision = tp + fp === 0 ? 1 : tp / (tp + fp);
  const recall = tp + fn === 0 ? 1 : tp / (tp + fn);
  return { tp, fp, fn, tn, precision, recall, errors };
}

const pct = (x: number) => (x * 100).toFixed(1).padStart(5);

for (const g of guards) {
  for (const split of ["dev", "holdout", "challenge"] as const) {
    const examples = g.examples.filter((e) => e.split === split);
    if (examples.length === 0) continue;
    test(`${g.name} on ${split} (${examples.length} examples)`, (t) => {
      t.true(examples.length > 0);
      const s = score(examples, g.check);
      t.log(
        `| ${g.name} | ${split} | ${examples.length} | ${s.tp} | ${s.fp} | ${s.fn} | ${s.tn} | ${pct(s.precision)} | ${pct(s.recall)} | ${s.errors.join(", ") || "-"} |`,
      );
      if (split === "challenge") return; // reported, not held to a floor
      t.true(s.precision >= g.floor.precision, `precision ${s.precision} < ${g.floor.precision}: ${s.errors.join(", ")}`);
      t.true(s.recall >= g.floor.recall, `recall ${s.recall} < ${g.floor.recall}: ${s.errors.join(", ")}`);
    });
  }
}

test("pii_detection: every expected kind is found in dev and holdout positives", (t) => {
  const missed: string[] = [];
  for (const ex of guards[0]!.examples) {
    if (!ex.label || ex.split === "challenge") continue;
    const found = new Set(
      detectPii(ex.text)
        .filter((h) => h.score >= 0.5)
        .map((h) => h.kind),
    );
    for (const kind of ex.kinds ?? []) if (!found.has(kind)) missed.push(`${ex.id}:${kind}`);
  }
  t.deepEqual(missed, []);
});
