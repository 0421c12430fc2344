// The guards' evaluation set (test/fixtures/guards-eval/, its SOURCES.md): the items, the
// split rule, and which sources we wrote. Read by the accuracy bench and the classifier's build.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const EVAL_SET_DIR = join(import.meta.dirname, "../../test/fixtures/guards-eval");
export const EVAL_GUARDS = ["prompt_injection", "sensitive_data", "toxicity"] as const;
export type EvalGuard = (typeof EVAL_GUARDS)[number];

export interface EvalItem {
  id: string;
  source: string;
  split: "dev" | "test";
  labels: Partial<Record<EvalGuard, boolean>>;
  text: string;
}

/** Sources whose items we wrote ourselves: reported apart from the public ones. */
export const AUTHORED = (source: string) => source.startsWith("authored-") || source === "pii-doc-vectors";

/** The split rule of the set: FNV-1a (32 bit) of the text, even -> dev, odd -> test. */
export function splitOf(text: string): "dev" | "test" {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h % 2 === 0 ? "dev" : "test";
}

/** The files of the set, sorted by name. */
export function evalSetFiles(): string[] {
  return readdirSync(EVAL_SET_DIR)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .map((f) => join(EVAL_SET_DIR, f));
}

/** Every item, each checked against the split rule. */
export function loadEvalSet(): EvalItem[] {
  const items = evalSetFiles().flatMap((f) =>
    readFileSync(f, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as EvalItem),
  );
  for (const it of items)
    if (splitOf(it.text) !== it.split) throw new Error(`${it.id}: split ${it.split} is not the hash rule's ${splitOf(it.text)}`);
  return items;
}
