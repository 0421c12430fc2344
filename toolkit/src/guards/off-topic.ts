// The off_topic guard: a prompt is on topic when it mentions a term of one of the allowed topics
// (keywords and phrases, matched on stemmed words so "invoices" meets "invoice"). A prompt with
// content words and no topic term is off topic, the more surely the more it says; greetings and
// thanks (no content words) are not judged. No topics configured: always pass.
import type { GuardDefinition, Hit } from "./types.ts";
import { stem, STOPWORDS, words } from "./text.ts";

export interface Topic {
  name: string;
  /** keywords or phrases (several words) that mark the topic */
  keywords: readonly string[];
}

export interface OffTopicConfig {
  topics?: readonly Topic[] | undefined;
}

interface CompiledTopic {
  name: string;
  single: Set<string>;
  phrases: string[][];
}

const compiled = new WeakMap<readonly Topic[], CompiledTopic[]>();

function compileTopics(topics: readonly Topic[]): CompiledTopic[] {
  let out = compiled.get(topics);
  if (!out) {
    out = topics.map((t) => {
      const single = new Set<string>();
      const phrases: string[][] = [];
      for (const k of t.keywords) {
        const ws = words(k).map(stem);
        if (ws.length === 1) single.add(ws[0]!);
        else if (ws.length > 1) phrases.push(ws);
      }
      return { name: t.name, single, phrases };
    });
    compiled.set(topics, out);
  }
  return out;
}

function containsPhrase(tokens: readonly string[], phrase: readonly string[]): boolean {
  outer: for (let i = 0; i + phrase.length <= tokens.length; i++) {
    for (let k = 0; k < phrase.length; k++) if (tokens[i + k] !== phrase[k]) continue outer;
    return true;
  }
  return false;
}

/** Which topics a text mentions, with the number of distinct terms of each. */
export function topicOverlap(
  text: string,
  topics: readonly Topic[],
  stems: readonly string[] = words(text).map(stem),
): Array<{ name: string; terms: number }> {
  const tokens = stems;
  const tokenSet = new Set(tokens);
  return compileTopics(topics).map((t) => {
    let terms = 0;
    for (const s of t.single) if (tokenSet.has(s)) terms++;
    for (const p of t.phrases) if (containsPhrase(tokens, p)) terms++;
    return { name: t.name, terms };
  });
}

export function detectOffTopic(text: string, config: OffTopicConfig): Hit[] {
  const topics = config.topics ?? [];
  if (topics.length === 0) return [];
  const tokens = words(text);
  const stems = tokens.map(stem);
  const content = stems.filter((s, i) => !STOPWORDS.has(tokens[i]!) && !STOPWORDS.has(s) && !/^\d+$/.test(s) && s.length >= 2);
  if (content.length === 0) return [];
  const overlap = topicOverlap(text, topics, stems);
  const matched = overlap.reduce((n, t) => n + t.terms, 0);
  const names = topics.map((t) => t.name).join(", ");
  // No topic term at all: 0.6 for a couple of words, up to 0.95 for eight content words or more.
  // Some topic terms: on topic; the score falls with each term (0.3, 0.15, 0.1 ...).
  const score = matched === 0 ? 0.6 + 0.35 * Math.min(1, content.length / 8) : 0.3 / matched;
  const description =
    matched === 0
      ? `mentions none of the allowed topics (${names})`
      : `mentions ${matched} term(s) of ${overlap
          .filter((t) => t.terms > 0)
          .map((t) => t.name)
          .join(", ")}`;
  return [{ kind: "off_topic", start: 0, end: text.length, score, description, whole: true }];
}

export const offTopicDefinition: GuardDefinition<OffTopicConfig> = {
  guardType: "off_topic",
  detect: detectOffTopic,
  confidence: (hits) => hits.reduce((max, h) => Math.max(max, h.score), 0),
};
