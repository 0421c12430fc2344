// latency (docs/spec.md evals.latency): score 1 at or below target_ms, falling linearly to 0 at max_ms;
// passed when the latency is at or below threshold_ms.
import { round3 } from "../guards/text.ts";
import type { EvalResult } from "./types.ts";

export interface LatencyConfig {
  threshold_ms: number;
  target_ms: number;
  max_ms: number;
}

export function latencyScore(latencyMs: number, c: Pick<LatencyConfig, "target_ms" | "max_ms">): number {
  if (latencyMs <= c.target_ms) return 1;
  if (latencyMs >= c.max_ms) return 0;
  return 1 - (latencyMs - c.target_ms) / (c.max_ms - c.target_ms);
}

export function latency(latencyMs: number, c: LatencyConfig): EvalResult {
  const ms = Math.max(0, latencyMs);
  return {
    evalType: "latency",
    score: round3(latencyScore(ms, c)),
    passed: ms <= c.threshold_ms,
    details: `${Math.round(ms)} ms (target ${c.target_ms} ms, threshold ${c.threshold_ms} ms, max ${c.max_ms} ms)`,
  };
}
