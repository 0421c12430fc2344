// IBANs: country code, check digits and BBAN, written electronically (DE89370400440532013000) or
// with any grouping by spaces, dashes or dots (GB29 NWBK 6016 1331 9268 19, GB29-NWBK-…,
// NL91.ABNA.…), in upper or lower case, confirmed by ibantools: the country's length and format
// from the IBAN registry, and the ISO 7064 mod-97 check. A candidate failing the check is nothing.
import { countrySpecs, isValidIBAN } from "ibantools";
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";

// 15-34 letters and digits, each after at most one separator: every repetition starts at a fixed
// character, so there is one way to read a run and a failing candidate costs at most 30 steps back.
const CANDIDATE = /(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?:[ .-]?[A-Za-z0-9]){11,30}(?![A-Za-z0-9])/g;
const SEPARATOR = /[ .-]/;

export const detectIbans: PiiDetector = (text, claimed) => {
  if (!/[A-Za-z]{2}\d{2}/.test(text)) return [];
  const hits: Hit[] = [];
  for (const m of scan(CANDIDATE, text)) {
    const start = m.index;
    // A candidate may run on into the next words ("GB29 NWBK … 19 OK"): drop the trailing pieces
    // one separator at a time until the rest is valid.
    let raw = m[0];
    let found = false;
    // the registry's length for the country: most candidates are no IBAN country's, or too long
    const length = countrySpecs[raw.slice(0, 2).toUpperCase()]?.chars;
    while (length && raw.length >= length) {
      const iban = raw.replace(/[ .-]/g, "").toUpperCase();
      // one case throughout ("de89 3704 …" or "DE89 3704 …"; "Ab12 Cd34" is not an IBAN)
      const cased = raw === raw.toUpperCase() || raw === raw.toLowerCase();
      if (cased && iban.length === length && isValidIBAN(iban)) {
        const end = start + raw.length;
        if (!claimed.overlaps(start, end)) {
          hits.push({ kind: "iban", start, end, score: 0.95, description: `IBAN (${iban.slice(0, 2)}) ending ${lastChars(iban, 4)}` });
        }
        found = true;
        break;
      }
      const cut = Math.max(raw.lastIndexOf(" "), raw.lastIndexOf("-"), raw.lastIndexOf("."));
      if (cut < 0) break;
      raw = raw.slice(0, cut);
    }
    // Nothing valid: an IBAN may start at a later word of the candidate ("ref AB12 GB29 NWBK …"),
    // so the scan resumes after the candidate's first piece, not after the whole candidate.
    if (!found) {
      const next = m[0].slice(1).search(SEPARATOR);
      if (next >= 0) CANDIDATE.lastIndex = start + next + 2;
    }
  }
  return hits;
};
