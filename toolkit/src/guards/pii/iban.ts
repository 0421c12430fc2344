// IBANs: country code, check digits and BBAN (electronic or grouped by fours), confirmed by
// ibantools (the country's length and format from the IBAN registry, and the ISO 7064 mod-97 check).
import { electronicFormatIBAN, isValidIBAN } from "ibantools";
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";

// Electronic form, or print form in groups of four separated by single spaces (the last group
// shorter). Every repetition starts at a fixed character, so a failing candidate cannot make the
// engine try the ways of splitting a long run into groups.
const CANDIDATE = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?![A-Za-z0-9])/g;

export const detectIbans: PiiDetector = (text, claimed) => {
  if (!/[A-Z]{2}\d{2}/.test(text)) return [];
  const hits: Hit[] = [];
  for (const m of scan(CANDIDATE, text)) {
    const start = m.index;
    // A grouped IBAN may be followed by an unrelated group ("... 19 OK"): drop trailing groups
    // until the rest is valid.
    let raw = m[0];
    while (raw.replace(/ /g, "").length >= 15) {
      const iban = electronicFormatIBAN(raw) ?? "";
      if (isValidIBAN(iban)) {
        const end = start + raw.length;
        if (!claimed.overlaps(start, end)) {
          hits.push({ kind: "iban", start, end, score: 0.95, description: `IBAN (${iban.slice(0, 2)}) ending ${lastChars(iban, 4)}` });
        }
        break;
      }
      const cut = raw.lastIndexOf(" ");
      if (cut < 0) break;
      raw = raw.slice(0, cut);
    }
  }
  return hits;
};
