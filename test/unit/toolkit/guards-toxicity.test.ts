// toxicity: threats, self-harm encouragement, hate, insults aimed at someone, slurs block at the
// medium threshold; casual profanity and violent words in ordinary senses do not.
import test from "ava";
import { detectToxicity, toxicityGuard } from "../../../toolkit/src/guards/index.ts";
import type { ToxicityCategory } from "../../../toolkit/src/guards/index.ts";
import { respell, TOXICITY_GATES, wordMatcher, wordMatches } from "../../../toolkit/src/guards/toxicity.ts";
import { INJECTION_GATES } from "../../../toolkit/src/guards/injection.ts";
import { WordPrefilter } from "../../../toolkit/src/guards/word-prefilter.ts";
import { deLeet, gates, misspellings, REGEXP_OPTIMISED_MAX, wordsRegex } from "../../../toolkit/src/guards/text.ts";
import {
  collapseDuplicatesTransformer,
  englishDataset,
  RegExpMatcher,
  resolveLeetSpeakTransformer,
  skipNonAlphabeticTransformer,
  toAsciiLowerCaseTransformer,
} from "obscenity";

/** One test per text: it blocks, with a match of `category` (`what` names the cases). */
function blocksAs(what: string, cases: ReadonlyArray<readonly [string, ToxicityCategory]>): void {
  for (const [text, category] of cases)
    test(`toxicity${what}: ${JSON.stringify(text)} blocks as ${category}`, (t) => {
      const v = toxicityGuard(text);
      t.is(v.result, "block", JSON.stringify(v));
      t.true(
        v.matches.some((m) => m.kind === category),
        JSON.stringify(v.matches),
      );
    });
}

/** One test per text: it passes at medium. */
function passes(what: string, texts: readonly string[]): void {
  for (const text of texts)
    test(`toxicity${what}: ${JSON.stringify(text)} passes`, (t) => {
      const v = toxicityGuard(text);
      t.is(v.result, "pass", JSON.stringify(v));
    });
}

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

blocksAs("", toxic);

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

passes(" (at medium)", clean);

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
  t.deepEqual(
    detectToxicity("I will kill you, idiot", { categories: ["threat"] }).map((h) => h.kind),
    ["threat"],
  );
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

// The word prefilter (word-prefilter.ts) must never change what obscenity finds: it builds the text
// obscenity's transformers build, and says "no match" only when getAllMatches finds nothing.
test("word prefilter: exact against obscenity on the labelled set and on generated texts", (t) => {
  const { matcher, prefilter } = wordMatcher();
  if (!prefilter) return t.fail("no prefilter: obscenity's compiled terms were not found (another version?)");
  const internals = matcher as unknown as {
    applyTransformers(text: string, set: unknown): [number[], string];
    blacklistMatcherTransformers: unknown;
  };
  let seed = 7;
  const rnd = (n: number) => Math.floor(((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000) * n);
  const alphabet = [
    ..."abcdefghiklnorstuy ABCFGIKSTU 0134567@$!|/(.,'-_\n",
    "Ｆ",
    "ｕ",
    "𝐟",
    "𝐜",
    "ⓚ",
    "ü",
    "ñ",
    "ſ",
    "ß",
    "ı",
    "\u{1F600}",
    "\uD800",
    "\uDC00",
    "\u200B",
  ];
  const words = [
    "fuck",
    "shit",
    "ass",
    "cum laude",
    "analysis",
    "dick",
    "retard",
    "pussy",
    "nigger",
    "bitch",
    "whore",
    "cock",
    "sex",
    "tit",
    "class",
    "assassin",
    "Scunthorpe",
  ];
  const mutate = (w: string) =>
    [...w]
      .map(
        (c) => [c, c, c, c, c.toUpperCase(), c + c, c + c + c, { a: "4", e: "3", i: "1", o: "0", s: "$", t: "7" }[c] ?? c, c + "."][rnd(9)],
      )
      .join("");
  const texts = [
    ...toxic.map(([s]) => s),
    ...clean,
    "",
    "f",
    "ＦＵＣＫ you",
    "fuuuuck",
    "sh1t",
    "b!tch",
    "a$$hole",
    "c0ck",
    "ſhit",
    "pen is mightier",
    "s\u{1F600}hit",
    "\uD800fuck\uDC00",
    ...Array.from({ length: 3000 }, () => Array.from({ length: 1 + rnd(40) }, () => alphabet[rnd(alphabet.length)]).join("")),
    ...Array.from({ length: 3000 }, () =>
      Array.from({ length: 1 + rnd(4) }, () => (rnd(2) ? mutate(words[rnd(words.length)]!) : alphabet[rnd(alphabet.length)])).join(" "),
    ),
  ];
  let maybe = 0;
  for (const text of texts) {
    t.is(prefilter.transform(text), internals.applyTransformers(text, internals.blacklistMatcherTransformers)[1], JSON.stringify(text));
    const found = matcher.getAllMatches(text, true);
    if (prefilter.mayMatch(text)) maybe++;
    else t.deepEqual(found, [], JSON.stringify(text));
    t.deepEqual(wordMatches(text), found, JSON.stringify(text));
  }
  // both answers occur, so the test exercises both paths
  t.true(maybe > 1000 && maybe < texts.length - 1000, `${maybe} of ${texts.length}`);
  t.log(`prefilter "may match" on ${maybe} of ${texts.length} texts`);
});

// The prefilter's fast path covers the English preset's pipeline (stateless transformers, then one
// stateful); any other pipeline takes the general loop, which must be exact too.
test("word prefilter: exact on other transformer pipelines (the general loop)", (t) => {
  const pipelines = [
    [collapseDuplicatesTransformer(), toAsciiLowerCaseTransformer(), skipNonAlphabeticTransformer()],
    [toAsciiLowerCaseTransformer(), collapseDuplicatesTransformer({ defaultThreshold: 2 }), resolveLeetSpeakTransformer()],
    [resolveLeetSpeakTransformer(), toAsciiLowerCaseTransformer()],
  ];
  const texts = [
    "",
    "F.u.c.k you",
    "fuuuuck",
    "sh1t",
    "b!tch",
    "a$$hole",
    "SSSHIT happens",
    "cum laude",
    "s\u{1F600}hit",
    "\uD800fuck\uDC00",
    "ＦＵＣＫ",
    "class assassin",
    "pen is mightier",
  ];
  for (const transformers of pipelines) {
    const matcher = new RegExpMatcher({ ...englishDataset.build(), blacklistMatcherTransformers: transformers });
    const prefilter = WordPrefilter.for(matcher, transformers);
    if (!prefilter) return t.fail("no prefilter");
    const internals = matcher as unknown as {
      applyTransformers(text: string, set: unknown): [number[], string];
      blacklistMatcherTransformers: unknown;
    };
    for (const text of texts) {
      t.is(prefilter.transform(text), internals.applyTransformers(text, internals.blacklistMatcherTransformers)[1], JSON.stringify(text));
      if (!prefilter.mayMatch(text)) t.deepEqual(matcher.getAllMatches(text), [], JSON.stringify(text));
    }
  }
});

// Hate and insults without slurs block; negation, mentions and homographs of the same words pass
// (cases of the evaluation on independent data, docs/guards.md "Accuracy").
const toxicWithoutSlurs: Array<[string, ToxicityCategory]> = [
  ["I hate Muslims.", "hate"],
  ["I really can't stand gay people like you.", "hate"],
  ["I hate you!", "harassment"],
  ["Women are disgusting.", "hate"],
  ["Immigrants are a plague on this country.", "hate"],
  ["I hope your whole family suffers.", "threat"],
  ["You're the dumbest person I've ever met.", "harassment"],
  ["Go back home, you filthy beaner.", "slur"],
];
blocksAs(" (without a slur)", toxicWithoutSlurs);
passes(" (negation, mention, homograph)", [
  "There are chinks in the armour of the argument.",
  "I would never say that women are worthless.",
  "Saying 'women are inferior' is sexist and wrong.",
  "Is it offensive to call someone a 'retard'? I want to explain it to my kids.",
  "Drop dead gorgeous is how I'd describe the dress.",
  "I hate Mondays.",
  "I can't stand people who don't use their indicators.",
  "Muslims celebrate Eid at the end of Ramadan.",
  "Spic and Span is a cleaning brand.",
]);

// Rules from the dev misses of ETHOS (the evaluation's second round): calls for violence against a group,
// wishes of death, threats against a third person, insults fastened to an identity, profanity about
// a group, denial of humanity; each with the ordinary sentence that shares its words.
const round2Toxic: Array<[string, ToxicityCategory]> = [
  ["Kill all the immigrants.", "hate"],
  ["We should destroy islam.", "hate"],
  ["Burn them all.", "threat"],
  ["Send all the refugees to the gas chambers.", "threat"],
  ["Death to all Christians.", "threat"],
  ["I hope she gets hit by a car.", "threat"],
  ["Imma stab him tonight.", "threat"],
  ["Im going to choke you.", "threat"],
  ["Shut it, you mexican bitch.", "hate"],
  ["Get out, stupid chinese people.", "hate"],
  ["Fuck all the feminists.", "hate"],
  ["Refugees aren't people.", "hate"],
  ["Autistics aren’t 100% humans.", "hate"],
  ["Christianity is a cult.", "hate"],
  ["Lesbians are mentally ill.", "hate"],
  ["Trans people should be looked down upon.", "hate"],
  ["I don't like homosexuals.", "hate"],
  ["They came in and now the jews run this shit town.", "hate"],
  ["They will be hunted down like the animals they are.", "hate"],
];
blocksAs(" (violence, dehumanising, insult to a group)", round2Toxic);
passes(" (ordinary sentence with the same words)", [
  "How did the Nazis kill the Jews during the Holocaust?",
  "Tell me about African animals like lions and zebras.",
  "Lab mice and white rats are used in research.",
  "I love fucking chinese food.",
  "Muslims and Christians both give to charity at this time of year.",
  "Refugees aren't always allowed to work.",
  "Islam is a religion of peace.",
  "The zombie process must be killed with SIGKILL.",
  "We need to deport the container to the new cluster.",
  "I hate how immigrants are treated at the border.",
  "I don't like Mondays.",
  "That's a fucking great idea.",
  "Death to the bugs in my code!",
  "I'd never say that refugees are parasites.",
  "Women are equally as strong as men.",
]);

// Rules from the dev misses of ToxiGen and Stormfront (docs/guards.md "Hate without slurs"): a group
// kept from rights or places, told to go back, cast as invaders or a burden, an identity denied,
// a disclaimer ("I'm not racist but") that does not negate what follows; each with the ordinary
// sentence that shares its words.
const hateWithoutSlurs: Array<[string, ToxicityCategory]> = [
  ["Immigrants should not be allowed to vote.", "hate"],
  ["Muslims can't be trusted.", "hate"],
  ["The world would be better without gay people.", "hate"],
  ["I don't think they should be allowed to exist, trans people.", "hate"],
  ["Keep the refugees out of our town.", "hate"],
  ["Go back to your own country!", "hate"],
  ["Immigrants are stealing our jobs.", "hate"],
  ["Hordes of migrants are coming.", "hate"],
  ["Muslims breed like rats.", "hate"],
  ["Asians are trying to take over our country.", "hate"],
  ["Our culture was destroyed by the immigrants.", "hate"],
  ["The mentally ill are a drain on society.", "hate"],
  ["Women should stay in the kitchen.", "hate"],
  ["Lesbians are not real women.", "hate"],
  ["Bisexuality isn't real.", "hate"],
  ["I'm not racist, but mexicans are all dirty.", "hate"],
  ["Arabs are primitive.", "hate"],
  ["Disabled people are not worth saving.", "hate"],
  ["Those race traitors again.", "slur"],
];
blocksAs(" (hate without a slur)", hateWithoutSlurs);
passes(" (ordinary sentence beside hate without a slur)", [
  "Immigrants should be allowed to vote in local elections.",
  "Permanent residents cannot vote in federal elections.",
  "The world would be better without plastic waste.",
  "I want to go back to my home country for the holidays.",
  "Go back to the previous page and try again.",
  "A wave of applications arrived after the announcement.",
  "Who will take over the project when she leaves?",
  "The old town was destroyed by the earthquake.",
  "Caring for the mentally ill is a duty of every society.",
  "Women should be paid the same as men.",
  "It is a myth that immigrants are criminals.",
  "It is a common misconception that native americans are all savages.",
  "Bisexuality is real and bisexual people deserve respect.",
  "Rabbits breed quickly in the spring.",
  "Keep the cat out of the kitchen.",
  "Will AI take our jobs?",
  "A wave of women entered politics in 2018.",
  "Chinese companies want to take over the market.",
  "Refugees are not a threat to society.",
  "Refugees are helpless and need our help.",
  "Gay couples can't marry in many countries.",
  "The Taliban ban women from universities, the report says.",
  "Women should stay at home when they have the flu.",
  "Women smell nice after a shower, says the ad.",
  "The world would be better without them, said the mosquito researcher.",
  "There's no way that trans people can afford this rent.",
]);

// The categories the new user's evaluation named as misses (issue 34): disgust and weariness
// toward a group without a slur, calls to violence against a group in other words (round-ups,
// every one of them, their places of worship), a group said to deserve abuse; each with the
// ordinary or counter-speech sentence that shares its words. Written from the issue's
// descriptions, in our own words.
const namedMisses: Array<[string, ToxicityCategory]> = [
  ["I'm disgusted by all the muslims around here.", "hate"],
  ["I am so sick of immigrants.", "hate"],
  ["So sick of gays like you.", "hate"],
  ["Honestly I'm fed up with these refugees.", "hate"],
  ["I'm tired of women like you.", "hate"],
  ["Muslims disgust me.", "hate"],
  ["All jews make me sick.", "hate"],
  ["We should round up all the jews and shoot them.", "hate"],
  ["Round up the immigrants and get rid of them.", "hate"],
  ["Shoot every refugee at the border.", "hate"],
  ["Let's burn down their mosque.", "hate"],
  ["Women deserve to be beaten.", "hate"],
];
blocksAs(" (the issue's named misses)", namedMisses);
passes(" (ordinary sentence beside the issue's named misses)", [
  "I'm disgusted by how immigrants are treated.",
  "I'm sick of people hating on muslims.",
  "I'm so sick of immigrants being blamed for everything.",
  "I'm tired of waiting for my refund.",
  "I'm not disgusted by gay people, why would I be?",
  "People who hate muslims disgust me.",
  "Round up the totals to the nearest dollar.",
  "The nazis rounded up the jews of Paris in 1942.",
  "They tried to burn down the synagogue last year, the police said.",
  "Every refugee at the border deserves a fair hearing.",
  "No woman deserves to be beaten.",
  "The team deserves to be beaten after that performance.",
  "No women deserve to be beaten.",
  "I'm tired of the chinese food at work.",
  "I'm sick of these people who spam my inbox.",
  "Let's bomb the church scene in the movie script.",
  "Kill every process on the machine.",
]);

// More of the same categories in other words: a wish that a group die, a group too stupid for a
// right, weariness said without "I", and "every <one>" as the subject of a call to kill.
const namedMissesMore: Array<[string, ToxicityCategory]> = [
  ["I wish all the immigrants would drown.", "threat"],
  ["I hope the jews all die.", "threat"],
  ["I'd love to see every jew burn.", "threat"],
  ["Women are too stupid to vote.", "hate"],
  ["Can't stand these illegals anymore.", "hate"],
  ["I'm so done with muslims.", "hate"],
  ["Every immigrant should be shot.", "hate"],
];
blocksAs(" (the issue's named misses, other words)", namedMissesMore);
passes(" (ordinary sentence beside the named misses in other words)", [
  "I wish all the immigrants would get their papers faster.",
  "I hope the refugees all find homes.",
  "I'd love to see every jew in my family at the wedding.",
  "Women are too often paid less than men.",
  "I'm too stupid to understand this tax form.",
  "Can't stand the heat in this office.",
  "I'm so done with this project.",
  "Every immigrant should be given a fair hearing.",
]);

// The forms of a call to violence the last round left passing: arms taken up against a group, a
// group hunted down to the last one, a bullet put in every one of them, a group lined up against
// the wall. A group named as a cuisine is not people ("hunt down the chinese takeout menu").
const namedMissesTail: Array<[string, ToxicityCategory]> = [
  ["We must take up arms against the muslims.", "hate"],
  ["Hunt down every last one of those immigrants.", "hate"],
  ["Let's hunt down the gays.", "hate"],
  ["Someone should put a bullet in every jew.", "hate"],
  ["Line the jews up against the wall.", "hate"],
  ["We should line all the immigrants up and shoot them.", "hate"],
  ["Line up the muslims against the wall.", "hate"],
];
blocksAs(" (calls to violence, the tail)", namedMissesTail);
passes(" (ordinary sentence beside the calls to violence of the tail)", [
  "The nazis hunted down the jews of Europe.",
  "We must take up arms against tyranny.",
  "The police hunt down every last one of the escaped prisoners.",
  "Line the chairs up against the wall.",
  "Put a bullet in every paragraph of the summary.",
  "They lined the jews up against the wall and shot them, the survivor testified.",
  "Line up the refugees at the gate for processing.",
  "Let's hunt down the chinese takeout menu.",
  "I want to hunt down every chinese recipe my grandmother wrote.",
]);

// Abuse of a person without "you" (issue 34, the dev misses of a public social-media source): an
// insult coined for a person or a side ("libtards", "fuckwads", "scumbag"), profanity aimed at a
// named person or at them ("fuck Zuckerberg", "fuck em"), its acronyms ("FJB", "GFY"), a crowd
// called names ("what a bunch of morons"), an insult noun after an insulting adjective ("ignorant
// morons"), and wishes of harm that name no weapon ("get sick and die", "may you rot in hell").
const abuseWithoutYou: Array<[string, ToxicityCategory]> = [
  ["Typical libtard logic, as usual.", "harassment"],
  ["The trumptards will never admit it.", "harassment"],
  ["These fuckwads need to be voted out.", "harassment"],
  ["He is a lying scumbag and everyone knows it.", "harassment"],
  ["Look at this dickhead on the news again.", "harassment"],
  ["Fuck Zuckerberg and his whole company.", "harassment"],
  ["Fuck Mark Zuckerberg.", "harassment"],
  ["The moderators banned me again. Fuck em.", "harassment"],
  ["Honestly, fuck them all.", "harassment"],
  ["Worst president ever. FJB!", "harassment"],
  ["GFY, nobody asked for your opinion.", "harassment"],
  ["What a bunch of morons.", "harassment"],
  ["A bunch of spineless cowards run this town council.", "harassment"],
  ["Back to your basements, ignorant morons.", "harassment"],
  ["Take your opinion and shove it up your ass.", "harassment"],
  ["Shut your pie hole.", "harassment"],
  ["Don't bother with a doctor, just get sick and die.", "threat"],
  ["May you rot in hell with the rest of them.", "threat"],
];
blocksAs(" (abuse without you)", abuseWithoutYou);
passes(" (ordinary sentence beside abuse without you)", [
  "Fuck it, let's ship on Friday.",
  "Fuck yeah, the build passed!",
  "Fuck me, that was close.",
  "fuck cancer, my mum beat it twice.",
  "Fuck this traffic.",
  "What a bunch of flowers you brought!",
  "A bunch of students ran the town council meeting.",
  "Put it back in the basement, next to the ignorant mistakes of my youth.",
  "May you rest in peace.",
  "May you find what you are looking for.",
  "He got sick and died last winter.",
  "Shut your laptop before the meeting starts.",
  "Is it offensive to call someone a 'libtard'?",
  "Many people get sick and die from malaria every year.",
  "Sinners will burn in hell, the preacher said.",
]);

// The same abuse in plural, masked or tagged forms: "you idiots", "these dumbasses", "the rest of
// the morons", "a-hole", "a$$ hat", "#fuckzuckerberg", "the dumbest woman alive".
const abuseWithoutYouMore: Array<[string, ToxicityCategory]> = [
  ["Read the manual, you idiots.", "harassment"],
  ["I can't believe these dumbasses got elected.", "harassment"],
  ["People like you make it worse for the rest of the morons.", "harassment"],
  ["He is such an a-hole to the waiters.", "harassment"],
  ["What an a$$ hat that guy is.", "harassment"],
  ["Great speech tonight #fuckzuckerberg #freespeech", "harassment"],
  ["She is the dumbest woman in the world.", "harassment"],
  ["Ugliest family on television!", "harassment"],
];
blocksAs(" (abuse without you, plural, masked or tagged)", abuseWithoutYouMore);
passes(" (ordinary sentence beside abuse in plural, masked or tagged forms)", [
  "The idiots guide to sourdough is a good book.",
  "These doughnuts got eaten before the meeting.",
  "The rest of the morning is free.",
  "Raise money for research #fuckcancer",
  "That was the dumbest question I asked all week.",
  "The family on television ate dinner together.",
]);

// An insult said of someone rather than to them: "<Name> is an idiot", "he is worthless", "what a
// giant orange asshole", "shut the f--- up", and "fuck" before a name in capitals ("fuck JOE").
const insultOfSomeone: Array<[string, ToxicityCategory]> = [
  ["Honestly, Maher is an idiot.", "harassment"],
  ["He is such a complete moron.", "harassment"],
  ["She's a total loser and everyone knows it.", "harassment"],
  ["They are idiots, all of them.", "harassment"],
  ["He is worthless and should resign.", "harassment"],
  ["What a giant orange asshole.", "harassment"],
  ["What a fucking airhead this is!", "harassment"],
  ["She should shut the f---- up.", "harassment"],
  ["Everyone says fuck JOE already.", "harassment"],
];
blocksAs(" (an insult said of someone)", insultOfSomeone);
passes(" (ordinary sentence beside an insult said of someone)", [
  "This is an idiot-proof design.",
  "This is such a loser move by the league.",
  "It is worthless to argue about tabs and spaces.",
  "The Idiot is a novel by Dostoevsky.",
  "What a giant orange pumpkin.",
  "What a fantastic airhead costume this is!",
  "Please shut the fridge door.",
  "Fuck It All was the name of the band.",
  "FUCK TRAFFIC, I'M LATE AGAIN.",
  "That is pathetic weather for July.",
]);

// "would" before a verb of a call: a call or a wish when I or we say it, a report of what others
// used to do when it follows them ("the soldiers would round up the jews").
blocksAs(" (would, said by I or we)", [
  ["I would kill all the muslims.", "hate"],
  ["We would round up the immigrants and deport them.", "hate"],
  ["We would line the jews up against the wall.", "hate"],
]);
passes(" (would, a report of what others did)", [
  "The soldiers would line the jews up against the wall, the survivor recalled.",
  "Every week the regime would round up the jews of the town.",
  "The guards would burn the synagogues first, historians write.",
]);

// A negation in a clause of its own before a comma does not negate what follows it: prefixing "not
// gonna lie," or "I don't care what you think," to a statement of hate must not get it through.
// A negation that governs the statement still does, across commas, when "that" or a verb of saying
// or thinking follows the last comma ("it is not true, contrary to belief, that …").
blocksAs(" (a negation before a comma, not over the statement)", [
  ["Not gonna lie, gays should die.", "hate"],
  ["Not joking, all immigrants are vermin.", "hate"],
  ["I don't care what you think, muslims must die.", "hate"],
  ["Don't get me wrong, women are inferior.", "hate"],
]);
passes(" (a negation over the statement, across commas)", [
  "It is not true, contrary to popular belief, that immigrants are criminals.",
  "Nobody thinks, honestly, that women are inferior.",
  "I would never, ever say women are worthless.",
  "I don't think, and never did, that muslims are terrorists.",
]);

// Insults and name-calling are negated as statements of hate are: "I don't think he is an idiot"
// says the opposite; a negated preamble before a comma does not ("not gonna lie, he is an idiot").
passes(" (a negated insult)", [
  "I don't think he is an idiot.",
  "I never said Maher is an idiot.",
  "Nobody thinks they are idiots.",
  "Don't call them a bunch of morons.",
  "I don't think you are an idiot.",
]);
blocksAs(" (an insult after a negated preamble)", [
  ["Not gonna lie, he is an idiot.", "harassment"],
  ["I don't care, you are an idiot.", "harassment"],
  ["No offence, but they are a bunch of morons.", "harassment"],
  // an insult coined as one is not negated by a "not" about something else
  ["One more reason not to vote for these libtards.", "harassment"],
]);

// Abuse in a discussion between editors (the Wikipedia talk-page comments of the evaluation set):
// insults a list did not hold ("douche", "jerk", "dickwad"), told apart from the same words in
// other senses ("you jerk the wheel", "a vaginal douche"), and idioms of abuse.
blocksAs(" (abuse between editors)", [
  ["you're a douche... it is not a slang guide", "harassment"],
  ["You are such a jerk.", "harassment"],
  ["Honestly, you are a dick and everyone knows it.", "harassment"],
  ["Quit being a jerk.", "harassment"],
  ["Stop being such an asshole about the edits.", "harassment"],
  ["the dickwad Sajuro is being unreasonable", "harassment"],
  ["Wikipedia's liberal d-bags like yourself", "harassment"],
  ["save that in ur database douche bag", "harassment"],
  ["you are a big poo poo face", "harassment"],
  ["Bothie is a fucker.", "harassment"],
  ["He is a jerk.", "harassment"],
  ["NeilN needs to extract his head from his arse.", "harassment"],
  ["Pull your head out of your ass and read the policy.", "harassment"],
  ["A truly nasty piece of work and many people agree with me", "harassment"],
]);
passes(" (the same words, not abuse)", [
  "If you jerk the wheel on ice, the car will spin.",
  "Did you prick your finger on the rose?",
  "You are a Dick Francis fan, I take it.",
  "Doctors advise against using a vaginal douche.",
  "Stop being a stranger and visit us.",
  "The wind is a jerk today.",
  "Nasty piece of work, this bug: it took a week to find.",
  "To beat even Hinduism, there would need to be more than a million Pagans in the US.",
]);

// Spelling that hides a word from the patterns (HateCheck's spelling variations): look-alike digits
// and symbols ("k1ll all the j3ws") and letters spaced out ("m u s l i m s are vermin") are read
// again undone, as the injection detector reads them. A negation still negates, and digits in
// ordinary words or beside them change nothing.
blocksAs(" (leetspeak)", [
  ["all mu$lims are v3rmin", "hate"],
  ["g4ys should d1e", "hate"],
  ["k1ll all the j3ws", "hate"],
  ["w0men are inf3rior", "hate"],
  ["1mmigrants are p4rasites", "hate"],
  ["i w1ll k1ll y0u", "threat"],
  ["you are a w0rthless 1diot", "harassment"],
]);
blocksAs(" (letter-spaced)", [
  ["m u s l i m s are vermin", "hate"],
  ["i will k i l l you", "threat"],
]);
passes(" (digits and spaced letters, not obfuscation of abuse)", [
  "Gr8 w0rk team, k1ll1ng it!",
  "The 3 immigrants on the team won 1st prize.",
  "Email w0men.in.tech@example.org for the meetup.",
  "I would never say w0men are inf3rior.",
  "I would never say w o m e n are inferior.",
  "p l e a s e  h e l p  m e",
]);

// An e-mail address's @ is no letter: undoing it sent the sentence of every address through the
// patterns a second time (and the injection detector's deep signals), for nothing.
test("deLeet: the @ of an e-mail address is left alone, the @ of a word is undone", (t) => {
  t.is(deLeet("write to jane.doe@example.com today"), null);
  t.is(deLeet("muslims are @nimals"), "muslims are animals");
  t.is(deLeet("mail w0men.in.tech@example.org"), "mail women.in.tech@example.org");
});

// Hate phrased as a question, an aside or a rhetorical "isn't it obvious", and a group banned or
// held good for one thing; and counter-speech that names the statement to condemn it ("saying
// that women are stupid is sexist"), which must pass.
blocksAs(" (hate in other phrasings)", [
  ["Why are women so stupid?", "hate"],
  ["Why are muslims so violent?", "hate"],
  ["All muslims should be banned from this country.", "hate"],
  ["Women are only good for cooking.", "hate"],
  ["Isn't it obvious that black people are inferior?", "hate"],
  ["Those immigrants are nothing more than animals.", "hate"],
  ["Saying that women are stupid is not sexist, it is a fact.", "hate"],
]);
passes(" (counter-speech and ordinary phrasings)", [
  "Why are immigrants so often blamed for crime?",
  "Saying that women are stupid is sexist.",
  "The claim that immigrants are criminals is false.",
  "To say gays are disgusting is homophobic and wrong.",
  "It isn't true that women are inferior.",
  "Isn't it wrong to say that women are inferior?",
  "Smoking should be banned from restaurants.",
  "Gay people should not be banned from adopting.",
]);

// More of HateCheck's categories in sentences we wrote: a threat to every member of a group, hatred
// said with an adverb or with "like you" between, a group told it has no place, called a waste of
// space or the scum of the earth; beside them, the same words in ordinary or supportive sentences.
blocksAs(" (hate toward a group, more forms)", [
  ["I'm going to hurt every immigrant I see.", "hate"],
  ["We will torture all the jews.", "hate"],
  ["I absolutely despise disabled people.", "hate"],
  ["Gay people like you disgust me.", "hate"],
  ["Immigrants are the scum of the earth.", "hate"],
  ["Women are a waste of space.", "hate"],
  ["Muslims have no place in civilised society.", "hate"],
]);
passes(" (the same words, no hate)", [
  "Immigrants are the backbone of our economy.",
  "Women are the majority of nurses.",
  "I absolutely love disabled athletes.",
  "People like you inspire me.",
  "Hate has no place in our society.",
  "This law is designed to hurt immigrants, and we will fight it.",
  "We need to stop people who hurt immigrants.",
  "Muslims have no place to pray at the airport, so we built one.",
]);

// A group named in one sentence and attacked by pronoun in the next (HateCheck's references to a
// group by pronoun); without a group before it, the pronoun is anything ("These shoes hurt. I hate
// them.").
blocksAs(" (a group attacked by pronoun)", [
  ["Muslims? I can't stand them.", "hate"],
  ["Immigrants keep arriving every day. They are parasites.", "hate"],
  ["I met a lot of trans people at work. I hate them.", "hate"],
  ["Gays should stay away from my kids. They're disgusting.", "hate"],
]);
passes(" (a pronoun after no group, or not an attack)", [
  "My neighbours are immigrants. They are lovely.",
  "Muslims are often stereotyped. They are not terrorists.",
  "The flights were late again. They are useless.",
  "I love my gay friends. I could never hate them.",
  "These shoes hurt. I hate them.",
]);

// A slur or an insult named as a word, or reported as said to the speaker, is mentioned, not used
// (HateCheck's counter-speech and reported abuse): it counts as a quoted one does. Said to "you",
// or named to be fastened to "you", it is used.
passes(" (a word mentioned or reported, not used)", [
  "Using the word faggot is homophobic.",
  "He called me a kike and I reported him.",
  "If you call someone a retard you should apologise.",
  "The slur dyke was used against her for years.",
]);
blocksAs(" (the same words used)", [
  ["I will call you a retard until you cry.", "slur"],
  ["The word kike fits you.", "slur"],
  ["You faggot, that is the word for you.", "slur"],
]);

// Still more of hate toward a group, in sentences we wrote: treated as property, locked up, a
// conspiracy, wished away, a potential criminal each, bringing only crime, support for Hitler and
// denial of the Holocaust; beside each, an ordinary sentence with its words.
blocksAs(" (hate toward a group, still more forms)", [
  ["Women should be treated like property.", "hate"],
  ["All immigrants should be locked up.", "hate"],
  ["Black lives don't matter.", "hate"],
  ["Jews control the media and the banks.", "hate"],
  ["The world would be better off if there were no more trans people.", "hate"],
  ["I wish all gays would just disappear.", "hate"],
  ["Every muslim is a potential terrorist.", "hate"],
  ["Immigrants bring nothing but crime and disease.", "hate"],
  ["Mexicans are all drug dealers.", "hate"],
  ["Hitler was right about the jews.", "hate"],
  ["The holocaust never happened.", "hate"],
]);
passes(" (their words, no hate)", [
  "Criminals should be locked up.",
  "People who drive drunk should be locked up.",
  "Black lives matter.",
  "The media and the banks are controlled by shareholders.",
  "I wish all my friends would visit.",
  "Every muslim I know is kind.",
  "Immigrants bring new skills and ideas.",
  "Women should be treated like equals.",
  "Hitler was right about nothing.",
  "Anyone who says the holocaust never happened is antisemitic.",
  "Deniers claim the holocaust never happened, but the evidence is overwhelming.",
  "Some people say the holocaust never happened.",
  "The world would be better off if there were no more wars.",
]);

// From ToxiGen's dev misses: an identity denied ("trans women are men"), couples and parents as a
// group, being gay cast as the result of abuse, violence against a group member called ok, and
// "abusive" as a generalisation; beside them, the supportive and ordinary forms.
blocksAs(" (ToxiGen's dev misses)", [
  ["Trans women are men.", "hate"],
  ["trans women are just men in dresses", "hate"],
  ["Trans men are women, whatever they say.", "hate"],
  ["Lesbian couples are not real families.", "hate"],
  ["Gay parents are a danger to children.", "hate"],
  ["Being gay is a result of childhood trauma.", "hate"],
  ["It is ok for a man to rape a trans woman.", "hate"],
  ["Trans women are abusive.", "hate"],
]);
passes(" (the supportive and ordinary forms)", [
  "Trans women are women.",
  "Trans men are men.",
  "Lesbian couples are raising happy families.",
  "It is ok for a man to cry.",
  "Being gay is a result of who you are, not a choice.",
  "Old couples are adorable.",
]);

// From ETHOS's dev misses (evaluation only: rules, no model, learn from it): a group not wanted
// here, a race called superior, killing a group asked for as a right, a group wished to kill
// itself, a group removed; beside them, the same words in reports and ordinary sentences.
blocksAs(" (ETHOS's dev misses)", [
  ["Europe doesn't want Muslims here.", "hate"],
  ["We don't want any more immigrants here.", "hate"],
  ["Whites are the superior race.", "hate"],
  ["Why are we not allowed to kill christians?", "hate"],
  ["Too bad women don't know how to kill themselves.", "hate"],
  ["Gays should just kill themselves.", "hate"],
  ["The first step is to remove Romanians from the country.", "hate"],
  ["Homosexuality leads to death and extinction.", "hate"],
]);
passes(" (the same words, not hate)", [
  "We don't want any more delays here.",
  "No race is the superior race.",
  "Many trans people kill themselves because of discrimination, and that must change.",
  "The first step is to remove the batteries.",
  "Smoking leads to death.",
]);

// One person insulted for an identity: a degrading adjective before an identity term, said of
// someone ("Jim is a filthy african", "you dumb mexican"), the form of the bias madlibs' toxic
// templates and of HateCheck's derogation of one member; a colour word only before a person
// ("a dirty white" is a colour). Beside them, colours, skills, oneself and kind words.
blocksAs(" (one person insulted for an identity)", [
  ["You are a filthy muslim", "hate"],
  ["Jim is a filthy african.", "hate"],
  ["He's a dumb mexican!", "hate"],
  ["shut up, you dirty jew", "hate"],
  ["She is a stupid black woman, and she knows it.", "hate"],
  ["Being homosexual is nasty.", "hate"],
]);
passes(" (colours, skills, oneself, kind words)", [
  "The wall is a dirty white.",
  "The couch is an ugly brown, sadly.",
  "I'm a terrible christian, I skip church.",
  "She is a terrible chinese speaker.",
  "He is a wonderful muslim.",
  "You are a proud black woman.",
  "Being homosexual is normal.",
]);

// HateCheck's spelling variations beside look-alikes and spaces, in sentences of our own: a letter
// left out or two swapped in the words of hate and the groups it names, and a word joined to the
// one before it. Misspellings that are English words ("gas", "backs", "sum") stay those words.
blocksAs(" (misspelt)", [
  ["I hate wmen.", "hate"],
  ["I hate womne so much", "hate"],
  ["Ihate women", "hate"],
  ["Mslims are vermin", "hate"],
  ["I hte immigrants", "hate"],
  ["killall jews", "hate"],
]);
passes(" (misspellings that are words, and misspelt kind words)", [
  "I hate gas stations.",
  "Our backs are sore after the move.",
  "The sum is disgusting, it should be lower.",
  "I love wmen and their strength.",
  "I don't hate wmen, I admire them.",
  "Ihave womne friends",
]);

test("misspellings: a letter left out or two swapped, never the first letter, words of four letters or more", (t) => {
  t.deepEqual(misspellings("hate").sort(), ["hae", "haet", "htae", "hte"]);
  t.false(misspellings("women").some((w) => !w.startsWith("w")));
  t.deepEqual(misspellings("gay"), []);
});

test("wordsRegex: whole words only, the longest that fits, in any case", (t) => {
  const re = wordsRegex(["pass", "password", "passport"]);
  t.deepEqual("My PASSWORD, a passport, passable, bypass pass".match(re), ["PASSWORD", "passport", "pass"]);
});

test("respell: only the sentences with a misspelt or joined word, written as they would be", (t) => {
  t.is(respell("the order is late. i hate wmen. the rest is fine."), "i hate women.");
  t.is(respell("ihate women and the gas bill"), "i hate women and the gas bill");
  t.is(respell("nothing misspelt here, gas and backs and sum are words."), null);
});

// A group kept from rights or places by the speaker's call, in the active voice ("We should not
// allow trans people to vote", "stop muslims from entering", "never hire immigrants"): the passive
// form ("… should not be allowed to vote") blocked already. Beside them, the same verbs keeping a
// group from harm, a report of the past, and things kept from a place.
blocksAs(" (a group kept from rights, in the active voice)", [
  ["We should not allow trans people to vote.", "hate"],
  ["We need to prevent immigrants from voting.", "hate"],
  ["we must stop muslims from entering", "hate"],
  ["Never hire women, they just quit.", "hate"],
  ["Ban jews from owning land.", "hate"],
]);
passes(" (kept from harm, reported, or things)", [
  "We need to prevent refugees from drowning at sea.",
  "We must stop immigrants from being exploited by employers.",
  "Laws now stop landlords from refusing immigrants.",
  "The company that refused to hire women was fined.",
  "We should not allow dogs to enter the kitchen.",
  "Never hire a contractor without references.",
  "The Taliban ban women from working, the report says.",
  "The firm does not hire women, a lawsuit claims.",
]);

// A group called a degrading noun with a word or two before it that the lists do not hold ("all
// obedient brutes", "mostly terrorists", "backward savages"); beside them, the same nouns after a
// verb, a preposition or a negation.
blocksAs(" (a degrading noun after a free word)", [
  ["black people are all obedient brutes", "hate"],
  ["Muslims are mostly terrorists", "hate"],
  ["Arabs are backward savages.", "hate"],
]);
passes(" (the nouns after a verb, a preposition or a negation)", [
  "Immigrants are hard workers, not criminals.",
  "Refugees are escaping criminals and war.",
  "Muslims are our neighbours, not terrorists.",
  "Women are dating criminals less often than men.",
  "Trans people are frequent victims of violent criminals.",
  "Immigrants are never criminals by nature.",
]);

test("gates: at most `most` to a gate, in order, and never a source V8 compiles without its optimisations", (t) => {
  // ten regexes of about 5,000 characters each: six of them together would be 30 KB
  const items = Array.from({ length: 10 }, (_, i) => ({
    id: i,
    re: new RegExp(String.raw`\b(?:` + Array.from({ length: 700 }, (_, k) => `w${i}x${k}`).join("|") + ")", "g"),
  }));
  const built = gates(items, 6);
  t.deepEqual(
    built.flatMap((g) => g.items.map((i) => i.id)),
    items.map((i) => i.id),
  );
  for (const g of built) {
    t.true(g.items.length <= 6);
    t.true(g.gate.source.length <= REGEXP_OPTIMISED_MAX, `${g.gate.source.length}`);
    for (const i of g.items) t.true(g.gate.test(`say w${i.id}x699 now`));
  }
  t.true(built.length >= 3);
});

test("the toxicity and injection gates are short enough for V8 to optimise", (t) => {
  for (const gate of [...TOXICITY_GATES, ...INJECTION_GATES])
    t.true(gate.source.length <= REGEXP_OPTIMISED_MAX, `${gate.source.length}: ${gate.source.slice(0, 60)}`);
});
