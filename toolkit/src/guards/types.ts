// The vocabulary of the guard engine. Every guard is a pure check (text, config) -> verdict
// (docs/design.md §5.11): no I/O, no clock, no randomness.

/** Guard types, as named by the interface (docs/spec.md part 2, guard blocks and guard templates). */
export const GUARD_TYPES = ["pii_detection", "prompt_injection", "toxicity", "off_topic", "custom"] as const;
export type GuardType = (typeof GUARD_TYPES)[number];

/**
 * What a guard concluded about one text. `pass`: nothing at or above the threshold. `flag`: at or
 * above the threshold with action `flag` (recorded, never enforced). `block` / `redact`: at or above
 * the threshold with that action.
 */
export const GUARD_RESULTS = ["pass", "flag", "block", "redact"] as const;
export type GuardResult = (typeof GUARD_RESULTS)[number];

/** What a guard does when its confidence reaches its threshold. */
export const GUARD_ACTIONS = ["block", "redact", "flag"] as const;
export type GuardAction = (typeof GUARD_ACTIONS)[number];

/** Which side of the LLM call a text is. */
export const PHASES = ["input", "output"] as const;
export type Phase = (typeof PHASES)[number];

/**
 * One thing a guard found. `start`/`end` are UTF-16 offsets into the checked text (end exclusive).
 * `description` says what matched without repeating it: a kind and a masked form
 * ("Visa card number ending 4242", "email address j***@e***.com"), never the secret itself.
 */
export interface GuardMatch {
  kind: string;
  start: number;
  end: number;
  description: string;
}

/** A guard's verdict on one text. */
export interface GuardVerdict {
  guardType: GuardType;
  result: GuardResult;
  /** 0-1: how sure the guard is that the text is what it guards against. */
  confidence: number;
  matches: GuardMatch[];
}

/** A match with its own score (0-1); internal to the engine, used to aggregate and to redact. */
export interface Hit extends GuardMatch {
  score: number;
  /**
   * A hit about the text as a whole rather than a span (off-topic). The allowlist suppresses it
   * when any allowlisted entry occurs in the text; redaction ignores it.
   */
  whole?: boolean;
}

/** The policy part of a guard's config: when and how it acts. */
export interface GuardPolicy {
  threshold: number;
  action: GuardAction;
}

/**
 * A guard: a detector of hits and the function that turns the hits (after the allowlist) into
 * one confidence. Both are pure.
 */
export interface GuardDefinition<C> {
  guardType: GuardType;
  detect(text: string, config: C): Hit[];
  confidence(hits: readonly Hit[], text: string, config: C): number;
}
