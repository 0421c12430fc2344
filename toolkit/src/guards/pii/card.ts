// Payment card numbers: 13-19 digits, optionally grouped by spaces or dashes, that pass the Luhn
// check and carry a known issuer prefix (validator's isCreditCard, or the networks named in
// cardBrand at the lengths they issue). A 16-digit number of another issuer range (first digit 2-6,
// RuPay's 81-82, Troy's 9792) that passes Luhn counts when grouped like a card or next to a card
// word. Numbers failing Luhn are not card numbers. A card's security code (CVV, CVC) after its
// name is card data too (PCI DSS's sensitive authentication data), whatever the number beside it.
import { isCreditCard } from "./validators.ts";
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";

const CANDIDATE = /(?<![\w.,-])\d(?:[ -]?\d){12,18}(?![\w]|[.,-]\d)/g;
const CARD_WORDS =
  /\b(?:card|visa|mastercard|amex|credit|debit|cc|pan|payment|pay|maestro|mir|elo|hipercard|dankort|troy|rupay|unionpay|jcb|discover|diners)\b/i;

// the code's name, then 3 or 4 digits ("CVV 789", "cvc: 123", "card security code is 4321")
const SECURITY_CODE =
  /\b(?:cvv2?|cvc2?|cvn|card verification (?:value|code|number)|(?:card )?security code)\b(?:[ \t]+(?:code|number|no\.?|#))?(?:[ \t]+(?:is|was))?[ \t]*[:#=]?[ \t]*(\d{3,4})(?![\w-]|[.,]\d)/gi;

/** The card network from the issuer prefix (IIN), for the description. */
export function cardBrand(digits: string): string {
  // the networks whose prefixes lie inside another's range first
  if (/^220[0-4]/.test(digits)) return "Mir";
  if (/^(?:606282|3841[046]0)/.test(digits)) return "Hipercard";
  if (/^(?:40117[89]|431274|438935|451416|457393|45763[12]|504175|5067|509|627780|636297|636368)/.test(digits)) return "Elo";
  if (/^5019/.test(digits)) return "Dankort";
  if (/^9792/.test(digits)) return "Troy";
  if (/^(?:5018|5020|5038|5893|6304|6759|676[1-3])/.test(digits)) return "Maestro";
  if (/^4/.test(digits)) return "Visa";
  if (/^(?:5[1-5]|2(?:2[2-9][1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720))/.test(digits)) return "Mastercard";
  if (/^3[47]/.test(digits)) return "American Express";
  if (/^(?:6011|65|64[4-9])/.test(digits)) return "Discover";
  if (/^35(?:2[89]|[3-8]\d)/.test(digits)) return "JCB";
  if (/^3(?:0[0-5]|[68])/.test(digits)) return "Diners Club";
  if (/^62/.test(digits)) return "UnionPay";
  if (/^(?:60|652[12]|508|8[12])/.test(digits)) return "RuPay";
  return "Payment";
}

/** The Luhn (mod 10) check of a digit string. */
export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = digits.length - 1, double = false; i >= 0; i--, double = !double) {
    let d = digits.charCodeAt(i) - 48;
    if (double && (d *= 2) > 9) d -= 9;
    sum += d;
  }
  return sum % 10 === 0;
}

// Lengths each network issues beyond what validator's isCreditCard knows (19-digit Visa and
// UnionPay, 14-digit Diners, 13-digit Visa).
const BRAND_LENGTHS: Record<string, readonly number[]> = {
  Visa: [13, 16, 19],
  UnionPay: [16, 17, 18, 19],
  "Diners Club": [14, 16],
  Discover: [16, 19],
  JCB: [16, 17, 18, 19],
  Mir: [16, 17, 18, 19],
  Maestro: [16, 18, 19],
  Elo: [16],
  Hipercard: [16, 19],
  Dankort: [16],
  Troy: [16],
  RuPay: [16],
};

// Issuer ranges of 16-digit cards beyond the named networks: ISO/IEC 7812 major industry
// identifiers 2-6 (banking and financial), RuPay's 81-82 and Troy's 9792.
const ISSUER_16 = /^(?:[2-6]|8[12]|9792)/;

/**
 * A card number: validator's check, or Luhn and a length its network issues; or, when `generic` is
 * allowed, 16 digits of a card issuer range that pass Luhn.
 */
function isCard(digits: string, generic: boolean): boolean {
  if (isCreditCard(digits)) return true;
  if (!luhn(digits)) return false;
  if ((BRAND_LENGTHS[cardBrand(digits)] ?? []).includes(digits.length)) return true;
  return generic && digits.length === 16 && ISSUER_16.test(digits);
}

function plausibleGrouping(raw: string): boolean {
  const seps = raw.match(/[ -]/g);
  if (!seps) return true;
  if (new Set(seps).size > 1) return false; // "4242 4242-4242 4242" is not how cards are written
  const groups = raw.split(/[ -]/).map((g) => g.length);
  // 4-4-4-4(-3), 4-6-5 (Amex), 4-6-4 (Diners), 4-4-4-2, 4-4-5, 4-4-4-4-3
  return groups.slice(0, -1).every((g) => g === 4 || g === 6) && groups[0] === 4;
}

export const detectCards: PiiDetector = (text, claimed) => {
  const hits: Hit[] = [];
  if (/cv[vcn]|verification|security code/i.test(text)) {
    for (const m of scan(SECURITY_CODE, text)) {
      const start = m.index + m[0].length - m[1]!.length;
      const end = start + m[1]!.length;
      if (claimed.overlaps(start, end)) continue;
      hits.push({ kind: "credit_card", start, end, score: 0.85, description: "card security code (digits withheld)" });
    }
  }
  if (!/\d{4}/.test(text)) return hits;
  for (const m of scan(CANDIDATE, text)) {
    const raw = m[0];
    const start = m.index;
    const end = start + raw.length;
    if (claimed.overlaps(start, end) || !plausibleGrouping(raw)) continue;
    const digits = raw.replace(/\D/g, "");
    const context = contextBefore(text, start, CARD_WORDS);
    // a bare run of 16 digits of no named network is an id as often as a card
    if (!isCard(digits, context || /[ -]/.test(raw))) continue;
    const score = context ? 0.97 : 0.92;
    hits.push({ kind: "credit_card", start, end, score, description: `${cardBrand(digits)} card number ending ${lastChars(digits, 4)}` });
  }
  return hits;
};
