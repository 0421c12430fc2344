// The classifier's build learns only from sources whose licence was read and declared
// (hack/guard-model.py: TRAINABLE_SOURCES, COPYLEFT_SOURCES, HELD_OUT_SOURCES): a source added to
// the evaluation set is refused until it is declared, so a copyleft set cannot be learnt by default
// (the build reads every dev item of the set labelled for its guards).
import test from "ava";
import { spawnSync } from "node:child_process";
import { GUARD_MODEL_PY, guardModelPython } from "../../../hack/guard-model.ts";
import { loadEvalSet } from "../../../hack/lib/guards-eval-set.ts";

/** Runs `body` in Python with the build's module as `gm` and `items` from stdin; its stdout, parsed. */
function python(body: string, items: unknown): { status: number | null; out: unknown; stderr: string } {
  const script = [
    "import importlib.util, json, sys",
    `spec = importlib.util.spec_from_file_location("gm", ${JSON.stringify(GUARD_MODEL_PY)})`,
    "gm = importlib.util.module_from_spec(spec); spec.loader.exec_module(gm)",
    "items = json.load(sys.stdin)",
    body,
  ].join("\n");
  const r = spawnSync(guardModelPython(), ["-c", script], { input: JSON.stringify(items), encoding: "utf8" });
  return { status: r.status, out: r.status === 0 && r.stdout.trim() ? JSON.parse(r.stdout) : undefined, stderr: r.stderr };
}

const item = (source: string, toxic = true) => ({ text: `a text of ${source}`, split: "dev", source, labels: { toxicity: toxic } });

test("a source of no declared licence is refused; declared, it is learnt", (t) => {
  const items = [item("surge-ai-2021"), item("new-forum-dump-2026")];
  const refused = python(`print(json.dumps(gm.training_set(items, "toxicity", False)))`, items);
  t.not(refused.status, 0);
  t.regex(refused.stderr, /no licence declared for new-forum-dump-2026/);
  // the same items once the source is declared trainable: the check alone refused it
  const declared = python(
    `gm.TRAINABLE_SOURCES.add("new-forum-dump-2026")\nprint(json.dumps(gm.training_set(items, "toxicity", False)))`,
    items,
  );
  t.is(declared.status, 0, declared.stderr);
  t.deepEqual(declared.out, [0, 1]);
});

test("a source labelled for other guards alone is not read, so it needs no declaration", (t) => {
  // the PII sets are labelled for sensitive_data only: the measure command gets every item of the set
  const pii = { text: "my card is 4111 1111 1111 1111", split: "dev", source: "new-pii-set-2026", labels: { sensitive_data: true } };
  const items = [item("surge-ai-2021"), pii];
  const r = python(`print(json.dumps(gm.training_set(items, "toxicity", False)))`, items);
  t.is(r.status, 0, r.stderr);
  t.deepEqual(r.out, [0]);
});

test("copyleft sources are evaluation only unless asked for (measure --train-gpl)", (t) => {
  const items = [item("wikipedia-toxicity-2017"), item("ethos-2020"), item("toxigen-2022", false)];
  const r = python(`print(json.dumps([gm.training_set(items, "toxicity", False), gm.training_set(items, "toxicity", True)]))`, items);
  t.is(r.status, 0, r.stderr);
  t.deepEqual(r.out, [[2], [0, 1, 2]]);
});

test("a held-out source is never learnt, not even with the copyleft ones", (t) => {
  const items = [item("openai-moderation-2022"), item("openai-moderation-2022", false), item("ethos-2020"), item("surge-ai-2021")];
  const r = python(`print(json.dumps([gm.training_set(items, "toxicity", False), gm.training_set(items, "toxicity", True)]))`, items);
  t.is(r.status, 0, r.stderr);
  t.deepEqual(r.out, [[3], [2, 3]]);
});

test("a source declared both held out and trainable is refused, not learnt", (t) => {
  const items = [item("openai-moderation-2022"), item("surge-ai-2021")];
  const r = python(
    `gm.TRAINABLE_SOURCES.add("openai-moderation-2022")\nprint(json.dumps(gm.training_set(items, "toxicity", False)))`,
    items,
  );
  t.not(r.status, 0);
  t.regex(r.stderr, /openai-moderation-2022 declared in two of/);
});

test("every source of the evaluation set the build reads is declared", (t) => {
  const sources = [
    ...new Set(
      loadEvalSet()
        .filter((it) => it.labels.prompt_injection !== undefined || it.labels.toxicity !== undefined)
        .map((it) => it.source),
    ),
  ];
  const r = python(
    `print(json.dumps(sorted(s for s in items if s not in gm.TRAINABLE_SOURCES | gm.COPYLEFT_SOURCES | gm.HELD_OUT_SOURCES)))`,
    sources,
  );
  t.is(r.status, 0, r.stderr);
  t.deepEqual(r.out, []);
});

test("the screen's floors: the lowest screen score of a window whose full score reaches each floor, never over the floor", (t) => {
  // windows' full scores and the screen's (cross-validated) scores of the same windows
  const full = [0.95, 0.72, 0.4, 0.1, 0.31, 0.85];
  const screen = [0.6, 0.2345, 0.9, 0.05, 0.01, 0.97];
  const r = python(
    `import numpy as np\nprint(json.dumps(gm.screen_floors(np.array(${JSON.stringify(full)}), np.array(${JSON.stringify(screen)}))))`,
    [],
  );
  t.is(r.status, 0, r.stderr);
  t.deepEqual(r.out, [
    [0.3, 0.01], // 0.31's window: a screen of 0.01 must still run the layer
    [0.5, 0.234], // 0.72's 0.2345, rounded down
    [0.6, 0.234],
    [0.7, 0.234],
    [0.8, 0.6], // 0.95's 0.6 (0.85's 0.97 is higher)
    [0.9, 0.6],
    [0.95, 0.6],
  ]);
  // a screen that scores a reaching window above its floor: capped at the floor, so a screened
  // window's score stays under the threshold its caller acts at
  const capped = python(`import numpy as np\nprint(json.dumps(gm.screen_floors(np.array([0.99]), np.array([0.999]))))`, []);
  t.deepEqual(capped.out, [
    [0.3, 0.3],
    [0.5, 0.5],
    [0.6, 0.6],
    [0.7, 0.7],
    [0.8, 0.8],
    [0.9, 0.9],
    [0.95, 0.95],
  ]);
});
