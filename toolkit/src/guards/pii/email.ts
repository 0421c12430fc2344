// Email addresses: a linear-time candidate regex, confirmed by validator's isEmail.
import { isEmail } from "./validators.ts";
import type { Hit } from "../types.ts";
import { maskEmail } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";

// The lookbehind makes every candidate start at the beginning of a run of local-part characters,
// so the scan stays linear on long runs without an "@".
const EMAIL =
  /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z0-9-])/g;

export const detectEmails: PiiDetector = (text, claimed) => {
  if (!text.includes("@")) return [];
  const hits: Hit[] = [];
  for (const m of scan(EMAIL, text)) {
    const value = m[0];
    const start = m.index;
    const end = start + value.length;
    if (claimed.overlaps(start, end) || !isEmail(value)) continue;
    hits.push({ kind: "email", start, end, score: 0.9, description: `email address ${maskEmail(value)}` });
  }
  return hits;
};
