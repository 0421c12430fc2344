// User-supplied regular expressions (custom guard patterns, allowlist patterns) run in the request
// path on every prompt, so a template may not carry one that can backtrack catastrophically.
// V8's engine backtracks; this static check refuses the shapes that make it exponential or
// high-degree polynomial (in the spirit of safe-regex's star-height test), before any text is seen.

export const MAX_PATTERN_LENGTH = 256;
export const MAX_UNBOUNDED_QUANTIFIERS = 5;
const ALLOWED_FLAGS = /^[imsu]*$/;

export type PatternCheck = { ok: true } | { ok: false; reason: string };

interface Frame {
  /** index of the first character of the group body (after "(", "(?:", "(?<name>" ...) */
  bodyStart: number;
  /** positions of top-level "|" in this group */
  bars: number[];
  hasUnbounded: boolean;
  /** contains a quantifier whose count varies (?, *, +, {n,m}) */
  hasVariable: boolean;
}

interface Quantifier {
  length: number;
  repeating: boolean;
  unbounded: boolean;
  variable: boolean;
}

function readQuantifier(src: string, i: number): Quantifier | null {
  const c = src[i];
  let q: Quantifier | null = null;
  if (c === "*" || c === "+") q = { length: 1, repeating: true, unbounded: true, variable: true };
  else if (c === "?") q = { length: 1, repeating: false, unbounded: false, variable: true };
  else if (c === "{") {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
    if (m) {
      const min = Number(m[1]);
      const unbounded = m[2] !== undefined && m[3] === "";
      const max = m[2] === undefined ? min : unbounded ? Infinity : Number(m[3]);
      q = { length: m[0].length, repeating: max > 1, unbounded, variable: max !== min };
    }
  }
  if (q && src[i + q.length] === "?") q.length += 1; // lazy
  return q;
}

function isLiteralAlternative(s: string): boolean {
  return /^(?:[\p{L}\p{N} _'-]|\\[^A-Za-z0-9])*$/u.test(s);
}

function unescapeLiteral(s: string): string {
  return s.replace(/\\(.)/g, "$1");
}

/** Checks a pattern's size, flags, syntax and shape. Pure; never runs the pattern on input. */
export function checkPattern(source: string, flags = ""): PatternCheck {
  if (source.length === 0) return { ok: false, reason: "pattern is empty" };
  if (source.length > MAX_PATTERN_LENGTH) return { ok: false, reason: `pattern is longer than ${MAX_PATTERN_LENGTH} characters` };
  if (!ALLOWED_FLAGS.test(flags)) return { ok: false, reason: "flags may only be i, m, s and u" };
  try {
    new RegExp(source, flags);
  } catch (err) {
    return { ok: false, reason: `not a valid regular expression: ${(err as Error).message}` };
  }
  const ci = flags.includes("i");
  const stack: Frame[] = [{ bodyStart: 0, bars: [], hasUnbounded: false, hasVariable: false }];
  let unboundedCount = 0;
  // the previous quantified atom at the current level, to catch ".*.*" and "\d+\d+"
  let prevAtom: { text: string; unbounded: boolean } | null = null;
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    let atomStart = i;
    let atomEnd: number;
    let closed: Frame | null = null;
    if (c === "\\") {
      const next = source[i + 1] ?? "";
      if (/[1-9]/.test(next) || next === "k") return { ok: false, reason: "backreferences are not allowed" };
      atomEnd = i + 2;
      if (next === "u" && source[i + 2] === "{") atomEnd = source.indexOf("}", i) + 1;
      else if (next === "u") atomEnd = i + 6;
      else if (next === "x") atomEnd = i + 4;
      else if ((next === "p" || next === "P") && source[i + 2] === "{") atomEnd = source.indexOf("}", i) + 1;
    } else if (c === "[") {
      let j = i + 1;
      if (source[j] === "^") j++;
      if (source[j] === "]") j++;
      while (j < source.length && source[j] !== "]") j += source[j] === "\\" ? 2 : 1;
      atomEnd = j + 1;
    } else if (c === "(") {
      let body = i + 1;
      if (source[body] === "?") {
        const m = /^\?(?::|=|!|<=|<!|<[A-Za-z_$][\w$]*>)/.exec(source.slice(body));
        body += m ? m[0].length : 1;
      }
      stack.push({ bodyStart: body, bars: [], hasUnbounded: false, hasVariable: false });
      prevAtom = null;
      i = body;
      continue;
    } else if (c === ")") {
      closed = stack.pop() ?? null;
      if (!closed || stack.length === 0) return { ok: false, reason: "unbalanced parentheses" };
      atomStart = closed.bodyStart;
      atomEnd = i + 1;
    } else if (c === "|") {
      stack[stack.length - 1]!.bars.push(i);
      prevAtom = null;
      i += 1;
      continue;
    } else {
      atomEnd = i + 1;
    }
    const q = readQuantifier(source, atomEnd);
    const frame = stack[stack.length - 1]!;
    if (closed) {
      // a group's own quantifiers propagate to the enclosing group
      frame.hasUnbounded ||= closed.hasUnbounded;
      frame.hasVariable ||= closed.hasVariable;
      if (q?.repeating) {
        // (a+)+, (a+){2}, (a{1,3})+, (a?)+: more than one way to split the same text
        if (closed.hasUnbounded || (q.unbounded && closed.hasVariable)) {
          return { ok: false, reason: "nested quantifiers (a repeated group that contains a repetition) can backtrack catastrophically" };
        }
        if (closed.bars.length > 0) {
          const body = source.slice(closed.bodyStart, atomEnd - 1);
          const cuts = [closed.bodyStart - 1, ...closed.bars, atomEnd - 1];
          const alts: string[] = [];
          for (let k = 0; k + 1 < cuts.length; k++) alts.push(source.slice(cuts[k]! + 1, cuts[k + 1]));
          if (!alts.every(isLiteralAlternative)) {
            return { ok: false, reason: `a repeated alternation must list plain words: (${body})` };
          }
          const plain = alts.map((a) => (ci ? unescapeLiteral(a).toLowerCase() : unescapeLiteral(a)));
          for (const a of plain) {
            if (a === "" || plain.some((b) => b !== a && b.startsWith(a)) || plain.filter((b) => b === a).length > 1) {
              return { ok: false, reason: `a repeated alternation may not have overlapping alternatives: (${body})` };
            }
          }
        }
      }
    }
    if (q) {
      if (q.unbounded) {
        unboundedCount += 1;
        frame.hasUnbounded = true;
      }
      if (q.variable) frame.hasVariable = true;
      const text = source.slice(atomStart, atomEnd);
      if (q.unbounded && prevAtom?.unbounded) {
        const broad = (t: string) => t === "." || t === "\\S" || t === "\\W" || t === "\\D" || t.startsWith("[^");
        if (prevAtom.text === text || broad(prevAtom.text) || broad(text)) {
          return { ok: false, reason: "adjacent repetitions that can match the same text backtrack polynomially" };
        }
      }
      prevAtom = { text, unbounded: q.unbounded };
      i = atomEnd + q.length;
    } else {
      if (c !== "^" && c !== "$") prevAtom = null;
      i = atomEnd;
    }
  }
  if (stack.length !== 1) return { ok: false, reason: "unbalanced parentheses" };
  if (unboundedCount > MAX_UNBOUNDED_QUANTIFIERS) {
    return { ok: false, reason: `more than ${MAX_UNBOUNDED_QUANTIFIERS} unbounded repetitions` };
  }
  return { ok: true };
}

/** "/pattern/flags" -> { source, flags }; anything else is not a pattern literal. */
export function parsePatternLiteral(entry: string): { source: string; flags: string } | null {
  const m = /^\/(.+)\/([a-z]*)$/s.exec(entry);
  return m ? { source: m[1]!, flags: m[2]! } : null;
}

/** Compiles a checked pattern for scanning (global). Throws when the pattern does not pass the check. */
export function compilePattern(source: string, flags = ""): RegExp {
  const check = checkPattern(source, flags);
  if (!check.ok) throw new Error(check.reason);
  return new RegExp(source, flags + "g");
}
