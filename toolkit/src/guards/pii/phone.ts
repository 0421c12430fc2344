// Phone numbers: candidates found by a cheap regex, confirmed by libphonenumber-js (full
// metadata: number length and pattern per region and type). International numbers (+ or 00) are
// checked on their own; national formats only against the configured regions, with the trunk
// prefix those regions write. Dates, versions, decimal numbers, thousands-grouped amounts and plain
// digit runs without a phone word nearby are not phone numbers.
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import type { CountryCode } from "libphonenumber-js/max";
import type { Hit } from "../types.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";
import { ownCopy } from "../text.ts";

/**
 * Regions whose national formats are recognised by default: the largest economies and
 * populations across the Americas, Europe, Asia and Oceania that libphonenumber knows well.
 */
export const DEFAULT_PHONE_REGIONS = ["US", "GB", "DE", "FR", "IN", "BR", "JP", "AU", "CA", "ES", "IT", "NL", "MX"] as const;

// Regions where national numbers are written without a leading trunk "0" (NANP, and those with no
// trunk prefix, or one only written with a carrier code as in Brazil); elsewhere a national number
// starts with 0.
const NO_TRUNK_ZERO = new Set([
  "US",
  "CA",
  "BR",
  "MX",
  "PR",
  "DK",
  "NO",
  "ES",
  "IT",
  "PT",
  "GR",
  "PL",
  "CZ",
  "SK",
  "LU",
  "IS",
  "MT",
  "CY",
  "SG",
  "HK",
  "QA",
  "KW",
  "BH",
  "OM",
]);
// Regions without a trunk prefix whose numbers may still start with 0 (Italian landlines: 06 …).
const LEADING_ZERO = new Set(["IT", "SM", "VA"]);
// India writes 10-digit mobiles starting 6-9 without the trunk prefix.
const INDIA_MOBILE = /^[6-9]\d{9}$/;

// A period followed by a space ends a sentence; it never separates the groups of one number
// ("order 1234567. (ref 88120)" is two numbers, not one of 12 digits that libphonenumber would
// then spend ~20 us per region refusing).
const CANDIDATE = /(?<![\w+./:@#-])(?:\+|\b00)?\(?\d(?:[\d \t\u00A0()-]|\.(?![ \t\u00A0])){5,22}\d(?![\w\-/:@]|[.,]\d)/g;
const PHONE_WORDS =
  /\b(?:phone|tel|telephone|mobile|cell|cellphone|call|calling|text|sms|whatsapp|signal|fax|contact|ring|reach|dial|hotline|helpline|landline|telefon|telefono|teléfono|téléphone|numéro|handy|portable)\b/i;
const DATE = /^(?:\d{4}[-./ ]\d{1,2}[-./ ]\d{1,2}|\d{1,2}[-./ ]\d{1,2}[-./ ]\d{2,4})$/;
const THOUSANDS = /^\d{1,3}(?:[ ,.\u00A0]\d{3})+$/;
const DOTTED_VERSION = /^\d+(?:\.\d+){2,}$/;
const NANP_DOTTED = /^[2-9]\d{2}\.[2-9]\d{2}\.\d{4}$/;
// A US ZIP+4 code (90210-1234) and the SSN shape (912-45-3456): no region writes its numbers so,
// and both are valid Spanish numbers.
const ZIP4 = /^(?:\d{5}-\d{4}|\d{3}-\d{2}-\d{4})$/;
// the word before a candidate: a code of letters and digits ("1Z 999 AA1 01 2345 6784") runs on into it
const WORD_BEFORE = /(\S{1,20})[ \t\u00A0]$/;

// Parsing with full metadata costs tens of microseconds, and the same numbers recur (a support
// line, a sales desk): a bounded cache of the verdict per candidate and region (a pure function of
// both) keeps repeats cheap. Map order is insertion order: the oldest entry goes first.
const VALIDATED_MAX = 2048;
const validated = new Map<string, string | null>();

/** The calling code of `raw` if it is a valid number (international, or national in `region`), else null. */
function callingCodeOf(raw: string, region: CountryCode | undefined): string | null {
  const key = region === undefined ? raw : `${region}:${raw}`;
  const hit = validated.get(key);
  if (hit !== undefined) return hit;
  const p = parsePhoneNumberFromString(raw, region);
  const code = p?.isValid() ? p.countryCallingCode : null;
  if (validated.size >= VALIDATED_MAX) validated.delete(validated.keys().next().value!);
  validated.set(ownCopy(key), code); // the key is cut from the text: keep a copy, not the text
  return code;
}

function nationalRegions(digits: string, regions: readonly string[]): string[] {
  if (digits.startsWith("0")) return regions.filter((r) => !NO_TRUNK_ZERO.has(r) || LEADING_ZERO.has(r));
  return regions.filter((r) => NO_TRUNK_ZERO.has(r) || (r === "IN" && INDIA_MOBILE.test(digits)));
}

export const detectPhones: PiiDetector = (text, claimed, config) => {
  if (!/\d(?:\D{0,3}\d){6}/.test(text)) return [];
  const regions = config.phoneRegions ?? DEFAULT_PHONE_REGIONS;
  const hits: Hit[] = [];
  for (const m of scan(CANDIDATE, text)) {
    const raw = m[0].replace(/[ \t\u00A0.(-]+$/, "");
    const start = m.index;
    const end = start + raw.length;
    const digits = raw.replace(/\D/g, "");
    if (digits.length < 7 || digits.length > 15) continue;
    if (claimed.overlaps(start, end)) continue;
    if (DATE.test(raw) || THOUSANDS.test(raw) || ZIP4.test(raw)) continue;
    // a number ends with a group of two or more digits: "0-306-40615-2" is an ISBN
    if (/\D\d$/.test(raw)) continue;
    const before = WORD_BEFORE.exec(text.slice(Math.max(0, start - 21), start))?.[1];
    if (before && /\d/.test(before) && /[A-Za-z]/.test(before)) continue;
    // "2-3-4-5-6-7-8": numbers are written in groups of two or more digits
    if ((raw.match(/(?:^|\D)\d(?=\D|$)/g)?.length ?? 0) >= 3) continue;
    const international = raw.startsWith("+") || raw.startsWith("00");
    // dotted digit groups are a version ("10.2.3.4") unless grouped as NANP numbers are (415.555.2671)
    if (!international && raw.includes(".") && DOTTED_VERSION.test(raw) && !raw.startsWith("0") && !NANP_DOTTED.test(raw)) continue;
    const separated = /[ \t\u00A0().-]/.test(raw);
    const context = contextBefore(text, start, PHONE_WORDS, 30);
    let found: { callingCode: string } | null = null;
    if (international) {
      const code = callingCodeOf(raw.startsWith("00") ? "+" + raw.slice(2).trimStart() : raw, undefined);
      if (code !== null) found = { callingCode: code };
    } else {
      // A national number needs formatting (separators) or a phone word nearby, and at least
      // 9 digits unless a phone word is there: a bare run of digits is an order number or an id.
      if ((!separated && !context) || (digits.length < 9 && !context)) continue;
      for (const region of nationalRegions(digits, regions)) {
        const code = callingCodeOf(raw, region as CountryCode);
        if (code !== null) {
          found = { callingCode: code };
          break;
        }
      }
    }
    if (!found) continue;
    const score = international ? (context ? 0.95 : 0.85) : context ? 0.9 : 0.7;
    // A national number may be valid in several regions; only an international one names its country.
    const where = international ? ` (+${found.callingCode})` : "";
    hits.push({ kind: "phone", start, end, score, description: `phone number${where} ending ${digits.slice(-2)}` });
  }
  return hits;
};
