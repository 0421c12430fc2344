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
  /** the tokens as a trie of code points, for WordPiece's longest match */
  trie: PieceTrie;
}

/** Code points are below this: a trie edge's key is its node * CODE_POINTS + the code point. */
const CODE_POINTS = 0x110000;

/**
 * The vocabulary's tokens as a trie: node 0 starts a word's first piece, node 1 a continuation
 * ("##" tokens, without the "##"). The longest token that starts at a word's position is the
 * deepest node with an id on the path its characters take: found without building a string, in
 * steps bounded by the longest token (18 code points here), where looking up every candidate
 * substring built some 5,000 strings for each piece of a 100-character word.
 */
export class PieceTrie {
  readonly #edges = new Map<number, number>();
  /** the token id of each node; -1 where no token ends */
  readonly #ids: number[] = [-1, -1];

  add(token: string, id: number): void {
    let node = token.startsWith("##") ? 1 : 0;
    const rest = node === 1 ? token.slice(2) : token;
    if (rest === "") return; // a piece is never empty
    for (const ch of rest) {
      const key = node * CODE_POINTS + ch.codePointAt(0)!;
      let next = this.#edges.get(key);
      if (next === undefined) {
        next = this.#ids.length;
        this.#ids.push(-1);
        this.#edges.set(key, next);
      }
      node = next;
    }
    if (this.#ids[node] === -1) this.#ids[node] = id;
  }

  /**
   * The longest token at `at` in `points` (a word's code points): [its id, where it ends], or
   * undefined when none matches. `continuation`: a piece after the word's first (a "##" token).
   */
  longest(points: readonly number[], at: number, continuation: boolean): [number, number] | undefined {
    let node = continuation ? 1 : 0;
    let found: [number, number] | undefined;
    for (let j = at; j < points.length; j++) {
      const next = this.#edges.get(node * CODE_POINTS + points[j]!);
      if (next === undefined) break;
      node = next;
      const id = this.#ids[node]!;
      if (id !== -1) found = [id, j + 1];
    }
    return found;
  }
}

/** A vocabulary from the text of a vocab.txt (one token per line, its id the line number). */
export function parseVocabulary(text: string): Vocabulary {
  const ids = new Map<string, number>();
  const trie = new PieceTrie();
  text.split("\n").forEach((token, i) => {
    const t = token.replace(/\r$/, "");
    if (t === "" || ids.has(t)) return;
    ids.set(t, i);
    trie.add(t, i);
  });
  const special = (name: string) => {
    const id = ids.get(name);
    if (id === undefined) throw new Error(`the vocabulary has no ${name} token`);
    return id;
  };
  return { ids, cls: special("[CLS]"), sep: special("[SEP]"), unk: special("[UNK]"), trie };
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

/** The word piece ids of one word (one [UNK] when it does not split): greedy longest match. */
function wordPieces(word: string, vocab: Vocabulary, out: number[]): void {
  // most words of prose are one token: their longest match is the whole word
  const whole = vocab.ids.get(word);
  if (whole !== undefined) {
    out.push(whole);
    return;
  }
  const points = Array.from(word, (ch) => ch.codePointAt(0)!);
  if (points.length > MAX_WORD_CHARS) {
    out.push(vocab.unk);
    return;
  }
  const start = out.length;
  for (let i = 0; i < points.length;) {
    const found = vocab.trie.longest(points, i, i > 0);
    if (found === undefined) {
      out.length = start;
      out.push(vocab.unk);
      return;
    }
    out.push(found[0]);
    i = found[1];
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
