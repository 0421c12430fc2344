// Text helpers shared by the guards: a normalised view with offsets back into the original text,
// word tokens with a light stemmer, and masking for descriptions. All pure.

/** A lower-cased, NFKC-folded view of a text with a map from view offsets to original offsets. */
export interface TextView {
  text: string;
  /** offsets[i] = offset in the original text of view character i; offsets[text.length] = end. */
  offsets: number[] | null;
}

const ZERO_WIDTH = /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\uFEFF]/;
// eslint-disable-next-line no-control-regex
const ASCII = /^[\x00-\x7F]*$/;

const ASCII_LOWER = Array.from({ length: 128 }, (_, c) => String.fromCharCode(c).toLowerCase());

// Cyrillic and Greek letters that look like Latin ones ("ignоre" with a Cyrillic о): folded to the
// Latin letter in the view, one character for one, so that offsets stay valid. NFKC keeps them.
const CONFUSABLES: ReadonlyMap<string, string> = new Map(
  [..."аaвbеeкkмmнhоoрpсcтtуyхxіiјjѕsԁdɡgαaβbεeιiκkνvοoρpτtυuχxӏl"].flatMap((c, i, all) =>
    i % 2 === 0 ? [[c, all[i + 1]!] as [string, string]] : [],
  ),
);

/**
 * Lower-cases and NFKC-folds a text (fullwidth and styled letters become plain ones), drops
 * zero-width and bidi control characters, and keeps a map back to the original offsets. ASCII
 * text takes a fast path with an identity map.
 */
export function normalise(text: string): TextView {
  if (ASCII.test(text)) return { text: text.toLowerCase(), offsets: null };
  let out = "";
  const offsets: number[] = [];
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    if (cp < 128) {
      // ASCII inside a non-ASCII text (most of a French or German one): NFKC leaves it as is
      offsets.push(i);
      out += ASCII_LOWER[cp]!;
      i++;
      continue;
    }
    const ch = String.fromCodePoint(cp);
    const width = ch.length;
    if (!ZERO_WIDTH.test(ch)) {
      const lower = ch.normalize("NFKC").toLowerCase();
      const folded = CONFUSABLES.get(lower) ?? lower;
      for (let k = 0; k < folded.length; k++) offsets.push(i);
      out += folded;
    }
    i += width;
  }
  offsets.push(text.length);
  return { text: out, offsets };
}

/** Maps a [start, end) range of a view back to the original text. */
export function toOriginal(view: TextView, start: number, end: number): [number, number] {
  const o = view.offsets;
  if (!o) return [start, end];
  const s = o[Math.min(start, o.length - 1)]!;
  if (end <= start) return [s, s];
  const last = o[Math.min(end - 1, o.length - 1)]!;
  let j = end;
  while (j < o.length - 1 && o[j]! <= last) j++;
  return [s, Math.max(o[Math.min(j, o.length - 1)]!, last + 1)];
}

const LEET: Record<string, string> = { "0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", $: "s", "!": "i" };
// LEET's look-alikes as a character class (none of them needs escaping inside one), the spots where
// a letter touches one, and the characters of a leetspeak word (letters and look-alikes), by code
const LOOK_ALIKE = `[${Object.keys(LEET).join("")}]`;
const LOOK_ALIKES = new RegExp(LOOK_ALIKE, "g");
const LEET_SPOTS = new RegExp(`[a-z]${LOOK_ALIKE}|${LOOK_ALIKE}[a-z]`, "g");
const IN_LEET_WORD = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyz" + Object.keys(LEET).join("")) IN_LEET_WORD[c.charCodeAt(0)] = 1;
const inLeetWord = (c: number) => c < 128 && IN_LEET_WORD[c] === 1;
/** What follows the part of an e-mail address before its top-level domain: a dot and a letter. */
const EMAIL_DOMAIN_END = /^\.[a-z]/;

/**
 * Undoes leetspeak in words that mix letters and look-alike digits or symbols ("1gn0re" ->
 * "ignore"), keeping the length so offsets stay valid. Plain numbers ("step 3") are untouched.
 * Returns null when nothing changed.
 */
export function deLeet(lower: string): string | null {
  // the words (runs of letters and look-alikes) that mix both are the words with a letter next to
  // a look-alike: found from those spots and widened to the word, so that the words of plain prose
  // around them (most of a text) are never visited
  let out = "";
  let done = 0;
  LEET_SPOTS.lastIndex = 0;
  for (let m = LEET_SPOTS.exec(lower); m; m = LEET_SPOTS.exec(lower)) {
    let start = m.index;
    let end = m.index + 2;
    while (start > 0 && inLeetWord(lower.charCodeAt(start - 1))) start--;
    while (end < lower.length && inLeetWord(lower.charCodeAt(end))) end++;
    LEET_SPOTS.lastIndex = end;
    const word = lower.slice(start, end);
    // at least three characters, two of them letters, so that "a1" or "4x" are left alone; and not
    // an e-mail address, whose @ is no letter ("doe@example" before ".com")
    if (
      word.length < 3 ||
      (word.match(/[a-z]/g)?.length ?? 0) < 2 ||
      (word.includes("@") && EMAIL_DOMAIN_END.test(lower.slice(end, end + 2)))
    )
      continue;
    out += lower.slice(done, start) + word.replace(LOOK_ALIKES, (c) => LEET[c]!);
    done = end;
  }
  return done === 0 ? null : out + lower.slice(done);
}

/** Whether a sentence ends between s[i - 1] and s[i]: . ! or ? before a space. */
function sentenceBreak(s: string, i: number): boolean {
  const c = s[i - 1];
  return (c === "." || c === "!" || c === "?") && /\s/.test(s[i] ?? "");
}

/** What stands for a character of a sentence left out: neither a word character nor a space. */
const LEFT_OUT = /[^.!?]/g;

/**
 * The sentences of the view in which deLeet changed something, as [start, end) ranges in order.
 * A line break ends no sentence here: an attack split over lines ("1gn0re all
 * previous\ninstructions") is one sentence.
 */
export function changedRanges(view: string, leet: string): Array<readonly [number, number]> {
  const out: Array<readonly [number, number]> = [];
  let done = 0;
  for (let i = 0; i < leet.length; i++) {
    if (leet.charCodeAt(i) === view.charCodeAt(i)) continue;
    const range = sentenceAt(view, i, done);
    out.push(range);
    done = range[1];
    i = done - 1;
  }
  return out;
}

/**
 * The sentence of `s` that holds the character at `i`, as [start, end), starting no earlier than
 * `from`: from the end of the sentence before (. ! or ? before a space) to its own end, where a
 * line break ends nothing (changedRanges).
 */
export function sentenceAt(s: string, i: number, from = 0): [number, number] {
  let start = i;
  while (start > from && !sentenceBreak(s, start)) start--;
  let end = i + 1;
  while (end < s.length && !sentenceBreak(s, end)) end++;
  return [start, end];
}

/**
 * The de-leeted view with only the sentences deLeet changed left in (changedRanges), so that its
 * offsets are the view's. A signal in another sentence reads the words it read in the view, whose
 * hits the leetspeak pass only repeats: an e-mail address (its @ reads as an a) sent every deep
 * signal of the injection detector over the whole prompt a second time. The sentences left out
 * keep their ends (. ! ?) and lose every other character to U+0001, which no signal reads as a
 * word or a space, so that no phrase runs into them.
 */
export function changedSentences(view: string, leet: string): string {
  const leaveOut = (part: string) => part.replace(LEFT_OUT, "\u0001");
  let out = "";
  let done = 0;
  for (const [start, end] of changedRanges(view, leet)) {
    out += leaveOut(view.slice(done, start)) + leet.slice(start, end);
    done = end;
  }
  return out + leaveOut(view.slice(done));
}

// Three or more single letters, each followed by one space, dot, dash or underscore, and a last one:
// "i g n o r e", "I.g.n.o.r.e". Linear: every repetition starts with a letter.
const SPACED = /(?<![a-z])(?:[a-z][ ._-]){2,}[a-z](?![a-z])/g;

/**
 * Joins letter-spaced words ("i g n o r e   a l l" -> "ignore all"). The result is shorter than the
 * text, so its offsets are not the text's. Returns null when the text has no letter-spaced word.
 */
export function despace(lower: string): string | null {
  if (!/[a-z][ ._-][a-z][ ._-][a-z]/.test(lower)) return null;
  let changed = false;
  const out = lower.replace(SPACED, (run) => {
    changed = true;
    return run.replace(/[ ._-]/g, "");
  });
  // the gaps between spaced words (two or more spaces) become one
  return changed ? out.replace(/ {2,}/g, " ") : null;
}

/**
 * One regular expression that finds any of `words` as a whole word (global, case-insensitive),
 * its alternatives shared as a trie ("pass(?:word|port)"): a list of a thousand words scans 1 KB
 * in a few microseconds, where a flat alternation tries each word at each word start. A longer
 * word wins over a word it starts with. Words are letters only.
 */
export function wordsRegex(words: Iterable<string>): RegExp {
  interface Node {
    end: boolean;
    next: Map<string, Node>;
  }
  const root: Node = { end: false, next: new Map() };
  for (const word of words) {
    let node = root;
    for (const c of word) {
      let child = node.next.get(c);
      if (!child) node.next.set(c, (child = { end: false, next: new Map() }));
      node = child;
    }
    node.end = true;
  }
  const emit = (node: Node): string => {
    const alts = [...node.next].map(([c, child]) => c + emit(child));
    if (alts.length === 0) return "";
    const body = alts.length === 1 ? alts[0]! : `(?:${alts.join("|")})`;
    return node.end ? `(?:${body})?` : body;
  };
  return new RegExp(`\\b${emit(root)}\\b`, "gi");
}

/** Words found whole (wordsRegex) and what each one stands for. */
export interface WordRewrites {
  re: RegExp;
  /** by the word as found, lower-cased */
  fix: ReadonlyMap<string, string>;
}

/**
 * A rewrite of whole words, built from `build` on first use (a module that may never need it does
 * not pay for it at start-up): each key of the map, found as a word, stands for its value.
 */
export function wordRewrites(build: () => Map<string, string>): () => WordRewrites {
  let built: WordRewrites | undefined;
  return () => {
    if (!built) {
      const fix = build();
      built = { re: wordsRegex(fix.keys()), fix };
    }
    return built;
  };
}

/**
 * Ways of writing a word with one letter left out or two side by side swapped, never the first
 * letter ("wmen", "womne", "hte"): how words are misspelt in a hurry, or on purpose to pass a
 * filter. Words of four letters or more; the word itself is not among them.
 */
export function misspellings(word: string): string[] {
  if (word.length < 4) return [];
  const out = new Set<string>();
  for (let i = 1; i < word.length - 1; i++) out.add(word.slice(0, i) + word.slice(i + 1));
  for (let i = 1; i < word.length - 1; i++) out.add(word.slice(0, i) + word[i + 1] + word[i] + word.slice(i + 2));
  out.delete(word);
  return [...out];
}

export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "a about above after again against all also am an and any are as at be because been before being below between both but by " +
    "can could did do does doing down during each few for from further had has have having he her here hers herself him himself " +
    "his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours " +
    "ourselves out over own same she should so some such than that the their theirs them themselves then there these they this " +
    "those through to too under until up very was we were what when where which while who whom why will with would you your " +
    "yours yourself yourselves let lets get got make made want wanted need needs like please thanks thank thx hi hello hey " +
    "ok okay yes yeah sure good great morning afternoon evening night day today tomorrow tell give know think help can't cannot " +
    "don't doesn't didn't won't isn't aren't wasn't i'm i've i'd i'll you're you've it's that's what's there's let's may might must " +
    "shall one two way much many something anything thing things use using used really also well maybe"
  ).split(/\s+/),
);

const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu;

/** Lower-cased word tokens (letters and digits, with an apostrophe suffix). */
export function words(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

/**
 * A copy of `s` that shares no memory with the text it was cut from. V8 keeps a whole string alive
 * through any slice (or regex match) of 13 characters or more taken from it; a key kept in a
 * long-lived cache must not hold a megabyte prompt in memory.
 */
export function ownCopy(s: string): string {
  return (" " + s).slice(1);
}

// stem() is pure and texts repeat their vocabulary: remembered stems, at most MAX_STEMS of them
const MAX_STEMS = 20_000;
const stems = new Map<string, string>();

/**
 * A light English stemmer (plural, -ing, -ed, -ly, -ment, -ation): enough to match "invoices",
 * "invoicing" and "invoiced" against "invoice" without a dictionary.
 */
export function stem(word: string): string {
  let s = stems.get(word);
  if (s === undefined) {
    // stem the copy: a stem is often the word itself or a slice of it, and must not hold the text either
    const key = ownCopy(word);
    s = stemOnce(key);
    if (stems.size >= MAX_STEMS) stems.clear();
    stems.set(key, s);
  }
  return s;
}

function stemOnce(word: string): string {
  let w = word.replace(/['’]s$/, "");
  if (w.length <= 3) return w;
  if (w.endsWith("ies") && w.length > 4) return w.slice(0, -3) + "y";
  if (w.endsWith("sses")) return w.slice(0, -2);
  if (w.endsWith("ss") || w.endsWith("us") || w.endsWith("is")) return w;
  for (const suffix of ["ations", "ation", "ments", "ment", "ingly", "ing", "edly", "ed", "ly", "es", "s"]) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 3) {
      w = w.slice(0, -suffix.length);
      if (suffix === "es" && !/(?:ch|sh|x|z|ss|o)$/.test(w)) w += "e";
      // running -> run, transferred -> transfer
      if (
        (suffix === "ing" || suffix === "ed" || suffix === "edly" || suffix === "ingly") &&
        /([b-df-hj-np-tv-z])\1$/.test(w) &&
        !/(?:ll|ss|zz)$/.test(w)
      )
        w = w.slice(0, -1);
      return w.replace(/e$/, "");
    }
  }
  return w.replace(/e$/, "");
}

/** Content words of a text: tokens that are not stopwords or bare numbers, stemmed. */
export function contentStems(text: string): string[] {
  return contentStemsOf(words(text));
}

/** Whether a token is a bare number (digits only): a loop, no regular expression per token. */
function isDigits(w: string): boolean {
  for (let i = 0; i < w.length; i++) {
    const c = w.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

// contentStemsOf's verdict per word (pure, like stem()): its stem, or "" for a stopword and a word
// whose stem is one. One look-up per token instead of two stopword look-ups and the stem's.
const contents = new Map<string, string>();

/** contentStems of a text's words (words(text)), when the caller has them already. */
export function contentStemsOf(tokens: readonly string[]): string[] {
  const out: string[] = [];
  for (const w of tokens) {
    // numbers first: they vary from text to text and would only churn the cache
    if (w.length < 2 || isDigits(w)) continue;
    let s = contents.get(w);
    if (s === undefined) {
      const key = ownCopy(w);
      s = STOPWORDS.has(key) ? "" : stemOnce(key); // this cache is the memo: not stem(), which would keep a second entry
      if (STOPWORDS.has(s)) s = "";
      if (contents.size >= MAX_STEMS) contents.clear();
      contents.set(key, s);
    }
    if (s !== "") out.push(s);
  }
  return out;
}

/** Shannon entropy in bits per character. */
export function entropy(s: string): number {
  if (!s) return 0;
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/** How many of lower case, upper case, digits and other characters a string uses. */
export function charClasses(s: string): number {
  return (/[a-z]/.test(s) ? 1 : 0) + (/[A-Z]/.test(s) ? 1 : 0) + (/\d/.test(s) ? 1 : 0) + (/[^A-Za-z0-9]/.test(s) ? 1 : 0);
}

/** "jane.doe@example.com" -> "j***@e***.com" */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf("@");
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  const dot = domain.lastIndexOf(".");
  const tld = dot >= 0 ? domain.slice(dot) : "";
  return `${local.slice(0, 1)}***@${domain.slice(0, 1)}***${tld}`;
}

/** The last n characters, for "ending 4242" descriptions. */
export function lastChars(s: string, n: number): string {
  return s.slice(Math.max(0, s.length - n));
}

/** "fuck" -> "f***": enough to name a word without spelling it out. */
export function maskWord(word: string): string {
  return word.length <= 1 ? "*" : word.slice(0, 1) + "*".repeat(Math.min(word.length - 1, 6));
}

/** A short excerpt for descriptions of non-secret matches (injection phrases): trimmed, capped. */
export function excerpt(s: string, max = 48): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length <= max ? one : one.slice(0, max - 1) + "…";
}

/** Can these regular expressions be joined as alternatives of one without changing what each matches? */
export function unitable(res: readonly RegExp[]): boolean {
  if (res.length === 0) return false;
  const flags = res[0]!.flags;
  // same flags; no backreferences (numbered or named) and no named groups, whose numbering or names would clash
  return res.every((re) => re.flags === flags && !/\\[1-9]|\\k<|\(\?<(?![=!])/.test(re.source));
}

/** The top-level alternatives of a regular expression's source ("a|b(c|d)" -> "a", "b(c|d)"). */
export function alternatives(source: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let inClass = false;
  let start = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\")
      i++; // an escaped character, whatever it is
    else if (inClass) inClass = c !== "]";
    else if (c === "[") inClass = true;
    else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "|" && depth === 0) {
      out.push(source.slice(start, i));
      start = i + 1;
    }
  }
  out.push(source.slice(start));
  return out;
}

/**
 * The longest source V8 compiles with its optimisations: a regular expression longer than 20 KB
 * (V8's kRegExpTooLargeToOptimize) is compiled without them, and then scans 1 KB about 1.8 times as
 * slowly (the same alternatives, 20,480 against 20,481 characters of source). A gate built past it
 * made a whole toxicity pass 1.5 times as slow (docs/guards.md, Performance).
 */
export const REGEXP_OPTIMISED_MAX = 20 * 1024;

/**
 * Gates (anyOf) over consecutive runs of `items`, each of at most `most` items and of a source V8
 * still optimises (REGEXP_OPTIMISED_MAX), in order; an item too long to share a gate gets one of
 * its own.
 */
export function gates<T extends { re: RegExp }>(items: readonly T[], most: number): Array<{ gate: RegExp; items: T[] }> {
  const out: Array<{ gate: RegExp; items: T[] }> = [];
  let run: T[] = [];
  let gate: RegExp | undefined;
  for (const item of items) {
    const wider = gate && run.length < most ? anyOf([...run, item].map((i) => i.re)) : undefined;
    if (wider && wider.source.length <= REGEXP_OPTIMISED_MAX) {
      run.push(item);
      gate = wider;
      continue;
    }
    if (gate) out.push({ gate, items: run });
    run = [item];
    gate = anyOf([item.re]);
  }
  if (gate) out.push({ gate, items: run });
  return out;
}

/**
 * One regular expression (not global) whose alternatives are `res`: it finds a match in a text
 * exactly when one of them does, since at each position it tries every alternative. A cheap, exact
 * gate in front of a loop that runs each of `res` over the same text: when it finds nothing, none
 * of them would. Alternatives that start with a word boundary share one `\b` test (`\bX|\bY` and
 * `\b(?:X|Y)` match at the same positions), so that positions inside words are dismissed at once.
 * Only for testing: which alternative matches first is not preserved. Throws when they cannot be
 * joined (see unitable).
 */
export function anyOf(res: readonly RegExp[]): RegExp {
  if (!unitable(res)) {
    // a list gated this way must keep one set of flags and no backreferences or named groups
    const odd = res.filter((re) => re.flags !== res[0]!.flags || !unitable([re]));
    throw new Error(
      `these regular expressions cannot be joined into one (flags ${res[0]?.flags ?? "-"}, no backreferences or named groups): ${odd.map(String).join(", ") || "(an empty list)"}`,
    );
  }
  const atBoundary: string[] = [];
  const others: string[] = [];
  for (const alt of res.flatMap((re) => alternatives(re.source))) {
    if (alt.startsWith("\\b")) atBoundary.push(`(?:${alt.slice(2)})`);
    else others.push(`(?:${alt})`);
  }
  const parts = atBoundary.length > 0 ? [`\\b(?:${atBoundary.join("|")})`, ...others] : others;
  return new RegExp(parts.join("|"), res[0]!.flags.replace(/[gy]/g, ""));
}

/** Rounds a confidence to three decimals so that verdicts are stable and readable. */
export function round3(x: number): number {
  return Math.round(Math.min(1, Math.max(0, x)) * 1000) / 1000;
}

/** 1 - Π(1 - w): independent signals reinforce each other without ever reaching 1. */
export function noisyOr(weights: Iterable<number>): number {
  let p = 1;
  for (const w of weights) p *= 1 - Math.min(1, Math.max(0, w));
  return 1 - p;
}
