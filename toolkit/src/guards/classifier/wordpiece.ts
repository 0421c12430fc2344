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

/**
 * The model's input ids for a text: [CLS], its word pieces, [SEP]. When there are more pieces than
 * `maxTokens - 2`, the first half and the last half of that many: an override or a suffix sits at
 * one end of a prompt, and the encoder's cost grows with the square of the length.
 */
export function encode(text: string, vocab: Vocabulary, maxTokens = 512): number[] {
  const pieces: number[] = [];
  for (const word of preTokenise(normalise(text))) wordPieces(word, vocab, pieces);
  const room = maxTokens - 2;
  const kept = pieces.length <= room ? pieces : [...pieces.slice(0, room >> 1), ...pieces.slice(pieces.length - (room - (room >> 1)))];
  return [vocab.cls, ...kept, vocab.sep];
}
