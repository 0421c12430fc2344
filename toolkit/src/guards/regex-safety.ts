// User-supplied regular expressions (custom guard patterns, allowlist patterns) run in the request
// path on every prompt. V8's engine backtracks, so a pattern such as \d+()\d+()\d+! can take
// exponential time on a short text (and static checks of a pattern's shape can be walked around).
// So they never run on V8: they are written in JavaScript's syntax and run by RE2JS (the re2js
// package, a port of RE2), whose matching time is linear in the text whatever the pattern. What
// RE2 cannot do in linear time (backreferences, lookahead, lookbehind) is refused when the template
// is written.
import { RE2JS, RE2Set } from "re2js";

export const MAX_PATTERN_LENGTH = 256;
const ALLOWED_FLAGS = /^[imsu]*$/;

export type PatternCheck = { ok: true } | { ok: false; reason: string };

/** A compiled user pattern: matched in time linear in the text. */
export interface Pattern {
  /** Every non-empty match, left to right, as [start, end) in UTF-16 code units. */
  matches(text: string): Generator<[number, number]>;
  /** Whether the whole text matches. */
  matchesWhole(text: string): boolean;
}

/** User patterns asked together (a custom template's, an allowlist's). */
export interface PatternSet {
  readonly size: number;
  /** Every non-empty match of every pattern, as [pattern index, start, end), by pattern, left to right. */
  matches(text: string): Generator<[number, number, number]>;
  /** Whether one of the patterns matches the whole text. */
  matchesWhole(text: string): boolean;
}

/** JavaScript's escapes that RE2 spells otherwise: \uXXXX and \u{X...} are \x{...} there. */
function toRe2Syntax(source: string): string {
  return source.replace(/\\\\|\\u\{([0-9A-Fa-f]+)\}|\\u([0-9A-Fa-f]{4})/g, (m, braced: string | undefined, four: string | undefined) =>
    (braced ?? four) ? `\\x{${braced ?? four}}` : m,
  );
}

/**
 * A pattern in RE2's syntax with its flags written inline, as RE2JS.compile writes them: the same
 * for a pattern alone and in a set, which takes no flags per pattern.
 */
function re2Source(source: string, flags: string): string {
  return `${flags.includes("m") ? "(?m)" : ""}${flags.includes("s") ? "(?s)" : ""}${flags.includes("i") ? "(?i)" : ""}${toRe2Syntax(source)}`;
}

function unsupported(source: string): string | undefined {
  if (/\\[1-9]|\\k</.test(source)) return "backreferences are not supported (patterns run in linear time)";
  if (/\(\?<?[=!]/.test(source)) return "lookahead and lookbehind are not supported (patterns run in linear time)";
  return undefined;
}

/** Checks a pattern's size, flags and syntax: it must be valid JavaScript and run in linear time. Pure; never runs it. */
export function checkPattern(source: string, flags = ""): PatternCheck {
  if (source.length === 0) return { ok: false, reason: "pattern is empty" };
  if (source.length > MAX_PATTERN_LENGTH) return { ok: false, reason: `pattern is longer than ${MAX_PATTERN_LENGTH} characters` };
  if (!ALLOWED_FLAGS.test(flags)) return { ok: false, reason: "flags may only be i, m, s and u" };
  try {
    new RegExp(source, flags);
  } catch (err) {
    return { ok: false, reason: `not a valid regular expression: ${(err as Error).message}` };
  }
  const no = unsupported(source);
  if (no) return { ok: false, reason: no };
  try {
    RE2JS.compile(re2Source(source, flags));
  } catch (err) {
    return { ok: false, reason: `not supported by the linear-time engine: ${(err as Error).message}` };
  }
  return { ok: true };
}

/** "/pattern/flags" -> { source, flags }; anything else is not a pattern literal. */
export function parsePatternLiteral(entry: string): { source: string; flags: string } | null {
  const m = /^\/(.+)\/([a-z]*)$/s.exec(entry);
  return m ? { source: m[1]!, flags: m[2]! } : null;
}

/** A compiled pattern and, once it is known to hold a match, the search for where. */
interface Compiled extends Pattern {
  /** Every non-empty match of a text known to hold one. */
  spans(text: string): Generator<[number, number]>;
}

/** A character a pattern consumes spans at most 2 UTF-16 code units (a surrogate pair). */
const UNIT = 2;
class Unread extends Error {}

/**
 * The most UTF-16 code units a match of a checked pattern can span, or Infinity. Conservative: it
 * reads JavaScript's syntax, counts every character of the pattern that is not syntax as a pair
 * of code units, and answers Infinity for `*`, `+`, `{n,}` and anything it does not read (an
 * escape it does not know is one character, and what follows it more characters: never less).
 */
export function maxMatchLength(source: string): number {
  let i = 0;
  const n = source.length;
  const times = (len: number, k: number) => (len === 0 ? 0 : len * k);
  function alternation(): number {
    let best = sequence();
    while (source[i] === "|") {
      i++;
      best = Math.max(best, sequence());
    }
    return best;
  }
  function sequence(): number {
    let total = 0;
    while (i < n && source[i] !== "|" && source[i] !== ")") total += times(atom(), quantifier());
    return total;
  }
  function atom(): number {
    const c = source[i++];
    switch (c) {
      case "^":
      case "$":
        return 0;
      case "(": {
        if (source[i] === "?") {
          // (?:...), (?<name>...), (?i:...): a group; lookaround is refused before this runs
          const head = /^\?(?::|<[A-Za-z_$][\w$]*>|[ims]*-?[ims]*:)/.exec(source.slice(i));
          if (!head) throw new Unread();
          i += head[0].length;
        }
        const len = alternation();
        if (source[i++] !== ")") throw new Unread();
        return len;
      }
      case "[": {
        // [] and [^] mean other things to RE2 than to JavaScript
        if (source[i] === "]" || (source[i] === "^" && source[i + 1] === "]")) throw new Unread();
        while (i < n && source[i] !== "]") i += source[i] === "\\" ? 2 : 1;
        if (i++ >= n) throw new Unread();
        return UNIT;
      }
      case "\\": {
        const e = source[i++];
        if (e === "b" || e === "B") return 0;
        // \Q...\E quotes text to RE2 (\Q[\E*] is \[*\]), where JavaScript reads two letters
        if (e === "Q" || e === "E") throw new Unread();
        if ((e === "p" || e === "P" || e === "u") && source[i] === "{") {
          const close = source.indexOf("}", i);
          if (close < 0) throw new Unread();
          i = close + 1;
        }
        return UNIT;
      }
      case "*":
      case "+":
      case "?":
      case "{":
      case undefined:
        throw new Unread();
      default:
        return UNIT;
    }
  }
  function quantifier(): number {
    let k: number;
    const c = source[i];
    if (c === "*" || c === "+") k = Infinity;
    else if (c === "?") k = 1;
    else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(source.slice(i));
      if (!m) throw new Unread();
      k = m[2] === undefined ? Number(m[1]) : m[3] === "" ? Infinity : Number(m[3]);
      i += m[0].length - 1;
    } else return 1;
    i++;
    if (source[i] === "?") i++; // lazy
    if (i < n && "*+?{".includes(source[i]!)) throw new Unread();
    return k;
  }
  try {
    const len = alternation();
    return i === n ? len : Infinity;
  } catch (err) {
    if (err instanceof Unread) return Infinity;
    throw err;
  }
}

/** How much text one test of the DFA covers when it looks for where the next match starts. */
const CHUNK = 256;

function compileChecked(source: string, flags: string): Compiled {
  const check = checkPattern(source, flags);
  if (!check.ok) throw new Error(check.reason);
  const re = RE2JS.compile(re2Source(source, flags));
  const longest = maxMatchLength(source);
  const chunk = Math.max(CHUNK, 2 * longest);
  // The matcher's search keeps a match's bounds, so it runs RE2JS's backtracker or NFA, several
  // times slower than its DFA, from where it starts to the next match, or to the end of the text
  // when none is left. The DFA says first where to start it: the first chunk of the text in
  // which a match starts, read with the character before it and `longest` after it, which is all
  // a match starting there can read (\b, \B, ^ and $ read one character on either side). A match
  // the cut invents can only start at that first character or end at the last one: the search
  // then runs on to the next true match, as it did without this test. A pattern without a
  // longest match: the test reads the whole rest of the text, whether anything is left at all.
  const searchFrom = (text: string, from: number): number => {
    if (longest === Infinity) return from === 0 || re.test(text.slice(from - 1)) ? from : -1;
    for (let at = from; at < text.length; at += chunk) if (re.test(text.slice(Math.max(0, at - 1), at + chunk + longest + 1))) return at;
    return -1;
  };
  function* spans(text: string): Generator<[number, number]> {
    const m = re.matcher(text);
    for (let from = 0; from < text.length;) {
      const at = searchFrom(text, from);
      if (at < 0 || !m.find(at)) return;
      const start = m.start(),
        end = m.end();
      if (end > start) {
        yield [start, end];
        from = end;
      } else {
        // an empty match: on by one character, as the matcher's own search steps
        from = end + (text.codePointAt(end)! > 0xffff ? 2 : 1);
      }
    }
  }
  return {
    spans,
    // most texts hold no match: RE2's DFA says so without the positions' bookkeeping
    *matches(text: string) {
      if (re.test(text)) yield* spans(text);
    },
    matchesWhole: (text: string) => re.matches(text),
  };
}

/** Compiles a checked pattern. Throws when the pattern does not pass the check. */
export function compilePattern(source: string, flags = ""): Pattern {
  return compileChecked(source, flags);
}

/**
 * Compiles checked patterns into a set. Which of them hold a match is one pass of RE2's DFA over
 * the text for them all (RE2Set), not one per pattern: 50 patterns on a 1 KB prompt took 311 µs
 * one by one, 9 µs as a set. Throws when a pattern does not pass the check.
 */
export function compilePatternSet(specs: ReadonlyArray<{ source: string; flags?: string | undefined }>): PatternSet {
  const patterns = specs.map((p) => compileChecked(p.source, p.flags ?? ""));
  let set: RE2Set | undefined;
  if (patterns.length > 1) {
    set = new RE2Set(RE2Set.UNANCHORED);
    for (const p of specs) set.add(re2Source(p.source, p.flags ?? ""));
    try {
      set.compile();
    } catch {
      // more instructions together than RE2 compiles into one program: each pattern on its own
      set = undefined;
    }
  }
  return {
    size: patterns.length,
    *matches(text: string) {
      if (set) {
        for (const i of set.match(text)) for (const [start, end] of patterns[i]!.spans(text)) yield [i, start, end];
      } else {
        for (let i = 0; i < patterns.length; i++) for (const [start, end] of patterns[i]!.matches(text)) yield [i, start, end];
      }
    },
    matchesWhole: (text: string) => patterns.some((p) => p.matchesWhole(text)),
  };
}
