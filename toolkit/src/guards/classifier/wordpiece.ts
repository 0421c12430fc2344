// The tokenizer of an uncased BERT vocabulary (the classifier's encoder, all-MiniLM-L6-v2), as
// Hugging Face's `tokenizers` defines it for such a model: the BERT normaliser (control
// characters dropped, whitespace made a space, CJK ideographs set apart, accents stripped, lower
// case), the BERT pre-tokeniser (split on whitespace, every punctuation character a word of its
// own) and WordPiece (greedy longest match, "##" for a continuation, [UNK] for a word that does
// not split or has more than 100 characters). Pure; test/unit/toolkit/guard-classifier.test.ts holds it
// to ids the reference implementation produced.

const MAX_WORD_CHARS = 100;

// Characters the normaliser drops: NUL, U+FFFD and other control/format/unassigned characters
// except the three whitespace controls, which become spaces with the other whitespace.
const DROPPED = /[\0\uFFFD]|(?![\t\n\r])\p{C}/gu;
const WHITESPACE = /[\t\n\r\p{Zs}]/gu;
// The CJK Unified Ideographs blocks BERT sets apart (its _is_chinese_char).
const CJK =
  /[\u{4E00}-\u{9FFF}\u{3400}-\u{4DBF}\u{20000}-\u{2A6DF}\u{2A700}-\u{2B73F}\u{2B740}-\u{2B81F}\u{2B820}-\u{2CEAF}\u{F900}-\u{FAFF}\u{2F800}-\u{2FA1F}]/gu;
const MARKS = /\p{Mn}/gu;
// ASCII symbols count as punctuation for BERT, as do Unicode's P categories.
const PUNCTUATION = /([!-/:-@[-`{-~]|\p{P})/u;

export interface Vocabulary {
  ids: ReadonlyMap<string, number>;
  cls: number;
  sep: number;
  unk: number;
}

/** A vocabulary from the text of a vocab.txt (one token per line, its id the line number). */
export function parseVocabulary(text: string): Vocabulary {
  const ids = new Map<string, number>();
  text.split("\n").forEach((token, i) => {
    const t = token.replace(/\r$/, "");
    if (t !== "" && !ids.has(t)) ids.set(t, i);
  });
  const special = (name: string) => {
    const id = ids.get(name);
    if (id === undefined) throw new Error(`the vocabulary has no ${name} token`);
    return id;
  };
  return { ids, cls: special("[CLS]"), sep: special("[SEP]"), unk: special("[UNK]") };
}

/** The BERT normaliser's text (uncased). */
export function normalise(text: string): string {
  return text.replace(DROPPED, "").replace(WHITESPACE, " ").replace(CJK, " $& ").normalize("NFD").replace(MARKS, "").toLowerCase();
}

/** The words of a normalised text: runs between whitespace, with each punctuation character apart. */
export function preTokenise(normalised: string): string[] {
  const words: string[] = [];
  for (const run of normalised.split(/\s+/u)) {
    if (run === "") continue;
    for (const part of run.split(PUNCTUATION)) if (part !== "") words.push(part);
  }
  return words;
}

/** The word piece ids of one word (one [UNK] when it does not split). */
function wordPieces(word: string, vocab: Vocabulary, out: number[]): void {
  const chars = Array.from(word);
  if (chars.length > MAX_WORD_CHARS) {
    out.push(vocab.unk);
    return;
  }
  const start = out.length;
  for (let i = 0; i < chars.length;) {
    let found: number | undefined;
    let end = chars.length;
    for (; end > i; end--) {
      const piece = (i > 0 ? "##" : "") + chars.slice(i, end).join("");
      found = vocab.ids.get(piece);
      if (found !== undefined) break;
    }
    if (found === undefined) {
      out.length = start;
      out.push(vocab.unk);
      return;
    }
    out.push(found);
    i = end;
  }
}

/** The word piece ids of a text, without [CLS] and [SEP]. */
function piecesOf(text: string, vocab: Vocabulary): number[] {
  const pieces: number[] = [];
  for (const word of preTokenise(normalise(text))) wordPieces(word, vocab, pieces);
  return pieces;
}

/** How a text is read in windows: `pieces` word pieces each, one every `stride`, at most `max`. */
export interface Windows {
  pieces: number;
  stride: number;
  max: number;
}

/**
 * Where the windows of a text of `n` pieces start: one at 0 when the text fits one; else one every
 * `stride`, the last ending at the text's end, so that any run of at most `pieces - stride` lies
 * whole inside one of them. At most `max`, spread evenly from the first to the last when there
 * would be more (the middle of a very long text is then read in part). hack/guard-model.py's
 * window_starts is the same rule: the classifier learns the windows it is given.
 */
export function windowStarts(n: number, { pieces: room, stride, max: maxWindows }: Windows): number[] {
  if (n <= room) return [0];
  const starts: number[] = [];
  for (let s = 0; s + room < n; s += Math.max(1, stride)) starts.push(s);
  starts.push(n - room);
  if (starts.length <= maxWindows) return starts;
  if (maxWindows < 2) return [0];
  return Array.from({ length: maxWindows }, (_, k) => starts[Math.round((k * (starts.length - 1)) / (maxWindows - 1))]!);
}

/**
 * The model's inputs for a text: [CLS], word pieces, [SEP], one per window of windowStarts. The
 * classifier scores each and takes the highest: an attack padded with benign text is read with at
 * most a window's worth of text around it.
 */
export function encodeWindows(text: string, vocab: Vocabulary, windows: Windows): number[][] {
  const pieces = piecesOf(text, vocab);
  return windowStarts(pieces.length, windows).map((s) => [vocab.cls, ...pieces.slice(s, s + windows.pieces), vocab.sep]);
}
