// US identifiers beside the SSN: ITINs (the IRS's individual taxpayer identification numbers:
// 9XX-XX-XXXX with the middle group in 50-65, 70-88, 90-92 or 94-99), and passport and driver's
// licence numbers. The last two have no checksum and their formats vary (passports: 6-10 letters
// and digits with at least 5 digits, as the US's 9 digits, Germany's C01X00T47 or France's
// 12AB34567, or digit groups such as 123 456 789; licences: per state, up to 3 letters and
// 4-14 digits, sometimes dashed), so they count only after the words that name them ("passport no.",
// "Reisepass Nr.", "driver's license number", "DL#").
import type { Hit } from "../types.ts";
import { lastChars } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

const ITIN = /(?<![\w-])9\d{2}([- ]?)(?:5\d|6[0-5]|7\d|8[0-8]|9[0-24-9])\1\d{4}(?![\w-]|\.\d)/g;
const ITIN_WORDS = /\b(?:itin|taxpayer|tax id|tin|w-7|irs)\b/i;
// the id follows its name within a few words ("passport number is", "license no.:")
const PASSPORT =
  /\b(?:passport|passeport|pasaporte|passaporto|reisepass|paspoort)(?:'s)?(?:[ \t]+(?:number|num\.?|nr\.?|no\.?|n°|#|id))?(?:[ \t]+(?:is|was))?[ \t]*[:#=]?[ \t]*([A-Z0-9]{6,10}|\d{2,4}(?:[ -]\d{2,4}){1,3})(?![\w-])/gi;
const LICENCE =
  /\b(?:driver'?s?|driving)[ \t]+licen[cs]e\b(?:[ \t]+(?:number|num|no\.?|#|id))?(?:[ \t]+(?:is|was))?[ \t]*[:#=]?[ \t]*([A-Z]{0,3}\d(?:[\d-]{3,16})\d)(?![\w-])|\bDL[ \t]*(?:#|no\.?|number)(?:[ \t]+(?:is|was))?[ \t]*:?[ \t]*([A-Z]{0,3}\d[\d-]{3,16}\d)(?![\w-])/gi;

export const detectUsIds: PiiDetector = (text, claimed) => {
  if (!/\d\d/.test(text)) return []; // a German passport number has no three digits in a row
  const hits: Hit[] = [];
  const mine = new SpanSet(); // the spans of hits, for the next scans
  const push = (start: number, value: string, kind: string, score: number, description: string) => {
    const end = start + value.length;
    if (claimed.overlaps(start, end) || mine.overlaps(start, end)) return;
    hits.push({ kind, start, end, score, description });
    mine.add(start, end);
  };
  if (text.includes("9")) {
    for (const m of scan(ITIN, text)) {
      const context = contextBefore(text, m.index, ITIN_WORDS);
      // nine bare digits are an ITIN only when named as one
      if (m[1] === "" && !context) continue;
      push(
        m.index,
        m[0],
        "itin",
        context ? 0.95 : m[1] === "-" ? 0.8 : 0.55,
        "US individual taxpayer identification number (digits withheld)",
      );
    }
  }
  if (/pass(?:port|eport|aporte|aporto)|reisepass|paspoort/i.test(text)) {
    for (const m of scan(PASSPORT, text)) {
      const id = m[1]!;
      const digits = id.replace(/\D/g, "").length;
      // at least five digits ("passport photos", "passport renewal"), at most nine in digit groups
      if (digits < 5 || (/[ -]/.test(id) && (digits < 6 || digits > 9))) continue;
      push(m.index + m[0].length - id.length, id, "passport", 0.85, `passport number ending ${lastChars(id, 2)}`);
    }
  }
  if (/licen[cs]e|DL/i.test(text)) {
    for (const m of scan(LICENCE, text)) {
      const id = (m[1] ?? m[2])!;
      if (id.replace(/\D/g, "").length < 5) continue;
      push(m.index + m[0].length - id.length, id, "drivers_license", 0.85, `driver's licence number ending ${lastChars(id, 2)}`);
    }
  }
  return hits;
};
