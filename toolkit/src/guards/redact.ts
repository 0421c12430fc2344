// Redaction: replace matched spans by placeholders, keep everything else byte for byte.
import type { GuardMatch } from "./types.ts";

/** "[REDACTED:CREDIT_CARD]" for kind "credit_card". */
export function placeholder(kind: string): string {
  return `[REDACTED:${kind.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}]`;
}

/**
 * Replaces each matched span with a `[REDACTED:KIND]` placeholder. Overlapping or touching spans
 * merge into one placeholder named after the longest of them. Spans out of range are clamped;
 * empty spans are ignored.
 */
export function redact(text: string, matches: readonly Pick<GuardMatch, "kind" | "start" | "end">[]): string {
  const spans = matches
    .map((m) => ({ kind: m.kind, start: Math.max(0, Math.min(text.length, m.start)), end: Math.max(0, Math.min(text.length, m.end)) }))
    .filter((m) => m.end > m.start)
    .sort((a, b) => a.start - b.start || b.end - a.end);
  let out = "";
  let cursor = 0;
  let i = 0;
  while (i < spans.length) {
    const first = spans[i]!;
    let end = first.end;
    let longest = first;
    let j = i + 1;
    while (j < spans.length && spans[j]!.start < end) {
      const s = spans[j]!;
      if (s.end - s.start > longest.end - longest.start) longest = s;
      end = Math.max(end, s.end);
      j++;
    }
    out += text.slice(cursor, first.start) + placeholder(longest.kind);
    cursor = end;
    i = j;
  }
  return out + text.slice(cursor);
}
