// US bank routing numbers (ABA routing transit numbers): nine digits whose first two are a Federal
// Reserve routing symbol (00-12 banks, 21-32 thrifts, 61-72 electronic, 80 traveller's cheques) and
// whose checksum holds: 3(d1 + d4 + d7) + 7(d2 + d5 + d8) + (d3 + d6 + d9) is a multiple of 10.
// One run of nine digits in ten passes the checksum and a third of the prefixes are assigned, so an
// order number or an id would pass one time in thirty: a routing number counts only after words
// that name it ("routing number", "ABA", "RTN", "routing transit", "bank transit").
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";

const NINE = /(?<![\w.-])\d{9}(?![\w-]|[.,]\d)/g;
const ROUTING_WORDS = /\b(?:routing|aba|rtn|(?:bank|routing)[ -]transit|transit[ -](?:routing|number|no\b))/i;
const PREFIX = /^(?:0\d|1[0-2]|2[1-9]|3[0-2]|6[1-9]|7[0-2]|80)/;

/** The ABA checksum (weights 3, 7, 1) and an assigned routing symbol. */
export function isRoutingNumber(digits: string): boolean {
  if (digits.length !== 9 || !PREFIX.test(digits)) return false;
  const d = (i: number) => digits.charCodeAt(i) - 48;
  return (3 * (d(0) + d(3) + d(6)) + 7 * (d(1) + d(4) + d(7)) + (d(2) + d(5) + d(8))) % 10 === 0;
}

export const detectRoutingNumbers: PiiDetector = (text, claimed) => {
  if (!ROUTING_WORDS.test(text)) return [];
  const hits: Hit[] = [];
  for (const m of scan(NINE, text)) {
    const start = m.index;
    const end = start + 9;
    if (claimed.overlaps(start, end) || !isRoutingNumber(m[0]) || !contextBefore(text, start, ROUTING_WORDS, 40)) continue;
    hits.push({ kind: "routing_number", start, end, score: 0.9, description: `bank routing number ending ${lastChars(m[0], 2)}` });
  }
  return hits;
};
