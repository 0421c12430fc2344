// From hits to a verdict: the allowlist, the guard's confidence, and the threshold and action.
import type { CompiledAllowlist } from "./allowlist.ts";
import { applyAllowlist, compileAllowlist } from "./allowlist.ts";
import type { GuardAction, GuardDefinition, GuardMatch, GuardPolicy, GuardResult, GuardType, GuardVerdict, Hit } from "./types.ts";
import { round3 } from "./text.ts";

/** The result for a confidence under a policy: the action at or above the threshold, else pass. */
export function resultFor(confidence: number, policy: GuardPolicy): GuardResult {
  if (confidence <= 0 || confidence < policy.threshold) return "pass";
  return policy.action;
}

/** The public form of hits: kind, span, description (scores stay internal). */
export function toMatches(hits: readonly Hit[]): GuardMatch[] {
  return hits.map(({ kind, start, end, description }) => ({ kind, start, end, description }));
}

export function verdictOf(guardType: GuardType, confidence: number, hits: readonly Hit[], policy: GuardPolicy): GuardVerdict {
  const c = round3(confidence);
  return { guardType, result: resultFor(c, policy), confidence: c, matches: toMatches(hits) };
}

export interface Evaluation {
  verdict: GuardVerdict;
  /** the hits after the allowlist, with their scores (for redaction and descriptions) */
  hits: Hit[];
}

/**
 * Runs one guard on one text: detect, drop allowlisted hits, score, decide. `detected` passes hits
 * already detected with the same definition and config (the engine shares them between checks).
 */
export function evaluateGuard<C>(
  def: GuardDefinition<C>,
  text: string,
  config: C,
  policy: GuardPolicy,
  allowlist: CompiledAllowlist,
  detected?: Hit[],
): Evaluation {
  const hits = applyAllowlist(detected ?? def.detect(text, config), text, allowlist);
  const confidence = hits.length === 0 ? 0 : def.confidence(hits, text, config);
  return { verdict: verdictOf(def.guardType, confidence, hits, policy), hits };
}

/** Options every guard function accepts, next to its own config. */
export interface GuardOptions {
  /** 0-1; default per guard (see DEFAULT_THRESHOLDS) */
  threshold?: number;
  /** default "block" */
  action?: GuardAction;
  /** literals or "/pattern/flags" entries that never trigger */
  allowlist?: readonly string[];
}

/** Builds the public (text, config) -> verdict function of a guard. */
export function guardFunction<C>(def: GuardDefinition<C>, defaults: C & { threshold: number }) {
  return (text: string, options: Partial<C> & GuardOptions = {}): GuardVerdict => {
    const config = { ...defaults, ...options } as C;
    const policy: GuardPolicy = { threshold: options.threshold ?? defaults.threshold, action: options.action ?? "block" };
    return evaluateGuard(def, text, config, policy, compileAllowlist(options.allowlist)).verdict;
  };
}
