// Shared pieces of the PII detectors.
import type { Hit } from "../types.ts";
import type { SpanSet } from "../spans.ts";

import { PII_KINDS, type PiiKind } from "../kinds.ts";
export { PII_KINDS, type PiiKind };

export interface PiiConfig {
  /** kinds to look for; default all */
  entities?: readonly PiiKind[] | undefined;
  /** ISO 3166 regions whose national phone formats are recognised (numbers with + always are) */
  phoneRegions?: readonly string[] | undefined;
}

/**
 * A detector sees the text and the spans earlier (higher-priority) detectors claimed; it skips a
 * candidate that overlaps one of them (`claimed.overlaps`, a binary search: on a long text the
 * candidates and the claimed spans are both many).
 */
export type PiiDetector = (text: string, claimed: Pick<SpanSet, "overlaps">, config: PiiConfig) => Hit[];

/** Is one of the words (regex source) within `window` characters before `start`? */
export function contextBefore(text: string, start: number, words: RegExp, window = 40): boolean {
  return words.test(text.slice(Math.max(0, start - window), start));
}

/** Runs a global regex over a text and yields the matches (resets lastIndex first). */
export function* scan(re: RegExp, text: string): Generator<RegExpExecArray> {
  re.lastIndex = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m[0].length === 0) re.lastIndex += 1;
    yield m;
  }
}
