// toxicity: threats, self-harm encouragement, hate, insults aimed at someone, slurs block at the
// medium threshold; casual profanity and violent words in ordinary senses do not.
import test from "ava";
import { detectToxicity, toxicityGuard } from "../../toolkit/src/guards/index.ts";
import type { ToxicityCategory } from "../../toolkit/src/guards/index.ts";

const toxic: Array<[string, ToxicityCategory]> = [
  ["I will kill you.", "threat"],
  ["I'm going to find where you live.", "threat"],
  ["I hope you get hit by a bus and die.", "threat"],
  ["Go kill yourself.", "self_harm"],
  ["kys", "self_harm"],
  ["All immigrants are vermin.", "hate"],
  ["People like you should be exterminated.", "hate"],
  ["You are a worthless idiot.", "harassment"],
  ["Fuck you.", "harassment"],
  ["Shut up, you stupid bitch.", "harassment"],
  ["Your mother is a whore.", "harassment"],
  ["get lost you f4ggot", "slur"],
  ["sh1t for brains, you're useless", "harassment"],
];

for (const [text, category] of toxic) {
  test(`toxicity: ${JSON.stringify(text)} blocks as ${category}`, (t) => {
    const v = toxicityGuard(text);
    t.is(v.result, "block", JSON.stringify(v));
    t.true(v.matches.some((m) => m.kind === category), JSON.stringify(v.matches));
  });
}

const clean = [
  "How do I kill a process on Linux?",
  "This bug is killing me.",
  "The Scunthorpe problem.",
  "Grapes and cocktails in Essex.",
  "Shoot me an email.",
  "He graduated cum laude.",
  "Flame retardant foam.",
  "I could murder a burger.",
  "What a shit day.",
  "Damn, great concert!",
  "Dick Grayson was the first Robin.",
  "I hate Mondays.",
  "Stab the pepper with a fork.",
  "Analysis of the assassin's class.",
];

for (const text of clean) {
  test(`toxicity: ${JSON.stringify(text)} passes at medium`, (t) => {
    t.is(toxicityGuard(text).result, "pass", JSON.stringify(toxicityGuard(text)));
  });
}

test("severity orders confidences: sexual term < casual profanity < aimed insult < threat", (t) => {
  const c = (s: string) => toxicityGuard(s).confidence;
  t.true(c("porn laws") < c("what a shit day"));
  t.true(c("what a shit day") < c("you are an idiot"));
  t.true(c("you are an idiot") < c("I will kill you"));
});

test("sensitivity high (0.4) catches casual profanity, low (0.8) only the severe", (t) => {
  t.is(toxicityGuard("what a shit day", { threshold: 0.4 }).result, "block");
  t.is(toxicityGuard("you are an idiot", { threshold: 0.8 }).result, "pass");
  t.is(toxicityGuard("I will kill you", { threshold: 0.8 }).result, "block");
});

test("categories limit what is reported", (t) => {
  t.deepEqual(detectToxicity("I will kill you, idiot", { categories: ["threat"] }).map((h) => h.kind), ["threat"]);
});

test("descriptions never spell the word out", (t) => {
  for (const text of ["you stupid bitch", "get lost you f4ggot", "fuck off"]) {
    for (const m of toxicityGuard(text).matches) {
      t.false(/bitch|f4ggot|fuck/i.test(m.description), m.description);
    }
  }
});

test("allowlist: a term an app needs never triggers", (t) => {
  t.is(toxicityGuard("Hooker is a rugby position. You idiot.", { allowlist: ["you idiot"] }).result, "pass");
});
