// Evals for one trace: relevance, safety, policy_compliance, latency (each can be disabled in
// the config's evals section). Pure: the same trace and config give the same scores.
import type { EngineConfig, EngineConfigInput, GuardDecision, GuardEngine } from "../engine.ts";
import { detectedFor, engineFor } from "../engine.ts";
import { latency } from "./latency.ts";
import { policyCompliance } from "./policy.ts";
import { relevance } from "./relevance.ts";
import { SAFETY_TOXICITY_KEY, scoreSafety } from "./safety.ts";
import type { EvalResult, TraceForEval } from "./types.ts";

export { EVAL_TYPES } from "./types.ts";
export type { EvalResult, EvalType, TraceForEval } from "./types.ts";
export { isRefusal, relevance } from "./relevance.ts";
export { latency, latencyScore } from "./latency.ts";
export { safety } from "./safety.ts";
export { policyCompliance } from "./policy.ts";

/**
 * Scores one trace. `guards` are the decisions already taken on its input and output (the
 * ingestion path has them); missing ones are computed with the same config. The safety eval
 * reuses what the output's decision already detected in the same text with the same settings
 * (the sensitive_data guard's PII hits, a toxicity template's hits) instead of detecting again.
 */
export function runEvals(
  trace: TraceForEval,
  config: EngineConfigInput | EngineConfig | GuardEngine,
  guards: { input?: GuardDecision; output?: GuardDecision } = {},
): EvalResult[] {
  const engine = engineFor(config);
  const evals = engine.config.evals;
  const decided = evals.policy_compliance.enabled
    ? { input: guards.input ?? engine.evaluate(trace.input, "input"), output: guards.output ?? engine.evaluate(trace.output, "output") }
    : null;
  const output = decided?.output ?? guards.output;
  const out: EvalResult[] = [];
  if (evals.relevance.enabled) out.push(relevance(trace.input, trace.output, evals.relevance.threshold));
  if (evals.safety.enabled) {
    const pii = engine.sensitiveData;
    out.push(
      scoreSafety(trace.output, evals.safety.threshold, pii.config, {
        toxicity: detectedFor(output, trace.output, SAFETY_TOXICITY_KEY),
        pii: detectedFor(output, trace.output, pii.key),
      }),
    );
  }
  if (decided) out.push(policyCompliance(decided.input, decided.output));
  if (evals.latency.enabled) out.push(latency(trace.latencyMs, evals.latency));
  return out;
}

/** A trace's evalScore (docs/spec.md trace list item, 0-1): the mean of its eval scores, 1 when none ran. */
export function aggregateEvalScore(results: readonly EvalResult[]): number {
  if (results.length === 0) return 1;
  return Math.round((results.reduce((s, r) => s + r.score, 0) / results.length) * 1000) / 1000;
}
