// Evals: scores attached to every trace (docs/spec.md part 2, Eval; "complete set of evalType values:
// not shown" -> decided here).

/** The complete set of evalType values. */
export const EVAL_TYPES = ["relevance", "safety", "policy_compliance", "latency"] as const;
export type EvalType = (typeof EVAL_TYPES)[number];

export interface EvalResult {
  evalType: EvalType;
  /** 0-1, higher is better */
  score: number;
  passed: boolean;
  /** what the score rests on, without prompt or response text */
  details: string;
}

/** What an eval sees of a trace. */
export interface TraceForEval {
  input: string;
  output: string;
  latencyMs: number;
  model?: string | undefined;
}
