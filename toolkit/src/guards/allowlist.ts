// Allowlists: strings and patterns that must never trigger a guard. An entry is a literal
// (matched case-insensitively) or a "/pattern/flags" regular expression (checked for safety).
import type { Hit } from "./types.ts";
import { compilePatternSet, parsePatternLiteral, type PatternSet } from "./regex-safety.ts";
import { SpanSet } from "./spans.ts";

export interface CompiledAllowlist {
  literals: string[];
  /** user patterns, run in linear time (regex-safety.ts) */
  patterns: PatternSet;
}

export const EMPTY_ALLOWLIST: CompiledAllowlist = { literals: [], patterns: compilePatternSet([]) };

/** Compiles allowlist entries. Throws on an unsafe or invalid pattern (the schema refuses those first). */
export function compileAllowlist(entries: readonly string[] | undefined): CompiledAllowlist {
  if (!entries || entries.length === 0) return EMPTY_ALLOWLIST;
  const literals: string[] = [];
  const patterns: Array<{ source: string; flags: string }> = [];
  for (const entry of entries) {
    const lit = parsePatternLiteral(entry);
    if (lit) patterns.push(lit);
    else if (entry.trim()) literals.push(entry.toLowerCase());
  }
  return { literals, patterns: compilePatternSet(patterns) };
}

/** Where allowlisted entries occur in a text. */
export function allowlistSpans(text: string, allowlist: CompiledAllowlist): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  if (allowlist.literals.length > 0) {
    const lower = text.toLowerCase();
    for (const lit of allowlist.literals) {
      for (let at = lower.indexOf(lit); at >= 0; at = lower.indexOf(lit, at + 1)) spans.push([at, at + lit.length]);
    }
  }
  // one push per match: a spread of tens of thousands of arguments overflows the stack
  for (const [, start, end] of allowlist.patterns.matches(text)) spans.push([start, end]);
  return spans;
}

/**
 * Drops the hits an allowlist covers: a hit inside an allowlisted occurrence, a hit whose own
 * text is allowlisted, and a whole-text hit when anything allowlisted occurs in the text.
 */
export function applyAllowlist(hits: Hit[], text: string, allowlist: CompiledAllowlist): Hit[] {
  if (hits.length === 0 || (allowlist.literals.length === 0 && allowlist.patterns.size === 0)) return hits;
  const spans = allowlistSpans(text, allowlist);
  // one binary search per hit, not a scan of every allowlisted occurrence
  const covered = SpanSet.ofPairs(spans);
  return hits.filter((hit) => {
    if (hit.whole) return spans.length === 0;
    if (covered.contains(hit.start, hit.end)) return false;
    const own = text.slice(hit.start, hit.end);
    if (allowlist.literals.includes(own.toLowerCase())) return false;
    return !allowlist.patterns.matchesWhole(own);
  });
}
