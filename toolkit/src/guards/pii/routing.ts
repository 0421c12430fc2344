// Bank numbers. US bank routing numbers (ABA routing transit numbers): nine digits whose first two are a Federal
// Reserve routing symbol (00-12 banks, 21-32 thrifts, 61-72 electronic, 80 traveller's cheques) and
// whose checksum holds: 3(d1 + d4 + d7) + 7(d2 + d5 + d8) + (d3 + d6 + d9) is a multiple of 10.
// One run of nine digits in ten passes the checksum and a third of the prefixes are assigned, so an
// order number or an id would pass one time in thirty: a routing number counts only after words
// that name it ("routing number", "ABA", "RTN", "routing transit", "bank transit"). Nine of one
// digit (000000000 passes both checks) is a demo value.
//
// Bank account numbers have no checksum and no common length (6-17 digits in the US, other lengths
// elsewhere): an account number is the digits right after the words that name it ("bank account",
// "checking account number:", "acct #", "account is"), in a text about a bank (the words
// themselves, or "routing", "IBAN", "wire", "deposit", "sort code" … in it), so that a shop's
// "account 0168754245" is not one. One digit repeated is a demo value.
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";

const NINE = /(?<![\w.-])\d{9}(?![\w-]|[.,]\d)/g;
const ROUTING_WORDS = /\b(?:routing|aba|rtn|(?:bank|routing)[ -]transit|transit[ -](?:routing|number|no\b))/i;
const PREFIX = /^(?:0\d|1[0-2]|2[1-9]|3[0-2]|6[1-9]|7[0-2]|80)/;
const ONE_DIGIT = /^(\d)\1*$/;

/** The ABA checksum (weights 3, 7, 1) and an assigned routing symbol. */
export function isRoutingNumber(digits: string): boolean {
  if (digits.length !== 9 || !PREFIX.test(digits) || ONE_DIGIT.test(digits)) return false;
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

// the words, then at most "number", "no.", "#", "is" or ":", then 6-17 digits, grouped by single
// spaces or dashes or not at all. The gaps are bounded (\s{0,3}): unbounded ones side by side would
// share a long run of spaces between them in quadratic time. The pattern starts at "account" or
// "acct", which most texts do not hold, so a scan of one is a fraction of a microsecond; whether a
// bank word comes before it, or anywhere in the text, is asked only of a match.
const ACCOUNT =
  /\b(?:account|acct)\.?(?:\s{0,3}(?:number|num|no\.?|nr\.?|#))?(?:\s{0,3}(?:is|was|:|=))?\s{0,3}#?\s{0,3}(\d(?:[ -]?\d){5,16})(?![\w-]|[.,]\d)/gi;
const BANK_ACCOUNT = /\b(?:bank|checking|savings|current|deposit)\s{1,3}$/i;
const BANK_WORDS = /\b(?:bank(?:ing)?|routing|aba|wire|deposit|iban|swift|bic|sort[ -]code|checking|savings)\b/i;

export const detectBankAccounts: PiiDetector = (text, claimed) => {
  const hits: Hit[] = [];
  let aboutBank: boolean | undefined;
  for (const m of scan(ACCOUNT, text)) {
    const number = m[1]!;
    const end = m.index + m[0].length;
    const start = end - number.length;
    const digits = number.replace(/[ -]/g, "");
    if (claimed.overlaps(start, end) || ONE_DIGIT.test(digits)) continue;
    if (!BANK_ACCOUNT.test(text.slice(Math.max(0, m.index - 16), m.index)) && !(aboutBank ??= BANK_WORDS.test(text))) continue;
    hits.push({ kind: "bank_account", start, end, score: 0.85, description: `bank account number ending ${lastChars(digits, 2)}` });
  }
  return hits;
};
