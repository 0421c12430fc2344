// The audit trail: append-only and tamper-evident. Every entry (prompt, response, guard decision,
// timestamps, workspace, app, traceId) carries
//
//   hash = SHA-256( prev_hash || canonical(content) )        (hex; prev_hash of entry 1 = 64 zeros)
//
// where canonical(content) is JSON with keys sorted at every depth and no whitespace. Sequence
// numbers are 1, 2, 3, ... with no gaps: appends for one app are serialized by an advisory lock
// (LOCK_CLASS.audit), so the chain is linear under concurrent ingestion. The database refuses
// UPDATE, DELETE and TRUNCATE on the table (stores/store-sql.ts) and records the chain's head
// (audit_head) on every append; verification recomputes the chain, checks that it ends at the
// recorded head, and names the first entry that does not fit. Pure: ingestion (ingest/ingest.ts) appends the
// entries, the store reader (reads/reader.ts) reads them for ChainVerifier.
import { hash } from "node:crypto";

export const GENESIS_HASH = "0".repeat(64);

/** What an entry records; its hash covers all of it. */
export interface AuditContent {
  sequence: number;
  traceId: string;
  workspaceId: string;
  appId: string;
  model: string;
  prompt: string;
  response: string;
  /** { blocked, input: { decision, evaluations, blocks }, output: { ... } } */
  guardDecision: unknown;
  /** ISO 8601 with milliseconds: the call's own timestamp */
  calledAt: string;
  /** ISO 8601 with milliseconds: when the API recorded it */
  recordedAt: string;
}

/** JSON with object keys sorted (by UTF-16 code units) at every depth; arrays keep their order. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const s = JSON.stringify(value);
    if (s === undefined) throw new Error(`canonicalJson: ${typeof value} is not JSON`);
    return s;
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

/**
 * canonicalJson(content), with the guard decision given as its canonical JSON: the keys of an
 * entry are fixed, so they are written in their sorted order without sorting (the hot path of
 * ingestion). Equal to canonicalJson(content) by construction; a unit test holds it to that.
 */
export function canonicalContent(c: AuditContent, guardDecisionJson = canonicalJson(c.guardDecision)): string {
  const q = JSON.stringify;
  return (
    `{"appId":${q(c.appId)},"calledAt":${q(c.calledAt)},"guardDecision":${guardDecisionJson},"model":${q(c.model)},"prompt":${q(c.prompt)},` +
    `"recordedAt":${q(c.recordedAt)},"response":${q(c.response)},"sequence":${q(c.sequence)},"traceId":${q(c.traceId)},"workspaceId":${q(c.workspaceId)}}`
  );
}

export function entryHash(prevHash: string, content: AuditContent, guardDecisionJson?: string): string {
  // one-shot hash (no Hash object per entry): a third cheaper than createHash on ~1.5 KB entries
  return hash("sha256", prevHash + canonicalContent(content, guardDecisionJson), "hex");
}

export interface BrokenLink {
  sequence: number;
  /** null when the entry itself is gone (deleted from the end of the chain) */
  traceId: string | null;
  reason: string;
}

/** The chain's recorded head (the store's audit_head): the last entry appended, as the append recorded it. */
export interface ChainHead {
  sequence: number;
  hash: string;
}

export interface ChainVerification {
  valid: boolean;
  entries: number;
  firstBrokenLink: BrokenLink | null;
  /** the last entry's hash: keep it elsewhere to detect a rewrite of the whole chain later */
  headHash: string | null;
}

export interface StoredEntry extends AuditContent {
  prevHash: string;
  hash: string;
}

/**
 * Checks entries in order (pure); call `push` per entry and `result` at the end. Given the chain's
 * recorded head (null: none recorded, an empty chain), it also checks that the chain ends exactly
 * there: entries deleted from the end, an entry beyond the head, or a last entry rewritten with its
 * own hash are broken links too. Without it (undefined) only the links themselves are checked.
 */
export class ChainVerifier {
  readonly #head: ChainHead | undefined;
  #expected = 1;
  #prev = GENESIS_HASH;
  #count = 0;
  #broken: BrokenLink | null = null;

  constructor(head?: ChainHead | null) {
    this.#head = head === null ? { sequence: 0, hash: GENESIS_HASH } : head;
  }

  push(e: StoredEntry): void {
    this.#count++;
    if (this.#broken) return;
    const at = { sequence: e.sequence, traceId: e.traceId };
    if (e.sequence !== this.#expected) {
      this.#broken = {
        ...at,
        reason:
          e.sequence > this.#expected
            ? `entries ${this.#expected}-${e.sequence - 1} are missing`
            : `sequence ${e.sequence} is out of order (expected ${this.#expected})`,
      };
      return;
    }
    if (this.#head && e.sequence > this.#head.sequence) {
      this.#broken = {
        ...at,
        reason: `the entry lies beyond the chain's recorded head (entry ${this.#head.sequence}): it was not appended by the API`,
      };
      return;
    }
    if (e.prevHash !== this.#prev) {
      this.#broken = { ...at, reason: "prev_hash does not match the previous entry's hash" };
      return;
    }
    const { prevHash: _p, hash: _h, ...content } = e;
    if (entryHash(e.prevHash, content) !== e.hash) {
      this.#broken = { ...at, reason: "the entry's content does not match its hash" };
      return;
    }
    if (this.#head && e.sequence === this.#head.sequence && e.hash !== this.#head.hash) {
      this.#broken = { ...at, reason: "the entry's hash is not the chain's recorded head: the last entry was rewritten" };
      return;
    }
    this.#expected++;
    this.#prev = e.hash;
  }

  result(): ChainVerification {
    if (!this.#broken && this.#head && this.#expected <= this.#head.sequence) {
      this.#broken = {
        sequence: this.#expected,
        traceId: null,
        reason: `entries ${this.#expected}-${this.#head.sequence} are missing: the chain's recorded head is entry ${this.#head.sequence}`,
      };
    }
    return {
      valid: this.#broken === null,
      entries: this.#count,
      firstBrokenLink: this.#broken,
      headHash: !this.#broken && this.#count > 0 ? this.#prev : null,
    };
  }
}
