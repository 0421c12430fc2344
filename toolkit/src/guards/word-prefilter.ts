// An exact prefilter for obscenity's RegExpMatcher: "does getAllMatches find anything at all?",
// answered with one regular expression instead of the matcher's full pass.
//
// getAllMatches (obscenity 0.4) computes the whitelisted intervals, applies the blacklist
// transformers to the text code point by code point, runs each blacklisted term's regex over the
// transformed text, and keeps the matches outside whitelisted intervals. The whitelist only ever
// removes matches, so when no term regex matches the transformed text the result is empty. One
// regex whose alternatives are the term regexes (same flags, no backreferences or named groups)
// matches a string exactly when one of them does (at the first position where any does), so
// testing it on the transformed text decides "no match" without the whitelist scan, the index
// map and the ~120 separate scans. The transformed text is built by the very transformers the
// matcher uses, in the same order and the same code-point iteration; the stateless ones are
// memoised per code point (they are pure functions of it by obscenity's contract).
//
// Texts for which the prefilter says "maybe" (a few in a hundred) go through getAllMatches as
// before. If the matcher's compiled terms are not where this expects them (another obscenity
// version), there is no prefilter and every text goes through getAllMatches.
import type { RegExpMatcher, TransformerContainer } from "obscenity";
import { anyOf, unitable } from "./text.ts";

type TransformerFn = (c: number) => number | undefined;

/**
 * One step of the pipeline, of one shape (monomorphic in the hot loop): a run of stateless
 * transformers composed into one function and memoised per code point (-1: dropped), or a
 * stateful transformer (obscenity's collapseDuplicates), one instance reset around each text.
 */
interface Step {
  table: Int32Array | null;
  other: Map<number, number>;
  run: readonly TransformerFn[];
  instance: { transform: TransformerFn; reset(): void } | null;
}

function composed(run: readonly TransformerFn[], c: number): number {
  let t: number | undefined = c;
  for (const f of run) {
    t = f(t);
    if (t === undefined) return -1;
  }
  return t;
}

function tableStep(run: readonly TransformerFn[]): Step {
  const table = new Int32Array(128);
  for (let c = 0; c < 128; c++) table[c] = composed(run, c);
  return { table, other: new Map(), run, instance: null };
}

/** UTF-16 units of the transformed text, turned into a string a chunk at a time. */
const CHUNK = 8192;
const units = new Uint16Array(CHUNK);

export class WordPrefilter {
  readonly #steps: Step[] = [];
  readonly #any: RegExp;
  /** The steps when they are one stateless run then one stateful transformer (the hot loop's fast path), else null. */
  readonly #pair: { step: Step; table: Int32Array; instance: NonNullable<Step["instance"]> } | null;

  private constructor(transformers: readonly TransformerContainer[], terms: readonly RegExp[]) {
    let run: TransformerFn[] = [];
    const flush = () => {
      if (run.length > 0) this.#steps.push(tableStep(run));
      run = [];
    };
    for (const t of transformers) {
      // a simple (stateless) transformer has transform, a stateful one a factory of instances
      if ("transform" in t) {
        run.push(t.transform);
      } else {
        flush();
        this.#steps.push({ table: null, other: new Map(), run: [], instance: t.factory() });
      }
    }
    flush();
    const [first, second] = this.#steps;
    this.#pair =
      this.#steps.length === 2 && first!.table && second!.instance
        ? { step: first!, table: first!.table, instance: second!.instance }
        : null;
    this.#any = anyOf(terms);
  }

  /**
   * The prefilter for a matcher built with these blacklist transformers, or null when the matcher's
   * compiled terms cannot be read or combined (then use the matcher alone).
   */
  static for(matcher: RegExpMatcher, transformers: readonly TransformerContainer[]): WordPrefilter | null {
    const terms = (matcher as unknown as { blacklistedTerms?: unknown }).blacklistedTerms;
    if (!Array.isArray(terms) || terms.length === 0) return null;
    const res: RegExp[] = [];
    for (const term of terms as unknown[]) {
      const re = (term as { regExp?: unknown } | null)?.regExp;
      if (!(re instanceof RegExp)) return null;
      res.push(re);
    }
    return unitable(res) ? new WordPrefilter(transformers, res) : null;
  }

  /** A stateless step's result for a code point beyond ASCII, memoised (-1: dropped). */
  #memoised(step: Step, c: number): number {
    let m = step.other.get(c);
    if (m === undefined) {
      m = composed(step.run, c);
      if (step.other.size < 65_536) step.other.set(c, m);
    }
    return m;
  }

  #reset(): void {
    for (const step of this.#steps) step.instance?.reset();
  }

  /**
   * The text as the matcher's blacklist transformers turn it (obscenity's applyTransformers without
   * the index map): code point by code point (a lone surrogate is one), each transformer in order,
   * a dropped character skipped.
   */
  transform(text: string): string {
    this.#reset();
    let out = "";
    let n = 0;
    const length = text.length;
    const pair = this.#pair;
    for (let i = 0; i < length;) {
      let c = text.charCodeAt(i++);
      if (c >= 0xd800 && c <= 0xdbff && i < length) {
        const low = text.charCodeAt(i);
        if (low >= 0xdc00 && low <= 0xdfff) {
          c = (c - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
          i++;
        }
      }
      let t: number | undefined = c;
      if (pair) {
        // the usual pipeline (obscenity's English preset): stateless transformers, then one stateful
        t = t < 128 ? pair.table[t]! : this.#memoised(pair.step, t);
        if (t < 0) continue;
        t = pair.instance.transform(t);
        if (t === undefined) continue;
      } else
        for (const step of this.#steps) {
          if (step.table) {
            t = t < 128 ? step.table[t]! : this.#memoised(step, t);
            if (t < 0) break;
          } else {
            t = step.instance!.transform(t);
            if (t === undefined) break;
          }
        }
      if (t === undefined || t < 0) continue;
      if (t > 0xffff) {
        t -= 0x10000;
        units[n++] = 0xd800 + (t >> 10);
        units[n++] = 0xdc00 + (t & 0x3ff);
      } else {
        units[n++] = t;
      }
      if (n >= CHUNK - 1) {
        out += String.fromCharCode.apply(null, units.subarray(0, n) as unknown as number[]);
        n = 0;
      }
    }
    this.#reset();
    return out + String.fromCharCode.apply(null, units.subarray(0, n) as unknown as number[]);
  }

  /** false: the matcher finds nothing in this text; true: it may find something. */
  mayMatch(text: string): boolean {
    return this.#any.test(this.transform(text));
  }
}
