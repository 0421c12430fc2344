// The guards on long texts full of interacting hits. They run in time linear in the text (the
// bench hack/bench/guards-scaling.ts measures it; tests never assert on time) by looking spans up
// by binary search instead of scanning every hit, quote or claimed span for each one. What these
// tests hold is that the indexed look-ups answer exactly as the scans did: a SpanSet against a scan
// of its spans, obscenity's bisected whitelist against its own, and every detector on a long text
// of adversarial blocks against the same detector on each block alone.
import test from "ava";
import { RegExpMatcher } from "obscenity";
import { caseText, CASES, prng } from "../../../hack/bench/adversarial-texts.ts";
import { detectCustom, detectInjection, detectPii, detectToxicity, GuardEngine } from "../../../toolkit/src/index.ts";
import type { EngineConfigInput, Hit } from "../../../toolkit/src/index.ts";
import { SpanSet } from "../../../toolkit/src/guards/spans.ts";
import { wordMatcher } from "../../../toolkit/src/guards/toxicity.ts";

test("SpanSet answers as a scan of its spans does (nested, touching, empty spans; any order of adding)", (t) => {
  const rand = prng(42);
  const int = (n: number) => Math.floor(rand() * n);
  const wrong: string[] = [];
  let questions = 0;
  for (let round = 0; round < 300; round++) {
    const spans = Array.from({ length: int(40) }, () => {
      const start = int(100);
      return { start, end: start + int(rand() < 0.2 ? 1 : 15) };
    });
    // added one by one in the order drawn (a run per descent), or sorted first (one run)
    const added = new SpanSet();
    for (const s of spans) added.add(s.start, s.end);
    for (const set of [SpanSet.of(spans), added]) {
      for (let q = 0; q < 60; q++, questions++) {
        const start = int(110);
        const end = start + int(12);
        if (set.overlaps(start, end) !== spans.some((s) => s.start < end && start < s.end))
          wrong.push(`overlaps ${start}-${end} in ${JSON.stringify(spans)}`);
        if (set.contains(start, end) !== spans.some((s) => s.start <= start && end <= s.end))
          wrong.push(`contains ${start}-${end} in ${JSON.stringify(spans)}`);
      }
    }
  }
  t.deepEqual(wrong.slice(0, 5), []);
  t.is(questions, 36_000);
});

test("obscenity's whitelist, looked up by bisection, drops exactly the matches its own scan drops", (t) => {
  const { matcher } = wordMatcher();
  // the same matcher with obscenity's own look-up of whitelisted intervals (a scan of them)
  const scanning = Object.create(matcher) as RegExpMatcher;
  const own = (RegExpMatcher.prototype as unknown as Record<string, unknown>)["getWhitelistedIntervals"];
  t.is(typeof own, "function", "obscenity has no getWhitelistedIntervals: toxicity.ts leaves its matcher as it is");
  Object.defineProperty(scanning, "getWhitelistedIntervals", { value: own });
  for (const name of ["whitelisted words beside profanity", "profanity beside groups", "confusable letters"]) {
    const text = caseText(name, 24 * 1024);
    const matches = matcher.getAllMatches(text, true);
    t.true(matches.length > 100, name);
    t.deepEqual(matches, scanning.getAllMatches(text, true), name);
  }
});

// ---------------------------------------------------------------------------------------------
// A long text made of blocks, each one a piece of an adversarial case that stands alone: every
// block asks "What does it mean?" (so the texts-about-words rules, which look at the whole text,
// hold for the text and for each block alike) and ends with a plain line (no adversarial suffix),
// and the blocks are kept apart by a line of dashes longer than any look-behind of a detector.
// Then a detector's hits on the text are its hits on each block, shifted to where the block sits.
// The letter-spaced cases are left out: their hits span the whole text, not a block.

const SEPARATOR = "\n\n" + "-".repeat(48) + "\n\n";
const PIECE = 3000;

function blocks(): string[] {
  const out: string[] = [];
  for (const name of Object.keys(CASES).filter((n) => !n.includes("letter-spaced"))) {
    const text = caseText(name, 8 * PIECE);
    // pieces cut at a space, so that no block starts or ends in the middle of a word
    for (let at = 0; at < text.length;) {
      let end = text.indexOf(" ", at + PIECE);
      if (end < 0) end = text.length;
      out.push(`What does it mean? ${text.slice(at, end)}\n\nThanks.`);
      at = end + 1;
    }
  }
  return out;
}

/** Each block's hits (or matches), shifted by the block's offset in the joined text. */
function piecewise<H extends { start: number; end: number }>(parts: readonly string[], detect: (text: string, i: number) => H[]): H[][] {
  let offset = 0;
  return parts.map((part, i) => {
    const hits = detect(part, i).map((h) => ({ ...h, start: h.start + offset, end: h.end + offset }));
    offset += part.length + SEPARATOR.length;
    return hits;
  });
}

const parts = blocks();
const whole = parts.join(SEPARATOR);

test("a long adversarial text is long and full of hits", (t) => {
  t.true(whole.length > 150_000, `${whole.length} characters`);
  t.true(parts.length > 40, `${parts.length} blocks`);
  t.true(detectToxicity(whole).length > 5000);
  t.true(detectPii(whole).length > 2000);
  t.true(detectInjection(whole).length > 1000);
});

test("PII hits on a long text never overlap: a span one detector claimed, no later one reports", (t) => {
  const overlapping: Hit[] = [];
  let reach = 0; // the furthest end of the hits before, which come sorted by start
  for (const h of detectPii(whole)) {
    if (h.start < reach) overlapping.push(h);
    reach = Math.max(reach, h.end);
  }
  t.deepEqual(overlapping.slice(0, 3), []);
});

test("PII, injection and custom hits on a long text are the hits on each of its blocks", (t) => {
  const custom = {
    patterns: [{ pattern: "\\bPRJ-\\d{4}\\b", name: "project code" }],
    keywords: ["project falcon", "codename"],
  };
  const detectors: Array<[string, (text: string) => Hit[]]> = [
    ["pii_detection", (s) => detectPii(s)],
    ["pii_detection (some kinds)", (s) => detectPii(s, { entities: ["email", "phone", "ip_address", "secret"] })],
    ["prompt_injection", (s) => detectInjection(s)],
    ["custom", (s) => detectCustom(s, custom)],
  ];
  for (const [name, detect] of detectors) t.deepEqual(detect(whole), piecewise(parts, detect).flat(), name);
});

/**
 * Toxicity's hits (or matches) on the whole text, from those on each block: profanity beside a
 * group name gives one hit per text, at the first such mention (the first block's that has one).
 */
function oneAboutGroup<H extends { description: string }>(per: H[][]): H[] {
  const aboutGroup = (h: H) => h.description.startsWith("profanity about a group");
  const first = per.flat().find(aboutGroup);
  return per.flat().filter((h) => !aboutGroup(h) || h === first);
}

test("toxicity hits on a long text are the hits on each of its blocks, with one profanity-about-a-group hit", (t) => {
  for (const categories of [undefined, ["hate", "profanity", "harassment"] as const]) {
    const expected = oneAboutGroup(piecewise(parts, (s) => detectToxicity(s, { categories })));
    t.true(expected.some((h) => h.description.startsWith("profanity about a group")));
    t.deepEqual(detectToxicity(whole, { categories }), expected, String(categories));
  }
});

test("the engine's verdicts on a long text (allowlists applied) are its verdicts on each block", (t) => {
  const config: EngineConfigInput = {
    guards: {
      custom_templates: [
        { template_id: "pii", template_name: "PII", enabled: true },
        { template_id: "tox", template_name: "Toxicity", enabled: true },
        { template_id: "inj", template_name: "Injection", enabled: true },
      ],
    },
    templates: {
      pii: { guardType: "pii_detection", config: { action: "redact", allowlist: ["support@example.com", "/10\\.0\\.\\d+\\.\\d+/"] } },
      tox: { guardType: "toxicity", config: { allowlist: ["shiitake", "/moby \\w+/"] } },
      inj: { guardType: "prompt_injection", config: { allowlist: ["ignore previous instructions"] } },
    },
  };
  const engine = new GuardEngine(config);
  const matches = (text: string) => {
    const d = engine.evaluate(text, "input");
    return new Map(d.verdicts.map((v, i) => [d.evaluations[i]!.source, v.matches]));
  };
  const got = matches(whole);
  const per = parts.map(matches);
  for (const source of ["prompt_injection", "sensitive_data", "template:pii", "template:inj"])
    t.deepEqual(got.get(source), piecewise(parts, (_, i) => per[i]!.get(source)!).flat(), source);
  t.deepEqual(got.get("template:tox"), oneAboutGroup(piecewise(parts, (_, i) => per[i]!.get("template:tox")!)));
});
