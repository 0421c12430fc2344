// Output guards on a streamed answer, without buffering the whole answer where the guards allow it.
// Pure: the text of each chunk in, decisions about which chunks may go out (and in what form) out.
//
// Strategy (docs/toolkit.md, "Streams"):
// - passthrough: no guard enforces anything on output (none enabled, or all only flag): every
//   chunk goes out at once.
// - buffer: an output guard judges the text as a whole (off_topic, prompt_injection): nothing goes
//   out before the whole answer is checked.
// - window (the usual case: pii_detection, toxicity, custom, which act on spans): the chunks go out
//   as the text grows, holding back the last `holdback` characters. Each step runs the output
//   guards on a window (the unreleased text plus `lookbehind` characters of context) and releases
//   the chunks that end before the cut, where the cut
//     * lies `holdback` characters before the end of the text received so far,
//     * moves back to the start of any match that spans it (a partial email or card is never
//       released),
//     * moves back out of a token (a run of the characters secrets are made of: a key or a JWT
//       longer than the holdback is held until it is complete),
//     * falls on a chunk boundary (chunks go out whole, with their metadata).
//   When the window's decision redacts, the released chunks go out merged into one chunk whose text
//   is redacted; when it blocks (confirmed on the whole text so far), the stream ends with a
//   GuardBlockedError. At the end, the whole answer is evaluated exactly as a non-streamed call
//   would be (the definitive decision, the one the API records) and the rest is released, redacted,
//   or the stream ends with GuardBlockedError.
// Limits: a block decided only at the end (a whole-text judgement on output, or a confidence that
// grows with the number of findings) comes after text released earlier; a secret longer than the
// holdback that contains whitespace (a PEM private key) can be released in part before it is
// recognised. Use `mode: "buffer"` to hold every answer until it is checked.
import type { GuardDecision, GuardEngine } from "../engine.ts";
import type { GuardMatch } from "../guards/types.ts";

export type StreamStrategy = "passthrough" | "window" | "buffer";

export interface StreamGuardOptions {
  /** characters held back behind the end of the received text; default 64 */
  holdback?: number;
  /** characters of released text re-read as context by each step; default 64 */
  lookbehind?: number;
  /** new characters to wait for between two steps; default 64 */
  step?: number;
  /** longest token held back while waiting for its end; default 2048 */
  maxToken?: number;
  /** "auto" (default): the strategy the engine allows; "buffer": always hold the whole answer */
  mode?: "auto" | "buffer";
}

/** Whole-text judgements: their verdict on a part says little about the whole. */
const WHOLE_TEXT = new Set(["off_topic", "prompt_injection"]);

/** What the engine's output checks allow. */
export function streamStrategy(engine: GuardEngine, mode: "auto" | "buffer" = "auto"): StreamStrategy {
  const enforcing = engine.checks.filter((c) => c.phases.has("output") && c.policy.action !== "flag");
  if (enforcing.length === 0) return "passthrough";
  if (mode === "buffer" || enforcing.some((c) => WHOLE_TEXT.has(c.guardType))) return "buffer";
  return "window";
}

/** Chunks that may go out: the next `count` held chunks, as they are or merged with this text. */
export interface Release {
  count: number;
  /** set when the released text differs from the chunks' text (redacted): merge them into one chunk with this text */
  text?: string;
}

export type StepResult = { kind: "release"; release: Release | undefined } | { kind: "block"; decision: GuardDecision };

/** Characters of the tokens secrets are made of (emails, URLs, keys, JWTs, base64, card and account numbers). */
const TOKEN = /[A-Za-z0-9._%+\-@/=:~]/;
const inToken = (ch: string | undefined) => ch !== undefined && TOKEN.test(ch);

export class StreamGuard {
  readonly strategy: StreamStrategy;
  readonly #engine: GuardEngine;
  readonly #holdback: number;
  readonly #lookbehind: number;
  readonly #step: number;
  readonly #maxToken: number;
  #text = "";
  /** end offset (in #text) of each held chunk, oldest first */
  #ends: number[] = [];
  /** offset up to which the text has been released */
  #released = 0;
  /** text length at the last step */
  #checkedAt = 0;

  constructor(engine: GuardEngine, opts: StreamGuardOptions = {}) {
    this.#engine = engine;
    this.strategy = streamStrategy(engine, opts.mode);
    this.#holdback = Math.max(0, opts.holdback ?? 64);
    this.#lookbehind = Math.max(0, opts.lookbehind ?? 64);
    this.#step = Math.max(1, opts.step ?? 64);
    this.#maxToken = Math.max(this.#holdback, opts.maxToken ?? 2048);
  }

  /** All the text received so far. */
  get text(): string {
    return this.#text;
  }

  /**
   * One more chunk, with its text ("" for a chunk without text). `hold` keeps it (and everything
   * after it) until the end: tool-call chunks, whose arguments are checked as a whole.
   */
  push(text: string, hold = false): StepResult {
    this.#text += text;
    this.#ends.push(hold && this.strategy !== "passthrough" ? Infinity : this.#text.length);
    if (this.strategy === "passthrough") return { kind: "release", release: this.#releaseUpTo(this.#text.length) };
    // buffer; or a held chunk comes next, so nothing could go out before the end
    if (this.strategy === "buffer" || this.#ends[0] === Infinity) return { kind: "release", release: undefined };
    if (this.#text.length - this.#checkedAt < this.#step || this.#text.length - this.#released < this.#holdback + this.#step) {
      return { kind: "release", release: undefined };
    }
    this.#checkedAt = this.#text.length;
    return this.#windowStep();
  }

  /**
   * The end of the stream. `decision` is the definitive output decision (the whole answer, as a
   * non-streamed call evaluates it); returns what is left to release, or the block.
   */
  finish(decision: GuardDecision): StepResult {
    if (decision.decision === "block") return { kind: "block", decision };
    const count = this.#ends.length;
    const from = this.#released;
    const to = this.#text.length;
    this.#ends = [];
    this.#released = to;
    if (count === 0) return { kind: "release", release: undefined };
    const text = decision.decision === "redact" && from < to ? this.#redactRegion(from, to) : undefined;
    return { kind: "release", release: text === undefined ? { count } : { count, text } };
  }

  #windowStep(): StepResult {
    const len = this.#text.length;
    const ws = Math.max(0, this.#released - this.#lookbehind);
    const d = this.#engine.evaluate(this.#text.slice(ws, len), "output");
    if (d.decision === "block") {
      const whole = ws === 0 ? d : this.#engine.evaluate(this.#text, "output");
      if (whole.decision === "block") return { kind: "block", decision: whole };
      // blocked only without its context: release nothing, wait for more text or the end
      return { kind: "release", release: undefined };
    }
    const matches = d.verdicts.flatMap((v) => v.matches);
    const cut = this.#chunkBoundary(this.#cut(len - this.#holdback, matches, ws));
    if (cut <= this.#released) return { kind: "release", release: undefined };
    const from = this.#released;
    const release = this.#releaseUpTo(cut);
    if (!release || d.decision !== "redact") return { kind: "release", release };
    const text = this.#redactRegion(from, this.#released);
    return { kind: "release", release: text === undefined ? release : { ...release, text } };
  }

  /** The cut at or before `target`: outside every match, not inside a token. */
  #cut(target: number, matches: readonly GuardMatch[], offset: number): number {
    let cut = Math.max(this.#released, target);
    for (let moved = true; moved;) {
      moved = false;
      for (const m of matches) {
        const start = m.start + offset;
        const end = m.end + offset;
        if (start < cut && cut < end) {
          cut = start;
          moved = true;
        }
      }
    }
    if (cut <= this.#released || cut >= this.#text.length) return cut;
    if (!inToken(this.#text[cut - 1]) || !inToken(this.#text[cut])) return cut;
    let i = cut - 1;
    while (i > this.#released && inToken(this.#text[i - 1])) i--;
    if (i > this.#released) return i;
    // one token since the last release: a very long one is released anyway
    return this.#text.length - this.#released > this.#maxToken ? cut : this.#released;
  }

  /** The largest chunk end at or before `cut`. */
  #chunkBoundary(cut: number): number {
    let best = this.#released;
    for (const end of this.#ends) {
      if (end > cut) break;
      best = end;
    }
    return best;
  }

  #releaseUpTo(cut: number): Release | undefined {
    const idx = this.#ends.findIndex((end) => end > cut);
    const n = idx === -1 ? this.#ends.length : idx;
    if (n === 0) return undefined;
    this.#released = this.#ends[n - 1]!;
    this.#ends.splice(0, n);
    return { count: n };
  }

  /**
   * The redacted form of text[from, to), read with `lookbehind` characters of context. undefined
   * when nothing in it is redacted.
   */
  #redactRegion(from: number, to: number): string | undefined {
    const ws = Math.max(0, from - this.#lookbehind);
    const prefix = this.#text.slice(ws, from);
    const withContext = this.#engine.evaluate(this.#text.slice(ws, to), "output");
    if (withContext.redactedText === undefined) return undefined;
    if (withContext.redactedText.startsWith(prefix)) {
      const r = withContext.redactedText.slice(prefix.length);
      return r === this.#text.slice(from, to) ? undefined : r;
    }
    // the context itself was redacted (earlier release): read the region alone
    return this.#engine.evaluate(this.#text.slice(from, to), "output").redactedText;
  }
}
