// Identifiers written with spaces between their digits ("4 1 5 -5 5 5 -0 1 3 2", "0 7 8 -0 5 -1 1 2 0",
// "1 9 2 .1 6 8 .1 .1") or between all their characters ("r c v r y @ e m a i l . c o m"): typed so
// to slip past a filter, or spelt out by a transcript. detectPii
// runs its chain again on a view of the text with those spaces taken out, and keeps what it finds
// there that it had not found already, at the offsets of the text.
//
// A run of digits, spaces, dashes and dots is taken out of its spaces only when it is written digit
// by digit: at least three of its groups are a single digit, two of them side by side with a space
// between, and they are at least half of its groups ("415 555 0132" is written as a number is, and
// is left alone). What the view shows is then judged by the same detectors and their rules
// (checksums, phone metadata, words nearby): a count "1 2 3 4 5" joins into 12345, which no
// detector takes for an identifier.

/** A text with some spaces taken out, and for each of its code units the offset in the text. */
export interface DespacedView {
  text: string;
  /** offsets[i]: where the view's i-th code unit is in the text */
  offsets: Int32Array;
}

// Each repetition consumes a digit, and the separators before it are of one shape each: linear.
// A dot is a separator only with no space after it: "1. 2. 3. 4." is a numbered list, not an address.
const RUN = /(?<![\w.])\d(?:[ \t]{1,2}\d|[ \t]?-[ \t]?\d|[ \t]?\.\d|\d)+/g;
const GROUPS = /[ \t]*[-.][ \t]*|[ \t]+/;

// Two single digits side by side with a space between them ("4 1", "5 -5", "2 .1"): every run
// written digit by digit holds such a pair, so a text without one is not scanned for runs.
const PAIR = /(?<!\d)\d(?:[ \t]{1,2}|[ \t]-[ \t]?|-[ \t]|[ \t]\.)\d(?!\d)/;

/** Whether a run of digits is written digit by digit (see above). */
function digitByDigit(run: string): boolean {
  if (!PAIR.test(run)) return false;
  let groups = 0;
  let singles = 0;
  for (const g of run.split(GROUPS)) {
    groups++;
    if (g.length === 1) singles++;
  }
  return singles >= 3 && singles * 2 >= groups;
}

// Six or more single characters each followed by one space, and a last one (with the punctuation
// after it): a value spelt out character by character ("r c v r y @ e m a i l . c o m", "b c 1 q x
// y 2 k g …"); the word after it is not part of it. Each repetition consumes a character and its
// space: linear.
const SPELT = /(?<!\S)(?:\S ){6,}\S[^\s\w]*(?!\S)/g;

/**
 * The text with the spaces of its digit-by-digit runs, and of its values spelt out character by
 * character with a digit or an "@" among them, taken out; null when it has none.
 */
export function despaceIdentifiers(text: string): DespacedView | null {
  const runs: [number, number][] = [];
  if (PAIR.test(text)) {
    RUN.lastIndex = 0;
    for (let m = RUN.exec(text); m; m = RUN.exec(text)) if (digitByDigit(m[0])) runs.push([m.index, m.index + m[0].length]);
  }
  SPELT.lastIndex = 0;
  for (let m = SPELT.exec(text); m; m = SPELT.exec(text)) if (/[\d@]/.test(m[0])) runs.push([m.index, m.index + m[0].length]);
  if (runs.length === 0) return null;
  runs.sort((a, b) => a[0] - b[0]);
  let view = "";
  const offsets: number[] = [];
  let at = 0;
  for (const [start, end] of runs) {
    const from = Math.max(start, at); // runs of the two kinds may overlap
    view += text.slice(at, from);
    for (let i = at; i < from; i++) offsets.push(i);
    for (let i = from; i < end; i++) {
      const c = text[i]!;
      if (c === " " || c === "\t") continue;
      view += c;
      offsets.push(i);
    }
    at = Math.max(at, end);
  }
  view += text.slice(at);
  for (let i = at; i < text.length; i++) offsets.push(i);
  return { text: view, offsets: Int32Array.from(offsets) };
}
