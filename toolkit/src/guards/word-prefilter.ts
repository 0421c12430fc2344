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

const UNSET = -2;
const DROPPED = -1;

type Step = (c: number) => number | undefined;

/** A run of stateless transformers composed into one function, memoised per code point. */
function memoised(run: ReadonlyArray<(c: number) => number | undefined>): Step {
  const ascii = new Int32Array(128).fill(UNSET);
  const other = new Map<number, number>();
  const compute = (c: number): number => {
    let t: number | undefined = c;
    for (const f of run) {
      t = f(t);
      if (t === undefined) return DROPPED;
    }
    return t;
  };
  return (c) => {
    let t: number | undefined;
    if (c < 128) {
      t = ascii[c]!;
      if (t === UNSET) ascii[c] = t = compute(c);
    } else {
      t = other.get(c);
      if (t === undefined) {
        t = compute(c);
        if (other.size < 65_536) other.set(c, t);
      }
    }
    return t === DROPPED ? undefined : t;
  };
}

export class WordPrefilter {
  readonly #steps: Step[] = [];
  readonly #resets: Array<() => void> = [];
  readonly #any: RegExp;

  private constructor(transformers: readonly TransformerContainer[], terms: readonly RegExp[]) {
    let run: Array<(c: number) => number | undefined> = [];
    const flush = () => {
      if (run.length > 0) this.#steps.push(memoised(run));
      run = [];
    };
    for (const t of transformers) {
      // a simple (stateless) transformer has transform, a stateful one a factory of instances
      if ("transform" in t) {
        run.push(t.transform);
      } else {
        flush();
        const instance = t.factory();
        this.#steps.push((c) => instance.transform(c));
        this.#resets.push(() => instance.reset());
      }
    }
    flush();
    this.#any = new RegExp(terms.map((re) => `(?:${re.source})`).join("|"), terms[0]!.flags.replace("g", ""));
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
    const flags = res[0]!.flags;
    // alternatives keep their meaning only with the same flags and no group references
    if (res.some((re) => re.flags !== flags || /\\[1-9k]|\(\?</.test(re.source.replace(/\(\?<[=!]/g, "")))) return null;
    return new WordPrefilter(transformers, res);
  }

  /** The text as the matcher's blacklist transformers turn it (obscenity's applyTransformers, without the index map). */
  transform(text: string): string {
    for (const reset of this.#resets) reset();
    const codes: number[] = [];
    let out = "";
    for (let i = 0; i < text.length; ) {
      const cp = text.codePointAt(i)!;
      i += cp > 0xffff ? 2 : 1;
      let c: number | undefined = cp;
      for (const step of this.#steps) {
        c = step(c);
        if (c === undefined) break;
      }
      if (c === undefined) continue;
      codes.push(c);
      if (codes.length === 4096) {
        out += String.fromCodePoint(...codes);
        codes.length = 0;
      }
    }
    for (const reset of this.#resets) reset();
    return out + String.fromCodePoint(...codes);
  }

  /** false: the matcher finds nothing in this text; true: it may find something. */
  mayMatch(text: string): boolean {
    return this.#any.test(this.transform(text));
  }
}
