// US Social Security numbers: AAA-GG-SSSS (or spaced), refusing what the SSA never issues:
// area 000, 666 or 900-999, group 00, serial 0000. Next to words such as "SSN" or "social
// security", nine digits count however they are grouped (078051120, 078.05.1120, 078 051 120);
// without such words only the dashed and spaced AAA-GG-SSSS forms do (a bare run of nine digits is
// an order number as often as an SSN).
import type { Hit } from "../types.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

const DELIMITED = /(?<![\w-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\w-]|\.\d)/g;
// nine digits, each after at most one space, dot or dash (a fixed count: no ways of splitting to try)
// and not nine of a longer run ("4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2" is a card written digit by digit)
const NINE = /(?<![\w.-]|\d[ .])\d(?:[ .-]?\d){8}(?![\w-]|[ .,]\d)/g;
const SSN_WORDS = /\b(?:ssns?|ss ?(?:#|no\b|num(?:ber)?\b)|soc(?:ial|\.)?[ -]?sec(?:urity|\.)?|social|taxpayer|itin|tin)(?![a-z])/i;

/** The SSA's structural rules (randomised assignment since 2011 keeps these). */
export function isValidSsn(area: string, group: string, serial: string): boolean {
  if (area === "000" || area === "666" || area.startsWith("9")) return false;
  return group !== "00" && serial !== "0000";
}

export const detectSsns: PiiDetector = (text, claimed) => {
  // three digits, each after at most one separator: what both forms need (a gate of three digits in a
  // row would leave "SSN 2 1 9 0 9 9 9 9 9" to depend on whether the text holds an "order 123" elsewhere)
  if (!/\d[ .-]?\d[ .-]?\d/.test(text)) return [];
  const hits: Hit[] = [];
  const mine = new SpanSet(); // the spans of hits, for the second scan
  const push = (m: RegExpExecArray, score: number) => {
    const start = m.index;
    const end = start + m[0].length;
    if (claimed.overlaps(start, end) || mine.overlaps(start, end)) return;
    hits.push({ kind: "ssn", start, end, score, description: "US social security number (digits withheld)" });
    mine.add(start, end);
  };
  for (const m of scan(DELIMITED, text)) {
    if (!isValidSsn(m[1]!, m[3]!, m[4]!)) continue;
    const context = contextBefore(text, m.index, SSN_WORDS);
    push(m, context ? 0.95 : m[2] === "-" ? 0.8 : 0.55);
  }
  if (!SSN_WORDS.test(text)) return hits;
  for (const m of scan(NINE, text)) {
    const digits = m[0].replace(/\D/g, "");
    if (isValidSsn(digits.slice(0, 3), digits.slice(3, 5), digits.slice(5)) && contextBefore(text, m.index, SSN_WORDS, 50)) push(m, 0.85);
  }
  return hits;
};
