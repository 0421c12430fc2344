// off_topic and custom guards, the regular-expression safety check, and allowlists.
import test from "ava";
import { checkPattern, customGuard, GuardTemplateSpec, offTopicGuard, type CustomPattern } from "../../../toolkit/src/guards/index.ts";
import { maxMatchLength } from "../../../toolkit/src/guards/regex-safety.ts";
import { pick, prng } from "../../../hack/bench/adversarial-texts.ts";

/** Patterns whose matches have a longest, some of it hundreds of characters (a chunk is 256). */
const boundedPatterns: CustomPattern[] = [
  { pattern: "\\bPRJ-\\d{4}\\b" },
  { pattern: "a[ab ]{0,300}b" },
  { pattern: "x[^\\n]{10,40}y", flags: "iu" }, // u: RE2 reads code points, as JavaScript does only with u
  { pattern: "\\bk_[A-Za-z0-9]{4,40}\\b" },
  { pattern: "^ab", flags: "m" },
  { pattern: "(?:ab|ba){3}\\B" },
  { pattern: "\\Bx" },
  { pattern: "é\\w?", flags: "iu" },
];

/** Text in which those patterns match often, across any chunk's edge. */
function randomText(rand: () => number, length: number): string {
  const pieces = ["a", "b", " ", "x", "y", "X", "\n", "PRJ-", "1234", "k_", "Ab9", "é", "É", "😀", "ab", "ba"];
  let s = "";
  while (s.length < length) s += pick(rand, pieces);
  return s;
}

const topics = [
  { name: "billing", keywords: ["invoice", "refund", "payment", "credit card"] },
  { name: "shipping", keywords: ["delivery", "parcel", "tracking number"] },
];

const topical: Array<[string, boolean]> = [
  ["Where is my refund?", false],
  ["My invoices are wrong", false], // stemmed
  ["Can I pay by credit card?", false], // phrase
  ["The parcel has not arrived", false],
  ["hi!", false], // no content words: not judged
  ["thanks, that helped", false],
  ["Write a poem about the sea", true],
  ["Explain quantum entanglement simply", true],
  ["Who won the 2018 World Cup?", true],
];

for (const [text, off] of topical) {
  test(`off_topic: ${JSON.stringify(text)} is ${off ? "off" : "on"} topic`, (t) => {
    t.is(offTopicGuard(text, { topics }).result, off ? "block" : "pass", JSON.stringify(offTopicGuard(text, { topics })));
  });
}

test("off_topic: confidence grows with how much is said without touching a topic", (t) => {
  const short = offTopicGuard("poem please", { topics }).confidence;
  const long = offTopicGuard("write a long poem about the sea, the moon, sailors, storms and lighthouses", { topics }).confidence;
  t.true(long > short);
  t.true(long <= 0.95);
  t.true(offTopicGuard("refund for my delivery", { topics }).confidence < offTopicGuard("refund", { topics }).confidence);
});

test("off_topic: no topics configured -> pass", (t) => {
  t.like(offTopicGuard("Write a poem about the sea"), { result: "pass", confidence: 0, matches: [] });
  t.like(offTopicGuard("Write a poem about the sea", { topics: [] }), { result: "pass", confidence: 0 });
});

test("off_topic: an allowlisted phrase in the text keeps it on topic", (t) => {
  t.is(offTopicGuard("tell me about your opening hours", { topics, allowlist: ["opening hours"] }).result, "pass");
});

test("custom: patterns and keywords, described by name, never by the matched text", (t) => {
  const v = customGuard("ticket PRJ-1234 mentions Project Falcon", {
    patterns: [{ pattern: "PRJ-\\d{4}", name: "project code" }],
    keywords: ["project falcon"],
  });
  t.is(v.result, "block");
  t.is(v.confidence, 0.9);
  t.deepEqual(
    v.matches.map((m) => [m.kind, m.description]),
    [
      ["custom_pattern", 'custom pattern "project code"'],
      ["keyword", 'keyword "project falcon"'],
    ],
  );
  t.false(v.matches.some((m) => m.description.includes("PRJ-1234")));
});

test("custom: keywords match whole words, case-insensitively", (t) => {
  t.is(customGuard("the CAT sat", { keywords: ["cat"] }).result, "block");
  t.is(customGuard("concatenate", { keywords: ["cat"] }).result, "pass");
  t.is(customGuard("c++ rocks", { keywords: ["c++"] }).result, "block");
});

test("custom: weights and threshold decide", (t) => {
  t.is(customGuard("foo", { keywords: ["foo"], keywordWeight: 0.5 }).result, "pass");
  t.is(customGuard("foo", { keywords: ["foo"], keywordWeight: 0.5, threshold: 0.4 }).result, "block");
  t.is(customGuard("foo", { patterns: [{ pattern: "fo+", weight: 0.3 }] }).result, "pass");
});

test("custom: allowlist entries (literal and pattern) never trigger", (t) => {
  const patterns = ["\\b[A-Z]{3}-\\d{4}\\b"];
  t.is(customGuard("see ABC-1234", { patterns }).result, "block");
  t.is(customGuard("see ABC-1234", { patterns, allowlist: ["abc-1234"] }).result, "pass");
  t.is(customGuard("see ABC-1234 and XYZ-9999", { patterns, allowlist: ["/ABC-\\d{4}/"] }).matches.length, 1);
});

// What RE2 cannot run in linear time, and what is not a pattern at all, is refused.
const refused: Array<[string, string]> = [
  ["(a)\\1", "backreferences"],
  ["(?<x>a)\\k<x>", "backreferences"],
  ["(?<=key=)\\w+", "lookahead and lookbehind"],
  ["secret(?!s)", "lookahead and lookbehind"],
  ["x".repeat(257), "longer than"],
  ["(unclosed", "not a valid"],
  ["", "empty"],
];

for (const [pattern, reason] of refused) {
  test(`checkPattern refuses ${JSON.stringify(pattern.slice(0, 20))} (${reason})`, (t) => {
    const r = checkPattern(pattern);
    t.false(r.ok);
    if (!r.ok) t.true(r.reason.includes(reason), r.reason);
  });
}

// Shapes that make a backtracking engine exponential or polynomial are fine here: they run in linear time.
const accepted = [
  "PRJ-\\d{4}",
  "\\b\\d{3}-\\d{2}-\\d{4}\\b",
  "(\\d{3}-)+\\d{4}",
  "(foo|bar|baz)+",
  "(?:acme|globex) internal",
  "[A-Z]{2}\\d{2}[A-Z0-9]{10,30}",
  "^secret: .+$",
  "\\p{Lu}{3}",
  "caf\\u00e9",
  "(?<name>\\w+)@corp",
  "(a+)+$",
  "\\d+()\\d+()\\d+()\\d+()\\d+!",
];

for (const pattern of accepted) {
  test(`checkPattern accepts ${JSON.stringify(pattern)}`, (t) => {
    t.deepEqual(checkPattern(pattern, pattern.includes("\\p") ? "u" : ""), { ok: true });
  });
}

test("catastrophic patterns run in linear time on 1 MiB: a backtracking engine would not return from these", (t) => {
  // (a+)+$ on a^n b, and an empty group between repetitions (the shape that walked around the old
  // static check): exponential for V8's engine on a few dozen characters; here the test returns.
  const ab = `${"a".repeat(1024 * 1024)}b`;
  t.deepEqual(customGuard(ab, { patterns: ["(a+)+$"] }).matches, []);
  const digits = "1".repeat(1024 * 1024);
  t.is(customGuard(digits, { patterns: ["\\d+()\\d+()\\d+()\\d+()\\d+!"] }).result, "pass");
  t.is(customGuard(`${digits}!`, { patterns: ["\\d+()\\d+()\\d+()\\d+()\\d+!"] }).result, "block");
  // the same matches as JavaScript's engine where it does return: indices in UTF-16 code units
  const text = "😀 Café ABC-1234 and xyz-9999, café";
  const ours = customGuard(text, {
    patterns: [
      { pattern: "[a-z]{3}-\\d{4}", flags: "i" },
      { pattern: "caf\\u00e9", flags: "i" },
    ],
  }).matches.map((m) => [m.start, m.end]);
  const v8 = [...text.matchAll(/[a-z]{3}-\d{4}/gi), ...text.matchAll(/caf\u00e9/gi)]
    .map((m) => [m.index, m.index + m[0].length])
    .sort((a, b) => a[0]! - b[0]!);
  t.deepEqual(
    ours.sort((a, b) => a[0]! - b[0]!),
    v8,
  );
});

// A template's patterns are asked as one set (which of them match), then each that matches for
// where, and a search stops when the rest of the text holds no match: the same spans as each
// pattern alone on JavaScript's engine, whatever the flags of the others in the set.
test("custom: a set of patterns finds what each finds alone, with its own flags", (t) => {
  const patterns: CustomPattern[] = [
    { pattern: "abc" },
    { pattern: "ABC", flags: "i" },
    { pattern: "\\Bx" },
    { pattern: "^ab", flags: "m" },
    { pattern: "^ab" },
    { pattern: "a.b", flags: "s" },
    { pattern: "a.b" },
    { pattern: "\\bPRJ-\\d{4}\\b" },
    { pattern: "caf\\u00e9\\b", flags: "iu" },
    { pattern: "x+$" },
  ];
  const texts = [
    "axx", // the second x's \B reads the first x: a search cut at the end of a match without it stops here
    "xx abc ABC aBc",
    "ab\nab xab\na\nb a-b",
    "PRJ-1234 xPRJ-1234 PRJ-12345 PRJ-4321.",
    "😀 CAFÉ café cafés abc😀x",
    "abcabcabc",
    "",
    "no match at all",
  ];
  for (const text of texts) {
    const ours = customGuard(text, { patterns, threshold: 1 }).matches.map((m) => `${m.start}-${m.end}`);
    const v8 = patterns.flatMap((p) =>
      [...text.matchAll(new RegExp(p.pattern, `g${p.flags ?? ""}`))]
        .filter((m) => m[0] !== "")
        .map((m) => `${m.index}-${m.index + m[0].length}`),
    );
    t.deepEqual(ours.sort(), v8.sort(), JSON.stringify(text));
  }
});

// Where a search for positions starts is found by RE2's DFA, a chunk of the text at a time, each
// read with the longest match a pattern can make past it: so that longest must never be short.
test("maxMatchLength: the longest match, in UTF-16 code units, never less than the engine's", (t) => {
  const known: Array<[string, number]> = [
    ["\\bPRJ-\\d{4}\\b", 16],
    ["(ab|cde)?x{2,3}", 12],
    ["[a\\]b]{3}", 6],
    ["\\p{Lu}{3}", 6],
    ["(?<n>ab)|^a??$", 4],
    ["a*", Infinity],
    ["(?:a|bb)+", Infinity],
    ["a{2,}", Infinity],
    ["a{,3}", Infinity], // a literal brace to JavaScript: not read, so Infinity
    ["[]a]", Infinity], // [] is empty to JavaScript, not to RE2
    ["\\Q[\\E*]", Infinity], // RE2 quotes: \[*\], where JavaScript reads Q, then a class
  ];
  for (const [pattern, longest] of known) t.is(maxMatchLength(pattern), longest, pattern);
  const rand = prng(7);
  for (const pattern of boundedPatterns) {
    const longest = maxMatchLength(pattern.pattern);
    t.true(Number.isFinite(longest), pattern.pattern);
    for (let k = 0; k < 20; k++) {
      const text = randomText(rand, 2000);
      for (const m of text.matchAll(new RegExp(pattern.pattern, `g${pattern.flags ?? ""}`)))
        t.true(m[0].length <= longest, pattern.pattern);
    }
  }
});

test("custom: long texts give the same spans as JavaScript's engine, matches across every chunk", (t) => {
  const rand = prng(11);
  const patterns = [...boundedPatterns, { pattern: "x[ab]+y" }, { pattern: "PRJ-\\d+" }];
  for (let k = 0; k < 30; k++) {
    const text = randomText(rand, 1500 + Math.floor(rand() * 3000));
    const ours = customGuard(text, { patterns, threshold: 1 }).matches.map((m) => `${m.start}-${m.end}`);
    const v8 = patterns.flatMap((p) =>
      [...text.matchAll(new RegExp(p.pattern, `g${p.flags ?? ""}`))]
        .filter((m) => m[0] !== "")
        .map((m) => `${m.index}-${m.index + m[0].length}`),
    );
    t.deepEqual(ours.sort(), v8.sort());
  }
});

test("checkPattern refuses flags other than i, m, s, u (g and y are the engine's)", (t) => {
  t.false(checkPattern("abc", "g").ok);
  t.true(checkPattern("abc", "imsu").ok);
});

test("a template with an unsafe pattern, unsafe allowlist entry or no pattern is refused", (t) => {
  const bad = [
    { guardType: "custom", config: { patterns: ["(a)\\1"] } },
    { guardType: "custom", config: { patterns: [{ pattern: "ok", flags: "g" }] } },
    { guardType: "pii_detection", config: { allowlist: ["/(?<=x)y/"] } },
    { guardType: "custom", config: {} },
    { guardType: "custom", config: { keywords: [] } },
  ];
  for (const b of bad) t.false(GuardTemplateSpec.safeParse(b).success, JSON.stringify(b));
});
