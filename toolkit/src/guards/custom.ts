// The custom guard: patterns (checked regular expressions) and keywords from a guard template.
// Confidence is the highest weight of a hit. Descriptions name the pattern or keyword, never the
// matched text (a custom pattern may well be looking for an internal secret format).
import type { GuardDefinition, Hit } from "./types.ts";
import { compilePatternSet, type PatternSet } from "./regex-safety.ts";

export interface CustomPattern {
  pattern: string;
  flags?: string | undefined;
  name?: string | undefined;
  /** 0-1, default 0.9 */
  weight?: number | undefined;
  /** match kind, default "custom_pattern"; also the redaction placeholder ([REDACTED:KIND]) */
  kind?: string | undefined;
}

export interface CustomConfig {
  patterns?: ReadonlyArray<string | CustomPattern> | undefined;
  keywords?: readonly string[] | undefined;
  /** weight of a keyword hit, default 0.8 */
  keywordWeight?: number | undefined;
}

interface Compiled {
  /** the patterns, matched as one set */
  set: PatternSet;
  patterns: Array<{ name: string; weight: number; kind: string }>;
  keywords: RegExp | null;
  keywordList: string[];
}

const cache = new WeakMap<CustomConfig, Compiled>();

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Compiles a custom config once (patterns are checked by compilePattern; unsafe ones throw). */
export function compileCustom(config: CustomConfig): Compiled {
  let c = cache.get(config);
  if (!c) {
    const specs = (config.patterns ?? []).map((p): CustomPattern => (typeof p === "string" ? { pattern: p } : p));
    const set = compilePatternSet(specs.map((spec) => ({ source: spec.pattern, flags: spec.flags })));
    const patterns = specs.map((spec, i) => ({
      name: spec.name ?? `pattern ${i + 1}`,
      weight: spec.weight ?? 0.9,
      kind: spec.kind ?? "custom_pattern",
    }));
    const keywordList = (config.keywords ?? []).filter((k) => k.trim() !== "").map((k) => k.toLowerCase());
    // word boundaries where the keyword starts or ends with a word character
    const alts = keywordList
      .slice()
      .sort((a, b) => b.length - a.length)
      .map((k) => `${/^\w/.test(k) ? "\\b" : ""}${escape(k)}${/\w$/.test(k) ? "\\b" : ""}`);
    c = { set, patterns, keywords: alts.length ? new RegExp(alts.join("|"), "gi") : null, keywordList };
    cache.set(config, c);
  }
  return c;
}

export function detectCustom(text: string, config: CustomConfig): Hit[] {
  const c = compileCustom(config);
  const hits: Hit[] = [];
  for (const [i, start, end] of c.set.matches(text)) {
    const p = c.patterns[i]!;
    hits.push({ kind: p.kind, start, end, score: p.weight, description: `custom pattern "${p.name}"` });
  }
  if (c.keywords) {
    c.keywords.lastIndex = 0;
    for (const m of text.matchAll(c.keywords)) {
      hits.push({
        kind: "keyword",
        start: m.index,
        end: m.index + m[0].length,
        score: config.keywordWeight ?? 0.8,
        description: `keyword "${m[0].toLowerCase()}"`,
      });
    }
  }
  return hits.sort((a, b) => a.start - b.start);
}

export const customDefinition: GuardDefinition<CustomConfig> = {
  guardType: "custom",
  detect: detectCustom,
  confidence: (hits) => hits.reduce((max, h) => Math.max(max, h.score), 0),
};
