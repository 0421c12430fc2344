// Identifiers written with spaces between their digits ("4 1 5 -5 5 5 -0 1 3 2", "0 7 8 -0 5 -1 1 2 0",
// "1 9 2 .1 6 8 .1 .1"), between all their characters ("r c v r y @ e m a i l . c o m") or inside an
// address ("j hn.d oe@em ail.c om", "sales @ acme . com"), and the words that name them typed without
// their vowels ("psswrd", "rtng", "ntwrk ky"): typed so to slip past a filter, typed in a hurry, or
// spelt out by a transcript. detectPii runs its chain again on a view of the text with those spaces
// taken out and those words written whole, and keeps what it finds there that it had not found
// already, at the offsets of the text.
//
// A run of digits, spaces, dashes and dots is taken out of its spaces only when it is written digit
// by digit: at least three of its groups are a single digit, two of them side by side with a space
// between, and they are at least half of its groups ("415 555 0132" is written as a number is, and
// is left alone). What the view shows is then judged by the same detectors and their rules
// (checksums, phone metadata, words nearby): a count "1 2 3 4 5" joins into 12345, which no
// detector takes for an identifier.
import { STOPWORDS, wordRewrites } from "../text.ts";

/** A text with some spaces taken out and some words written whole, and for each of its code units the offset in the text. */
export interface IdentifierView {
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

// The words the detectors read beside a value (secrets.ts, routing.ts, ssn.ts, us-ids.ts, ip.ts,
// phone.ts), typed without some or all of their vowels: "psswrd", "passwrd", "rtng", "acct" is
// "account" already. A word is read as one of them only when it is that word with vowels left out,
// never another word ("mail" is not taken for "email": email is not among them, addresses are found
// by their form).
const LABELS = [
  "password",
  "passport",
  "account",
  "routing",
  "address",
  "token",
  "secret",
  "network",
  "login",
  "session",
  "license",
  "licence",
  "driver",
  "social",
  "security",
  "number",
  "phone",
  "bank",
  "checking",
  "savings",
  "deposit",
  "key",
  "pass",
];

/** Every way of writing a word with one or more of its vowels left out (at least two letters left). */
function withoutVowels(word: string): string[] {
  const at = [...word].flatMap((c, i) => ("aeiou".includes(c) ? [i] : []));
  const out: string[] = [];
  for (let mask = 1; mask < 1 << at.length; mask++) {
    const drop = new Set(at.filter((_, k) => mask & (1 << k)));
    const typed = [...word].filter((_, i) => !drop.has(i)).join("");
    if (typed.length >= 2) out.push(typed);
  }
  return out;
}

/** The typed forms of LABELS, as one regex, and the word each one is. */
const typedLabels = wordRewrites(() => {
  const label = new Map<string, string>();
  for (const word of LABELS) for (const typed of withoutVowels(word)) if (!LABELS.includes(typed)) label.set(typed, word);
  return label;
});

// An address with spaces put inside it: the pieces around an "@" (characters of an address, each
// piece at most 64), joined across single spaces. A piece on the left joins when it is short (at
// most two characters, and not a word such as "to" or "my"), holds a dot, comes before an "@"
// standing alone ("sales @ acme . com"), or the piece after it starts with a dot; a piece on the right
// joins while the domain so far does not end in a dot and two letters ("em" + "ail.c" + "om",
// "ac" + "me" + ".com"; "example.com" + "or" stays apart). At most four pieces on each side.
const PIECE = /^[\w.+-]{1,64}$/;
const PIECES = 4;

/** The run [start, end) of the text that a spaced address around the "@" at `at` spans, or null. */
function spacedAddress(text: string, at: number): [number, number] | null {
  // the piece holding the "@"
  let start = at;
  while (start > 0 && /[\w.+-]/.test(text[start - 1]!)) start--;
  let end = at + 1;
  while (end < text.length && /[\w.-]/.test(text[end]!)) end++;
  let joined = false;
  let first = text.slice(start, at); // the leftmost piece so far
  // an "@" with a space on either side ("sales @ acme . com"), not a handle's ("with @somedomain.com")
  const alone = start === at && end === at + 1;
  for (let n = 0; n < PIECES && text[start - 1] === " " && text[start - 2] !== " "; n++) {
    let s = start - 1;
    while (s > 0 && text[s - 1] !== " " && s > start - 66) s--;
    const piece = text.slice(s, start - 1);
    const short = piece.length <= 2 && !STOPWORDS.has(piece.toLowerCase()); // "j", not "to" or "my"
    if (!PIECE.test(piece) || !(short || piece.includes(".") || first.startsWith(".") || (alone && n === 0))) break;
    start = s;
    first = piece;
    joined = true;
  }
  let domain = text.slice(at + 1, end);
  for (let n = 0; n < PIECES && text[end] === " " && text[end + 1] !== " " && !/\.[A-Za-z]{2,}$/.test(domain); n++) {
    let e = end + 1;
    while (e < text.length && text[e] !== " " && e < end + 66) e++;
    // a piece ends before the punctuation that ends a clause
    const piece = text.slice(end + 1, e).replace(/[,;:!?)]+$|(?<=.)\.$/, "");
    if (!/^[\w.-]{1,64}$/.test(piece)) break;
    end = end + 1 + piece.length;
    domain += piece;
    joined = true;
  }
  return joined ? [start, end] : null;
}

/** A change of the view: the text of [start, end) with its spaces taken out, or written as `word`. */
interface Edit {
  start: number;
  end: number;
  word?: string;
}

/**
 * The text with the spaces of its digit-by-digit runs, of its values spelt out character by
 * character with a digit or an "@" among them and of its spaced addresses taken out, and the words
 * that name a value written whole; null when it has none of them.
 */
export function identifierView(text: string): IdentifierView | null {
  const edits: Edit[] = [];
  if (PAIR.test(text)) {
    RUN.lastIndex = 0;
    for (let m = RUN.exec(text); m; m = RUN.exec(text)) if (digitByDigit(m[0])) edits.push({ start: m.index, end: m.index + m[0].length });
  }
  SPELT.lastIndex = 0;
  for (let m = SPELT.exec(text); m; m = SPELT.exec(text))
    if (/[\d@]/.test(m[0])) edits.push({ start: m.index, end: m.index + m[0].length });
  // each "@" looks at most four pieces of at most 66 characters on each side: linear
  for (let at = text.indexOf("@"); at >= 0; at = text.indexOf("@", at + 1)) {
    const run = spacedAddress(text, at);
    if (run) edits.push({ start: run[0], end: run[1] });
  }
  const { re, fix } = typedLabels();
  re.lastIndex = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    edits.push({ start: m.index, end: m.index + m[0].length, word: fix.get(m[0].toLowerCase())! });
  }
  if (edits.length === 0) return null;
  edits.sort((a, b) => a.start - b.start);
  let view = "";
  const offsets: number[] = [];
  let at = 0;
  for (const { start, end, word } of edits) {
    if (word !== undefined) {
      if (start < at) continue; // inside a run already joined
      view += text.slice(at, start);
      for (let i = at; i < start; i++) offsets.push(i);
      view += word;
      for (let i = 0; i < word.length; i++) offsets.push(start + Math.min(i, end - start - 1));
      at = end;
      continue;
    }
    const from = Math.max(start, at); // runs of the kinds may overlap
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
