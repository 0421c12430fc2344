// relevance: does the response address the prompt? Lexical heuristics, no model: the share of the
// prompt's content words (stemmed, with prefix matches for inflections the stemmer misses) that
// the response takes up, refusal detection, and a floor for short direct answers to questions
// ("What is the capital of France?" -> "Paris.") that share no words with the question.
import { anyOf, contentStems, contentStemsOf, round3, words } from "../guards/text.ts";
import type { EvalResult } from "./types.ts";

const REFUSAL = [
  /^\s*(?:i'?m sorry|i am sorry|sorry|i apologi[sz]e|unfortunately)\b[^.!?]{0,100}\b(?:can(?:no|')t|unable|not able|won'?t|will not|not (?:allowed|permitted))\b/i,
  /\b(?:i|we) (?:can(?:no|')t|am unable to|'m unable to|am not able to|'m not able to|won'?t|will not) (?:help|assist|provide|do|comply|answer|share|fulfil+|respond|discuss|give|create|write|generate)\b/i,
  /\bas an ai(?: language model| assistant)?,? i (?:can(?:no|')t|don'?t|do not|am not|'m not)\b/i,
  /\bi(?:'m| am) not (?:allowed|permitted|able) to (?:help|assist|provide|share|discuss|answer)\b/i,
  /\b(?:against|violates?) (?:my|our|the) (?:guidelines|polic(?:y|ies)|content policy|terms)\b/i,
];
const QUESTION = /\?\s*$|^\s*(?:who|what|when|where|which|why|how|is|are|was|were|do|does|did|can|could|should|would|will)\b/i;

// REFUSAL.some((re) => re.test(text)) in one scan (text.ts anyOf)
const ANY_REFUSAL = anyOf(REFUSAL);

export function isRefusal(output: string): boolean {
  return ANY_REFUSAL.test(output.slice(0, 600));
}

/**
 * How many of the prompt's terms the response has, or has a word of five characters or more that
 * starts with the term's first five (an inflection the stemmer missed). Those first five characters
 * are a set, made on the first term that needs them: one look-up per term, not a scan of the
 * response's words per term (quadratic on a long prompt and a long answer).
 */
function coveredTerms(prompt: ReadonlySet<string>, response: ReadonlySet<string>): number {
  let prefixes: Set<string> | null = null;
  let hits = 0;
  for (const term of prompt) {
    if (response.has(term)) hits++;
    else if (term.length >= 5) {
      prefixes ??= new Set([...response].filter((r) => r.length >= 5).map((r) => r.slice(0, 5)));
      if (prefixes.has(term.slice(0, 5))) hits++;
    }
  }
  return hits;
}

export function relevance(input: string, output: string, threshold: number): EvalResult {
  const result = (score: number, details: string): EvalResult => ({
    evalType: "relevance",
    score: round3(score),
    passed: round3(score) >= threshold,
    details,
  });
  if (output.trim() === "") return result(0, "empty response");
  const refusal = isRefusal(output);
  const outTokens = words(output);
  const outWords = outTokens.length;
  if (refusal && outWords < 80) return result(0.1, "response is a refusal");
  const prompt = new Set(contentStems(input));
  if (prompt.size === 0) return result(refusal ? 0.3 : 0.75, "prompt has no content words to compare");
  const response = new Set(contentStemsOf(outTokens));
  const hits = coveredTerms(prompt, response);
  const coverage = hits / prompt.size;
  // covering 40% of the prompt's terms already counts as fully on point
  let score = 0.3 + 0.7 * Math.min(1, coverage / 0.4);
  let details = `response covers ${hits} of ${prompt.size} prompt terms`;
  if (!refusal && QUESTION.test(input) && outWords <= 12 && score < 0.65) {
    score = 0.65;
    details += "; short direct answer to a question";
  }
  if (refusal) {
    score = Math.min(score, 0.3);
    details += "; contains a refusal";
  }
  return result(score, details);
}
