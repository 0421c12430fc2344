// The toxicity guard: obscenity's English matcher (its dataset and recommended transformers catch
// "sh1t", "fuuuck" and confusable letters) classified by severity, plus patterns for what a word
// list cannot see: threats, wishes of harm, self-harm encouragement, insults aimed at a person and
// dehumanising generalisations. Casual, undirected profanity ("what a shit day") is mild; the same
// word aimed at someone is harassment.
//
// Confidence = the most severe hit, plus 0.05 for each further distinct hit (capped at 0.99).
import { englishDataset, englishRecommendedTransformers, RegExpMatcher } from "obscenity";
import type { MatchPayload } from "obscenity";
import type { GuardDefinition, Hit } from "./types.ts";
import type { TextView } from "./text.ts";
import {
  changedRanges,
  deLeet,
  despace,
  excerpt,
  gates,
  maskWord,
  misspellings,
  normalise,
  sentenceAt,
  toOriginal,
  wordRewrites,
} from "./text.ts";
import { WordPrefilter } from "./word-prefilter.ts";
import { lowerBound, SpanSet, upperBound } from "./spans.ts";

import { TOXICITY_CATEGORIES, type ToxicityCategory } from "./kinds.ts";
export { TOXICITY_CATEGORIES, type ToxicityCategory };

export interface ToxicityConfig {
  /** categories to report; default all */
  categories?: readonly ToxicityCategory[] | undefined;
}

/** Severity of each category when a hit is not aimed at anyone. */
export const SEVERITY: Record<ToxicityCategory, number> = {
  slur: 0.9,
  threat: 0.9,
  self_harm: 0.9,
  hate: 0.85,
  harassment: 0.75,
  profanity: 0.45,
  sexual: 0.3,
};

// obscenity's words by category; anything not listed counts as sexual/ambiguous (0.3).
const SLURS = new Set([
  "abeed",
  "africoon",
  "arabush",
  "boonga",
  "chingchong",
  "chink",
  "kike",
  "nigger",
  "fag",
  "dyke",
  "tranny",
  "retard",
  "spastic",
]);
const INSULT_WORDS = new Set(["bitch", "cunt", "whore", "slut", "twat", "bastard", "prick", "cuck"]);
const PROFANE = new Set(["fuck", "shit", "piss", "arse", "ass", "turd", "bollocks", "wank", "jizz"]);
// Ordinary words the English dataset would otherwise match (each entry was checked to match
// without it: every whitelisted term costs a scan of the text, so the list holds only those).
const WHITELIST = [
  "chinks in the armour",
  "chinks in the armor",
  "chink in the armour",
  "chink in the armor",
  "chink in his armour",
  "chink in her armour",
  "chink in their armour",
  "chink in his armor",
  "chink in her armor",
  "chink in their armor",
  "cum laude",
  "magna cum",
  "summa cum",
  "retardant",
  "retardation",
  "pussycat",
  "pussy willow",
  "shiitake",
  "dickinson",
  "moby dick",
];

let wordList: { matcher: RegExpMatcher; prefilter: WordPrefilter | null } | null = null;
/** Builds the shared word matcher now (a few milliseconds) rather than on the first text. */
export function prepareToxicity(): void {
  wordMatcher();
}

/** obscenity's matcher with our whitelist, and its prefilter (null: none could be built). */
export function wordMatcher(): { matcher: RegExpMatcher; prefilter: WordPrefilter | null } {
  // Built on first use (not at import time), then shared: it holds no per-call state.
  if (!wordList) {
    const built = englishDataset.build();
    const matcher = new RegExpMatcher({
      ...built,
      whitelistedTerms: [...(built.whitelistedTerms ?? []), ...WHITELIST],
      ...englishRecommendedTransformers,
    });
    searchWhitelistByBisection(matcher);
    // the prefilter transforms texts with the very transformers the matcher was given
    wordList = { matcher, prefilter: WordPrefilter.for(matcher, englishRecommendedTransformers.blacklistMatcherTransformers ?? []) };
  }
  return wordList;
}

/**
 * obscenity (0.4) drops a match that lies inside an occurrence of a whitelisted term by asking an
 * IntervalCollection of the occurrences, which scans every occurrence that starts at or before the
 * match: matches x occurrences, quadratic on a long text full of both ("shiitake shit" repeated).
 * This gives the matcher's collections the same question answered by binary search (is there an
 * interval [lo, hi] with lo <= start and end <= hi: SpanSet.contains), built on the first question.
 * If the matcher has no such method (another obscenity version), it is left as it is: slower, never
 * different.
 */
function searchWhitelistByBisection(matcher: RegExpMatcher): void {
  type Intervals = Iterable<[number, number]> & { query(lower: number, upper: number): boolean };
  const m = matcher as unknown as { getWhitelistedIntervals?: (input: string) => Intervals };
  const collect = m.getWhitelistedIntervals;
  if (typeof collect !== "function") return;
  m.getWhitelistedIntervals = function (this: unknown, input: string): Intervals {
    const intervals = collect.call(this, input);
    if (typeof intervals?.query !== "function" || typeof intervals[Symbol.iterator] !== "function") return intervals;
    let set: SpanSet | null = null;
    intervals.query = (lower, upper) => (set ??= SpanSet.ofPairs(intervals)).contains(lower, upper);
    return intervals;
  };
}

/** obscenity's matches in a text, skipping its full pass when the prefilter proves there are none. */
export function wordMatches(text: string): MatchPayload[] {
  const { matcher, prefilter } = wordMatcher();
  if (prefilter && !prefilter.mayMatch(text)) return [];
  return matcher.getAllMatches(text, true);
}

const YOU = String.raw`(?:you|your|ya|u|ur|yourself|urself)`;
// Identity adjectives ("black", "muslim", "gay") and the plural nouns that hate speech targets
// (protected characteristics, HateCheck's targets, national origin); "<adjective> people", "you people".
const GROUP_ADJ = String.raw`(?:black|white|non-?white|brown|asian|jewish|muslim|christian|catholic|hindu|sikh|gay|lesbian|bisexual|trans|transgender|queer|disabled|deaf|blind|autistic|immigrant|foreign|indian|chinese|korean|japanese|pakistani|mexican|arab|african(?: american)?|american|european|russian|polish|romanian|latino|hispanic|native|roma|gypsy|old|fat)`;
const PEOPLE = String.raw`(?:people|folks|men|women|persons|kids|children|immigrants|refugees|guys|girls|boys|couples|parents|families)`;
const GROUP = String.raw`(?:${GROUP_ADJ}\s+${PEOPLE}|middle easterners|native americans|african[- ]americans|negro(?:e)?s|bisexuals|slavs|illegals|illegal (?:immigrants|aliens)|third worlders|non-?whites|trans (?:women|men)|transwomen|transmen|(?:the )?mentally (?:ill|disabled|retarded)(?: people)?|(?:people|those) with (?:mental |physical |intellectual )?disabilit(?:y|ies)|the disabled|cripples|muslims|moslems|jews|christians|catholics|hindus|sikhs|buddhists|atheists|immigrants|refugees|migrants|foreigners|blacks|whites|asians|arabs|mexicans|africans|chinese|indians|pakis|pakistanis|koreans|turks|russians|romanians|americans|europeans|latinos|hispanics|gays?(?: and lesbians)?|lesbians|homosexuals|queers|trans people|transgenders|trannies|lgbtq?\+?(?: people| community)?|autistics|autists|disabled people|women|females|girls|feminists|gypsies|jewish people|you people|your kind|their kind|these people|those people)`;
// Religions, identities and movements named as a whole ("islam is ...", "destroy islam").
/** Disgust or weariness with what follows ("sick of", "fed up with"). */
const WEARY = String.raw`(?:(?:disgusted|sickened|repulsed|revolted) (?:by|with)|(?:sick|tired)(?: and tired)? of|fed up with|done with|can['’]?t stand|cannot stand)`;
/** What a group is said to do to the speaker ("<group> disgust me"), matched first, its group after. */
const REPELS = String.raw`(?:(?:disgust|sicken|repulse|revolt)s?\s+(?:me|us)|makes?\s+(?:me|us)\s+(?:sick|want to (?:puke|vomit|throw up)))`;
/** What a group is said to deserve ("<group> deserve to be beaten"), matched first, its group after. */
const DESERVES_ABUSE = String.raw`(?:deserve|need|ought)\s+to\s+be\s+(?:beaten|raped|tortured|enslaved|abused|punished|slapped|hit)`;
/** One member of a group, for "every <one>" ("shoot every refugee"). */
const GROUP_ONE = String.raw`(?:jew|muslim|moslem|christian|catholic|hindu|sikh|immigrant|refugee|migrant|foreigner|arab|mexican|african|asian|gay|lesbian|homosexual|queer|feminist|gypsy|${GROUP_ADJ}\s+(?:person|man|woman|guy|girl|boy|kid))`;
// degrading words said of one person for an identity, and the identity terms of one person (Dixon et
// al.'s identity terms, the bias madlibs'); colours are left out: "a dirty white" is a colour
const DEGRADING = String.raw`(?:nasty|terrible|horrible|vile|dumb|stupid|moronic|idiotic|ugly|filthy|dirty|smelly|rotten|repulsive|disgusting|shitty|fucked|fucking|worthless|pathetic|lazy|greedy|retarded|useless|evil|scummy|trashy|gross)`;
const IDENTITY_ONE = String.raw`(?:non-?binary|asian|jewish|jew|muslim|moslem|christian|catholic|protestant|hindu|sikh|buddhist|taoist|atheist|gay|lesbian|bisexual|homosexual|heterosexual|trans|transgender|queer|lgbtq?|disabled|deaf|blind|paraly[sz]ed|autistic|immigrant|foreigner|indian|chinese|korean|japanese|pakistani|mexican|arab|african(?: american)?|american|canadian|european|russian|polish|romanian|latino|latina|latinx|hispanic|middle eastern|native|gypsy|old|older|young|younger|teenage|elderly|middle aged|male|female)`;
const ONE_PERSON = String.raw`(?:person|man|woman|guy|girl|boy|kid|lady|dude|bloke|bitch|bastard|freak|pig|dog|cunt|slut|whore)`;
// a call to keep a group from something, and what comes before it when it is a call: the start of
// a clause, a modal, the speaker ("we must stop", "to prevent", "Ban …"), not a subject of its own
const KEEP_FROM = String.raw`(?:(?:not|never|no longer)\s+(?:allow|permit)|prevent|stop|bar|keep|forbid|ban)`;
const A_CALL = String.raw`(?:^|[.!?;:,(]\s*|\b(?:should|must|need to|needs to|have to|has to|ought to|got to|gotta|let['’]?s|we|i|to|and|just|please)\s+)`;
const NOT_HIRE = String.raw`(?:never|not|don['’]?t|do not|stop|refuse to|won['’]?t|wouldn['’]?t)\s+(?:hire|hiring|employ|employing|rent to|renting to|serve|serving)`;
const A_REFUSAL = String.raw`(?:^|[.!?;:,(]\s*|\b(?:i|we|i['’]d|we['’]d|i['’]ll|we['’]ll|i would|we would|i will|we will|should|must|you should)\s+)`;
// what a group is called when it is degraded, as a noun ("brutes", "terrorists")
const DEGRADING_NOUN = String.raw`(?:brutes|savages|animals|terrorists|criminals|parasites|thugs|vermin|rats|cockroaches|pigs|apes|monkeys|rapists|thieves|leeches|invaders|degenerates|freaks|perverts|pedophiles|predators|barbarians|subhumans|scum|trash|idiots|morons|retards|losers)`;
// what a group is kept from in a call to exclude it: rights and places, not harms
const RIGHTS = String.raw`(?:vote|enter|come|immigrate|work|marry|adopt|own|buy|rent|live|serve|teach|run for office|hold office|practi[cs]e|pray|worship|build|settle|breed|reproduce|use|access|have access|join|study|attend|drive|exist)`;
const RIGHTS_ING = String.raw`(?:voting|entering|coming|immigrating|working|marrying|adopting|owning|buying|renting|living|serving|teaching|running for office|holding office|practi[cs]ing|praying|worshipp?ing|building|settling|breeding|reproducing|using|accessing|having access|joining|studying|attending|driving|getting (?:jobs|married|citizenship)|being (?:hired|elected|citizens)|existing)`;
const CREED = String.raw`(?:islam|christianity|judaism|hinduism|buddhism|catholicism|feminism|homosexuality|transgenderism|gayness|being (?:gay|homosexual|lesbian|bisexual|trans(?:gender)?|queer))`;
// a group named as people, not as the adjective of a cuisine or a language ("chinese food")
const NOT_PEOPLE = String.raw`(?!\s+(?:food|restaurants?|takeout|cuisine|language|new year|medicine|dish(?:es)?|recipes?|menus?|characters|culture|history|government))`;
const NEGATIVE = String.raw`(?:not worth (?:the \w+|saving|keeping|it|anything|\w+ing)|primitive|savage|brutes|incompetent|immoral|perverted|(?:sexual )?deviants|violent|aggressive|dangerous|a (?:threat|danger|menace|drain|burden)(?: (?:on|to) (?:society|the economy|our \w+))?|an? (?:\w+ )?waste of (?:space|air|oxygen|skin)|menaces|a mental disorder|mentally (?:ill|disabled|deficient)|abnormal|unnatural|barbaric|barbarians|uncivili[sz]ed|thugs|abusive|drug dealers|gangsters|gang members|invaders|leeches|moochers|freeloaders|pedophiles|predators|greedy|untrustworthy|inferiors?|disgusting|nasty|repulsive|worthless|stupid|dumb|dumbass(?:es)?|inferior|subhuman|sub-human|evil|filthy|dirty|vile|scum|trash|garbage|shit|pig shit|same shit|animals|vermin|rats|parasites|terrorists|terrorism|criminals|rapists|a plague|a disease|a cancer|cancer|a virus|a burden|a joke|jokes|freaks|psychos|lunatics|savages|pigs|dogs|apes|monkeys|cockroaches|lazy|annoying|gross|ugly|creepy|thieves|idiots|morons|retards|losers|degenerates?|perverts|a (?:sexual )?perversion|useless|pathetic|dishonest|a disgrace|retarded|sick(?: in the head)?|mentally ill|a mental illness|demonic|satanic|the devil|a cult|a religion of (?:hate|violence|war|terror)|the home of terrorism|abominations?|an abomination|not human|less than human)`;
/** At most `max` characters of the same clause with no "not", "never" or "no" among them ("immigrants are not a burden" is not a generalisation). */
const unnegated = (max: number) => String.raw`(?:(?!\b(?:not|never|no)\b)[^.!?\n]){0,${max}}?`;
interface Pattern {
  category: ToxicityCategory;
  weight: number;
  label: string;
  re: RegExp;
  /** A check of a match on the original text (its case), when the lower-cased view cannot tell. */
  accept?: (text: string, start: number, end: number) => boolean;
  /** Negated as a statement of hate is ("I don't think he is an idiot"): negatedAt drops the match. */
  negatable?: boolean;
}

const r = (src: string) => new RegExp(src, "g");

/** Words that start a sentence, or follow "fuck", capitalised without being a name. */
const NOT_NAMES = new Set([
  "it",
  "this",
  "that",
  "these",
  "those",
  "yeah",
  "yes",
  "me",
  "my",
  "off",
  "up",
  "around",
  "all",
  "everything",
  "everyone",
  "everybody",
  "nobody",
  "someone",
  "one",
  "the",
  "a",
  "which",
  "what",
  "there",
  "here",
  "who",
  "life",
]);

/** Whether the word after the first of `span` is a name: capitalised, and not shouted with it ("FUCK THIS"). */
function nameAfter(span: string): boolean {
  const m = /^(\S+)\s+([A-Za-z][\w'’-]*)/.exec(span);
  if (!m || !/^[A-Z]/.test(m[2]!) || NOT_NAMES.has(m[2]!.toLowerCase().replace(/['’].*$/, ""))) return false;
  return m[1] !== m[1]!.toUpperCase() || m[2] !== m[2]!.toUpperCase();
}

/** What a crowd is called ("a bunch of morons", "a pack of liars"). */
const CROWD_INSULT = String.raw`(?:idiots|morons|imbeciles|cretins|jackasses|dumbasses|losers|cowards|nitwits|halfwits|scumbags|lunatics|hypocrites|degenerates|retards|traitors|fools|liars|crybabies|snowflakes)`;
/** What is said of someone in "<someone> is a …": an insult, or worthless or pathetic. */
const PREDICATE_INSULT = String.raw`(?:idiots?|morons?|imbeciles?|cretins?|retards?|scumbags?|assholes?|dumbass(?:es)?|jackass(?:es)?|douche ?bags?|douches?|dickwads?|dipshits?|jerks?|(?:mother)?fuckers?|losers?|lunatics?|worthless|pathetic)`;
/** Words between the copula and the insult ("is such a complete idiot"). */
const INSULT_MODIFIER = String.raw`(?:such|just|really|truly|so|a|an|the|complete|total|absolute|utter|fucking|bloody|biggest|dumbest|giant|huge|little)`;
/** The subject and copula that end the text before an insult ("Maher is an ", "she's a total "). */
const SUBJECT_BEFORE = new RegExp(
  String.raw`([A-Za-z][\w-]*)(?:['’](?:s|re)|\s+(?:is|was|are|were))\s+(?:${INSULT_MODIFIER}\s+){0,3}$`,
  "i",
);

/** Whether the text before an insult says it of a person: he, she, they, or a capitalised word that is not NOT_NAMES. */
function isPerson(before: string): boolean {
  const word = SUBJECT_BEFORE.exec(before)?.[1] ?? "";
  const lower = word.toLowerCase();
  return lower === "he" || lower === "she" || lower === "they" || (/^[A-Z]/.test(word) && !NOT_NAMES.has(lower));
}

/** A group named as a whole ("the jews", "muslims"; not "chinese food"). */
const GROUP_MENTION = new RegExp(String.raw`\b(?:${GROUP}|${CREED})\b${NOT_PEOPLE}`, "g");
/** What names no group for groupBefore, though GROUP_MENTION finds it. */
const ANY_PEOPLE = new Set(["these people", "those people", "you people", "your kind", "their kind"]);

/**
 * Whether a group is named in the 150 characters before an original offset, so that "they" or
 * "them" there may be it ("Immigrants keep coming. They are parasites."). "These people" is not a
 * group here: "I met these people at work. They are annoying." names none.
 */
function groupBefore(text: string, start: number): boolean {
  const before = text.slice(Math.max(0, start - 150), start).toLowerCase();
  for (const m of before.matchAll(GROUP_MENTION)) if (!ANY_PEOPLE.has(m[0])) return true;
  return false;
}

/** Patterns a word list cannot see (on the lower-cased view). */
export const TOXICITY_PATTERNS: readonly Pattern[] = [
  {
    category: "threat",
    weight: 0.9,
    label: "threat of violence",
    re: r(
      String.raw`\b(?:i|we|im|ima|imma)(?:'ll|'m|'d| will| shall| am| are| would| wanna| gonna| want to| going to)?\b[^.!?\n]{0,40}?\b(?:kill|murder|hurt|stab|shoot|beat|punch|strangle|choke|rape|slap|smash|burn|bury)\s+(?:\w+\s+){0,2}?${YOU}\b`,
    ),
  },
  {
    category: "threat",
    weight: 0.85,
    label: "threat",
    re: r(
      String.raw`\b(?:know|find|found|find out|found out|get) where ${YOU} (?:live|work|sleep)\b|\b(?:i'll|i will|we'll|we will|gonna) (?:find|hunt) ${YOU}\b|\bmake ${YOU} pay\b|\bwatch ${YOU}r back\b|\b${YOU}(?:'re| are) (?:dead|going to die|gonna die)\b`,
    ),
  },
  {
    category: "threat",
    weight: 0.85,
    label: "wish of harm",
    re: r(
      String.raw`\b(?:hope|wish)\s+(?:that\s+)?(?:${YOU}(?: \w+){0,2})\b[^.!?\n]{0,30}?\b(?:die|dies|dead|cancer|suffers?|burn|rot|get hurt|get raped|hit by)\b|\b(?:drop dead(?! (?:gorgeous|beautiful|handsome|sexy|funny|serious))|go die|just die|die already|die in a (?:fire|hole|ditch)|eat shit and die)\b|(?<=(?:^|[.!?,;:\n]\s*|\b(?:just|go|then|please)\s))get (?:sick|covid|cancer|aids) and die\b|\bmay (?:${YOU}|he|she|they|all of (?:you|them))\s+(?:all\s+)?(?:rot|roast|burn|fry|suffer) in hell\b`,
    ),
  },
  {
    category: "self_harm",
    weight: 0.9,
    label: "self-harm encouragement",
    re: r(
      String.raw`\b(?:kill|hang|shoot|off|end)\s+(?:yourself|urself|ur self|your ?self)\b|\bkys\b|\bend your (?:own )?life\b|\bdrink bleach\b|\bnobody would miss you\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "hatred of a group",
    re: r(
      String.raw`\bi(?:'m| am)?\s+(?:really |just |truly |fucking |so |honestly |absolutely |totally |genuinely |deeply |seriously )?(?:hate|despise|detest|loathe|can['’]?t stand|cannot stand|can not stand|(?:do not|don['’]?t) (?:like|want))\s+(?:all\s+(?:of\s+)?|the\s+|these\s+|those\s+)?${GROUP}\b${NOT_PEOPLE}|\b${WEARY}(?<=(?:^|[.!?,;:\n]\s*|\bi(?:'m| am)?\s+)(?:(?:really|just|truly|fucking|so|honestly)\s+)?${WEARY})\s+(?:all\s+(?:of\s+)?)?(?:the\s+|these\s+|those\s+)?(?!(?:these|those|you) people\b)${GROUP}\b${NOT_PEOPLE}(?!\s+(?:being|getting)\b)|\b${REPELS}\b(?<=(?:^|[.!?,;:\n]\s*|\b(?:all|the|these|those|most)\s+)${GROUP}\s+(?:like (?:you|them|him|her)\s+)?(?:really\s+|just\s+|all\s+)?${REPELS})`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "hatred aimed at someone",
    re: r(
      String.raw`\bi\s+(?:really |just |truly |fucking |so |honestly )?(?:hate|despise|detest|loathe|can'?t stand|cannot stand)\s+(?:you|u|ya|all of you|every one of you|your guts)\b(?!\s+(?:guys|all)?\s*(?:so much|too)?\s*(?:for (?:that|this)|,? ?lol|haha))`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "derogatory generalisation",
    re: r(
      String.raw`\b(?:${GROUP}|${CREED})\s+(?:are|r|is)\s+(?:(?:so|all|just|such|really|fucking|nothing but|nothing more than|no more than|no better than|a bunch of|like|truly|basically|literally|the most|the|simply|pure|lower class|the same)\s+){0,3}(?:${NEGATIVE}|too\s+(?:stupid|dumb|primitive|emotional|weak|lazy|ignorant|dirty)\s+to|(?:only|just)\s+good\s+for)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "dehumanising generalisation",
    re: r(
      String.raw`\b(?:all|those|these|the|most)\s+(?:\w+\s+){0,2}?(?:are|r)\s+(?:(?:just|nothing but|like|all|filthy|dirty)\s+)*(?:vermin|animals|rats|cockroaches|parasites|subhuman|savages|scum|filth|a disease|a plague|a cancer|trash|dogs|pigs|apes|monkeys)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "eliminationist language",
    re: r(
      String.raw`\b(?:${GROUP}|${CREED}|people|persons|folks|men|liberals|conservatives|them|they|you|like (?:you|him|her|them)|trans|lgbtq?\+?|(?:every|each)\s+(?:single\s+)?${GROUP_ONE})\b[^.!?\n,]{0,30}?\b(?:should|must|deserve to|need to|ought to|will)\s+(?:all\s+|just\s+|fucking\s+)?(?:be\s+|get\s+)?(?:exterminated|wiped out|eradicated|gassed|killed|shot|hanged|hung|lynched|burned|put down|executed|sterili[sz]ed|euthani[sz]ed|dead|die|removed from the face of the earth|looked down (?:up)?on)\b|\b${DESERVES_ABUSE}\b(?<=(?<!\b(?:no|not|not all)\s+)\b${GROUP}\s+(?:all\s+)?${DESERVES_ABUSE})`,
    ),
  },
  // violence called for against a group, as an order or a wish ("kill all muslims", "destroy islam",
  // "hunt down every last one of those <group>", "line the <group> up against the wall"), not a
  // report of it ("why did they kill the jews" has its own subject before the verb; "would" counts
  // after I or we only: "the soldiers would round up the jews" is a report)
  {
    category: "hate",
    weight: 0.9,
    label: "violence against a group",
    re: r(
      String.raw`\b(?<=(?:^|[.!?,;:\n]\s*|\b(?:i|we|let['’]?s|lets|just|should|must|gonna|going to|want to|wanna|need to|have to|will|['’]ll|(?:i|we)\s+would|to)\s+))(?:kill|killing|murder|exterminate|gas|hang|lynch|burn|nuke|shoot|slaughter|massacre|wipe out|eradicate|execute|remove|expel|beat(?!\s+(?:even|out)\b)|destroy|deport|eliminate|get rid of|round up|hunt down|hunt|take up arms against|put (?:a )?bullets? (?:in|into|through))\s+(?:(?:(?:every|each)\s+(?:last\s+|single\s+)?one\s+of\s+(?:the|those|these)\s+|(?:all|every|each|the|these|those)?\s*(?:of\s+(?:the|those|these)\s+)?)(?:\w+\s+)?(?:${GROUP}|${CREED}|${GROUP_ADJ}\s+(?:people|person|man|woman|guy|girl|boy|kid))${NOT_PEOPLE}|(?:every|each)\s+(?:single\s+)?(?:\w+\s+)?${GROUP_ONE})\b|\b(?:burn|bomb|torch|firebomb|blow up)(?<=(?:^|[.!?,;:\n]\s*|\b(?:i|we|let['’]?s|lets|just|should|must|gonna|going to|want to|wanna|need to|have to|will|['’]ll|(?:i|we)\s+would)\s+)(?:burn|bomb|torch|firebomb|blow up))\s+(?:down\s+)?(?:(?:their|the|a|every|all|that|this|those|these|your)\s+)?(?:\w+\s+)?(?:mosques?|synagogues?|churches|church|temples?|gurdwaras?)\b(?!\s+(?:scene|level|map|stage|set|quest|mission|area|dungeon|model|prop|game|chapter))|\bline(?<=(?:^|[.!?,;:\n]\s*|\b(?:i|we|let['’]?s|lets|just|should|must|gonna|going to|want to|wanna|need to|have to|will|['’]ll|(?:i|we)\s+would)\s+)line)\s+(?:up\s+)?(?:(?:all|every one of)\s+)?(?:(?:the|these|those)\s+)?(?:\w+\s+)?(?:${GROUP})\s+(?:all\s+)?(?:up\s+)?(?:against\s+(?:a|the)\s+wall|and\s+(?:shoot|kill|gas|hang)\b)`,
    ),
  },
  {
    category: "threat",
    weight: 0.8,
    label: "call to kill",
    re: r(
      String.raw`\b(?:kill|burn|shoot|gas|hang|nuke|exterminate)\s+(?:them|em|['’]em)\s+all\b|\b(?<=(?:^|[.!?]\s+))kill (?:them|those \w+|these \w+)\b|\bsend\s+(?:(?:all|the|these|those)\s+){0,2}(?:${GROUP}\s+|them\s+)?(?:all\s+)?to\s+(?:hell|the gas chambers?|the ovens?|concentration camps?)\b`,
    ),
  },
  {
    category: "threat",
    weight: 0.85,
    label: "wish of death",
    re: r(
      String.raw`\b(?:slow |painful )?death to (?:all |the |every )?(?:${GROUP}|people like|you|them|those)\b|\bwish(?:ing)?\s+(?:you|him|her|them)?\s*(?:a\s+)?(?:slow |painful )?death\b|\b(?:hope|wish)\s+(?:he|she|they|him|her|them)\s+(?:\w+\s+){0,2}?(?:dies?|gets? (?:raped|killed|shot|cancer|hit by)|burns? in hell|rots? in hell)\b|\b(?:hope|wish)\s+(?:that\s+)?(?:all\s+)?(?:the\s+|these\s+|those\s+)?${GROUP}\s+(?:(?:would|will|could)\s+)?(?:all\s+)?(?:die|drown|burn|rot|starve|get (?:shot|killed|gassed))\b|\b(?:love|like|want|wish|hope)\s+to\s+see\s+(?:every|each|all(?: of)?(?: the)?|the)\s+(?:\w+\s+)?(?:${GROUP}|${GROUP_ONE})\s+(?:burn|die|hang|drown|suffer|get (?:shot|killed|gassed))\b`,
    ),
  },
  {
    category: "threat",
    weight: 0.7,
    label: "threat against someone",
    re: r(
      String.raw`\b(?:i|we|im|ima|imma)(?:['’]ll|['’]d| will| would| wanna| gonna| want to| going to)?\s+(?:\w+\s+){0,2}?(?:kill|murder|stab|strangle|choke|rape|bury|beat the (?:shit|fuck|hell) out of)\s+(?:her|him|them|every (?:one of them|\w+)|all of them)\b`,
    ),
  },
  // dehumanising and degrading words fastened to an identity ("korean bitch", "filthy chinese")
  {
    category: "hate",
    weight: 0.85,
    label: "identity insult",
    re: r(
      String.raw`\b${GROUP_ADJ}\s+(?:american\s+)?(?:cunts?|bitch(?:es)?|whores?|sluts?|scum|trash|garbage|filth|niggas?|parasites|leeches|vermin|savages|subhumans)\b|\blike (?:the )?(?:animals|vermin|rats|cockroaches|pigs|dogs|savages|parasites) (?:they|you) are\b|\b(?:fucking|filthy|dirty|lowlife|stupid|dumb|ugly|smelly)\s+(?:\w+\s+)?${GROUP_ADJ}\s+(?:monkeys?|apes?|animals?|pigs?|cockroach(?:es)?|vermin|savages?|parasites?|rats?|dogs?)\b`,
    ),
  },
  // one person insulted for an identity ("Jim is a filthy african", "you dumb mexican"): led by the
  // degrading word, which a lookbehind checks is said of someone; a colour only before a person
  {
    category: "hate",
    weight: 0.8,
    label: "insult for an identity",
    re: r(
      String.raw`\b${DEGRADING}(?<=\b(?:(?:is|are|was|were|['’]s|['’]re|be)\s+an?|you)\s+\w+)\s+(?:${IDENTITY_ONE}(?:\s+${ONE_PERSON})?|(?:black|white|brown)\s+${ONE_PERSON})(?=\s*(?:[.!?,;:)]|$)|\s+(?:and|but|who|like)\b)`,
    ),
  },
  {
    category: "hate",
    weight: 0.8,
    label: "insult to a group",
    re: r(
      String.raw`\b(?:stupid|dumb|filthy|dirty|disgusting|smelly|lowlife|fucking|fuckin)\s+(?:\w+\s+)?(?:${GROUP}|${GROUP_ADJ}\s+(?:\w+\s+){0,2}?(?:people|women|men|guys?|girls?|boys?|kids|bitch(?:es)?|snitch|dudes?|blokes?|bastards?))\b${NOT_PEOPLE}|\bf+u+c+k+\s+(?:off\s+)?(?:all\s+|the\s+|those\s+|these\s+)?(?:${GROUP}|${CREED})\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "denial of humanity",
    re: r(
      String.raw`\b(?:${GROUP}|they|these people|those people)\s+(?:are not|aren['’]?t|is not|isn['’]?t|r not)\s+(?:\d+%\s+|fully\s+|even\s+|real\s+)?(?:humans?|people|persons)\b`,
    ),
  },
  // hate without a slur (the dev split of ToxiGen and Stormfront, docs/guards.md "Hate without
  // slurs"): a group kept from rights or places, told to go back, cast as invaders or a burden, or
  // as not to be trusted; each with the ordinary sentence that shares its words in the unit tests
  {
    category: "hate",
    weight: 0.85,
    label: "exclusion of a group",
    re: r(
      String.raw`\b(?:${GROUP}|${CREED})\b${unnegated(40)}\b(?:(?:should(?:n['’]?t| not| never)|must(?:n['’]?t| not| never)|shall not|ought not to)\s+(?:ever\s+)?(?:be\s+)?(?:allowed|permitted|trusted|given (?:rights|the vote|welfare|jobs)|exist|vote|marry|adopt|be hired|hold office|live (?:here|among us|in our \w+))|(?:cannot|can['’]?t|can not)\s+be\s+trusted|(?:should|must|need to|ought to)\s+(?:all\s+|just\s+)?be\s+(?:banned|barred|kicked out|thrown out|expelled|kept out|driven out)\s+(?:from|of)\b)\b|\bno\s+place\s+(?:in|among)\b(?<=\b(?:${GROUP}|${CREED})\s+(?:have|has)\s+no\s+place\s+(?:in|among))|\b(?:world|country|society|planet|earth|neighbou?rhood)\s+(?:would|will)\s+be\s+(?:a\s+)?better(?:\s+(?:place|off))?\s+without\s+(?:(?:all|the|any|those|these)\s+)?(?:\w+\s+)?(?:${GROUP}|${CREED}|moochers|parasites|scum|vermin)\b|\b(?:don['’]?t|dont|do not)\s+think\s+(?:that\s+)?(?:they|${GROUP})\s+should\s+(?:be\s+allowed\s+to\s+)?(?:exist|live|vote|marry|have (?:rights|kids|children))\b|(?<=(?:^|[.!?,;:\n]\s*|\b(?:we|let['’]?s|lets|should|must|need to|have to|the right to|just)\s+))(?:ban|keep)\s+(?:all\s+|the\s+|any\s+)?(?:${GROUP})\s+(?:from|out of)\b|\b(?:do not|does not|don['’]?t|doesn['’]?t|dont|doesnt)\s+(?:want|need)\s+(?:any\s+)?(?:more\s+)?(?:of\s+)?(?:${GROUP}|those (?:\w+ )?people)(?:\s+(?:in|near|around)\s+(?:my|our|this)|\s+here)\b`,
    ),
  },
  // the same, as the speaker's call in the active voice ("we should not allow <group> to vote", "stop
  // <group> from entering", "never hire <group>"): led by the verb, the group after it. A call, not a
  // report: the verb starts a clause or follows a modal or the speaker ("The Taliban ban women from
  // working" passes); what the group is kept from is a right or a place, not a harm ("prevent
  // refugees from drowning")
  {
    category: "hate",
    weight: 0.85,
    label: "exclusion of a group",
    re: r(
      String.raw`\b${KEEP_FROM}(?<=${A_CALL}${KEEP_FROM})\s+(?:all\s+|any\s+|the\s+|more\s+)?(?:${GROUP})\s+(?:from\s+(?:${RIGHTS_ING})|to\s+(?:${RIGHTS}))\b|\b${NOT_HIRE}(?<=${A_REFUSAL}${NOT_HIRE})\s+(?:any\s+|the\s+)?(?:${GROUP})\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "telling a group to go back",
    re: r(
      String.raw`\b(?:go|send (?:them|\w+)|sent|get)\s+back\s+(?:to\s+(?:your|their|ur)\s+(?:own\s+)?(?:countr(?:y|ies)|homelands?|lands?|jungles?|caves?|deserts?|huts?|shitholes?)|(?:to\s+)?where\s+(?:you|they|u)\s+(?:came|come)\s+from)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.8,
    label: "a group cast as invaders",
    re: r(
      String.raw`\b(?:${GROUP})\b(?:\s+(?:(?:(?:are|will|just|all|want to|come here to)\s+){0,4}(?:steal(?:ing)?|stole|tak(?:e|es|ing)|took)\s+(?:all\s+(?:of\s+)?)?our\s+(?:jobs|women|country|land|benefits|homes)\b|(?:\w+\s+)?(?:breed|multiply|reproduce)\s+like\s+(?:rats|rabbits|vermin|animals|cockroaches|flies|insects)\b|(?:are\s+)?(?:(?:invading|flooding|swarming|overrunning|infesting)\b|(?:destroying|ruining)\s+(?:our|this|the)\s+(?:country|culture|nation|society|neighbou?rhoods?|towns?|cities|race|way of life)\b|(?:\w+\s+){0,2}?(?:to\s+)?take over (?:our|this|my) (?:country|nation|world|land|town|city)\b))|${unnegated(30)}\b(?:a|an?\s+\w+)\s+(?:drain|burden|threat|menace|danger|parasites?)\s+(?:on|to)\s+(?:society|the economy|our|the country|this country|everyone)\b)|\b(?:invasion|invaders?|hordes?|swarms?)\s+of\s+(?:\w+\s+){0,2}?(?:${GROUP}|third world)|\b(?:destroyed|ruined|overrun)\s+by\s+(?:the\s+|these\s+|all\s+(?:the\s+)?)?(?:${GROUP})`,
    ),
  },
  {
    category: "hate",
    weight: 0.8,
    label: "denial of an identity",
    re: r(
      String.raw`\b(?:bisexuality|transgenderism|being (?:trans|bi|bisexual|nonbinary|non-binary)|asexuality|gender dysphoria|non-?binary genders?)\s+(?:is\s+not|isn['’]?t|isnt|is\s+never)\s+(?:real|a real thing|a thing|valid)\b|\bno such thing as (?:bisexuality|bisexuals|being trans|asexuality|non-?binary (?:people|genders?))\b(?!\s+(?:erasure|discrimination|phobia))|\bno way (?:that )?(?:bisexuality|being trans|asexuality) is (?:a )?real\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.8,
    label: "a group kept to its place",
    re: r(
      String.raw`\b(?:women|females|wives|girls)\s+(?:(?:should|must|need to)\s+(?:all\s+|only\s+)?(?:stay|be kept|remain)\s+(?:in the kitchen|barefoot)|belong\s+(?:in the kitchen|at home|in the home|barefoot))\b|\b(?:${GROUP})\s+(?:(?:do not|don['’]?t|dont|does not|doesn['’]?t)\s+belong\s+(?:here|in (?:our|this|my) (?:country|society|school|town|city|neighbou?rhood))\b|(?:are|is)\s+(?:still\s+|just\s+)?not\s+(?:real|true|proper|normal)\s+(?:families|women|men|americans|citizens|people|parents)\b|(?:all\s+)?(?:smell|stink)s?\s+(?:like\s+(?:garbage|shit|trash|curry|sewage|animals|pigs|dogs|rotten \w+)|bad|awful|terrible|disgusting)\b)`,
    ),
  },
  {
    category: "hate",
    weight: 0.9,
    label: "violence against a group",
    // by the speaker, to every member of a group ("I'm going to hurt every immigrant I see"): verbs
    // that also report what a policy does ("a law designed to hurt immigrants") count only here
    re: r(
      String.raw`\b(?:i|we)(?:['’]m| am|['’]re| are)?\s+(?:going to|gonna|will|['’]ll|want to|wanna)\s+(?:hurt|harm|stab|torture|rape|beat up)\s+(?:(?:every|each|any)\s+(?:single\s+)?(?:\w+\s+)?${GROUP_ONE}|all\s+(?:of\s+)?(?:the\s+|those\s+|these\s+)?(?:\w+\s+)?(?:${GROUP}))\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "derogatory generalisation",
    // a group named before and referred to by pronoun ("Immigrants keep coming. They are parasites.")
    re: r(
      String.raw`\bthey(?:\s+(?:are|r)|['’]re)\s+(?:(?:so|all|just|such|really|fucking|nothing but|nothing more than|like|truly|basically|literally|the|simply)\s+){0,3}${NEGATIVE}\b`,
    ),
    accept: (text, start) => groupBefore(text, start),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "hatred of a group",
    // "Muslims? I can't stand them."
    re: r(
      String.raw`\bi(?:['’]m| am)?\s+(?:really |just |truly |fucking |so |honestly |absolutely |totally )?(?:hate|despise|detest|loathe|can['’]?t stand|cannot stand)\s+(?:all\s+(?:of\s+)?)?them\b`,
    ),
    accept: (text, start) => groupBefore(text, start),
  },
  // the literal part first and the group looked for behind it, where the group would lead: a
  // pattern led by the group scans every word of a text for it (see "no place in")
  {
    category: "hate",
    weight: 0.85,
    label: "dehumanising generalisation",
    re: r(
      String.raw`\btreated\s+like\s+(?:property|animals|slaves|objects|dogs|cattle|livestock|second-class citizens)\b(?<=\b(?:${GROUP})\s+(?:should|must|need to|ought to|deserve to)\s+(?:all\s+|just\s+)?be\s+treated\s+like\s+(?:property|animals|slaves|objects|dogs|cattle|livestock|second-class citizens))`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "exclusion of a group",
    re: r(
      String.raw`\b(?:locked up|jailed|imprisoned|rounded up|put in (?:camps|cages|jail|prison)|sent to (?:camps|prison))\b(?<=\b(?:${GROUP})\s+(?:should|must|need to|ought to)\s+(?:all\s+|just\s+)?be\s+(?:locked up|jailed|imprisoned|rounded up|put in (?:camps|cages|jail|prison)|sent to (?:camps|prison)))|\bbetter(?:\s+off|\s+place)?\s+if\s+there\s+(?:were|was|are)\s+no\s+(?:more\s+)?(?:${GROUP}|${CREED})\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "hatred of a group",
    re: r(
      String.raw`\b(?:black|gay|trans|muslim|jewish|immigrant|asian|native|brown|queer|disabled)\s+lives\s+(?:don['’]?t|dont|do not)\s+matter\b|\b(?:disappear|vanish|die|drop dead|go away|cease to exist|stop existing|be wiped out)\b(?<=\b(?:i|we)\s+(?:wish|hope|want)\s+(?:that\s+)?(?:all\s+(?:the\s+|of\s+the\s+)?)?(?:${GROUP})\s+(?:would\s+|will\s+|could\s+)?(?:just\s+)?(?:disappear|vanish|die|drop dead|go away|cease to exist|stop existing|be wiped out))`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "derogatory generalisation",
    re: r(
      String.raw`\b(?:every|each|any)\s+(?:single\s+)?${GROUP_ONE}\s+is\s+(?:a\s+)?(?:potential\s+|future\s+|born\s+|secret\s+)?(?:terrorist|criminal|rapist|thief|pedophile|paedophile|animal|parasite|savage|drug dealer|liar|traitor)\b|\b(?:bring|brings|spread|spreads)\s+(?:nothing but\s+|only\s+)?(?:crime|disease|diseases|drugs|violence|terror|terrorism|rape|filth)\b(?<=\b(?:${GROUP})\s+(?:only\s+)?(?:bring|brings|spread|spreads)\s+(?:nothing but\s+|only\s+)?(?:crime|disease|diseases|drugs|violence|terror|terrorism|rape|filth))|\b(?:the\s+)?(?:jews|jewish people|zionists)\s+(?:secretly\s+)?(?:control|run|own|rule)s?\s+(?:the\s+|all\s+(?:the\s+)?)?(?:media|banks|world|government|hollywood|money|economy)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "an identity denied",
    // "trans women are men" (not "trans women are women"); being gay cast as what abuse or a lack
    // makes ("being gay is a result of childhood trauma", not "… of who you are")
    re: r(
      String.raw`\btrans(?:gender)?\s+(?:women\s+are\s+(?:just\s+|really\s+|actually\s+|still\s+|biologically\s+)?(?:men|males|dudes|guys)|men\s+are\s+(?:just\s+|really\s+|actually\s+|still\s+|biologically\s+)?(?:women|females|girls))\b|\b(?:being gay|being trans|homosexuality|transgenderism|being transgender)\s+is\s+(?:just\s+)?(?:a|the)\s+result\s+of\s+(?:(?:child(?:hood)?\s+)?(?:sexual\s+)?(?:abuse|trauma)|bad parenting|not having|a lack of|mental illness|a (?:mental )?disorder|sin)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "violence against a group",
    // called acceptable ("it is ok for a man to rape a trans woman")
    re: r(
      String.raw`\b(?:it\s+is|it['’]s|its)\s+(?:ok|okay|fine|alright|acceptable|right)\s+(?:for\s+(?:\w+\s+){1,2})?to\s+(?:rape|kill|beat|hit|attack|hurt|harass|lynch|shoot)\s+(?:(?:a|an|the|any|all)\s+)?(?:${GROUP_ADJ}\s+(?:woman|man|person|kid|girl|boy|people|women|men)|${GROUP_ONE}s?|${GROUP})\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "supremacy, and a group wished dead",
    // "whites are the superior race"; "why are we not allowed to kill <group>?" and "too bad <group>
    // don't kill themselves" (the match starts at "why" and "too bad", so their negation is inside it,
    // not a negation of it); "<group> should just kill themselves" (not "many <group> kill themselves
    // because of …"); "homosexuality leads to death". Led by their rare words.
    re: r(
      String.raw`\brace\b(?<=\b(?:we|whites|white people|the white race|${GROUP})\s+(?:are|is)\s+(?:the|a)\s+(?:superior|master|dominant|more evolved)\s+race)|\b(?:why\s+(?:are|aren['’]?t)\s+we(?:\s+not)?\s+allowed\s+to|why\s+can['’]?t\s+we|we\s+should\s+be\s+allowed\s+to)\s+kill\s+(?:all\s+(?:the\s+)?)?(?:${GROUP})\b|\btoo\s+bad\s+(?:all\s+)?(?:${GROUP})\s+(?:[\w'’]+\s+){0,5}?kill\s+themselves\b|\bkill\s+themselves\b(?<=\b(?:${GROUP})\s+(?:should|must|need to|ought to)\s+(?:all\s+|just\s+|go\s+)?kill\s+themselves)|\b(?:homosexuality|being gay|transgenderism|being trans)\s+(?:leads to|causes|spreads|brings)\s+(?:\w+\s+)?(?:death|disease|diseases|extinction|aids|pedophilia|paedophilia|degeneracy)\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "praise of Hitler or denial of the Holocaust",
    re: r(
      String.raw`\bhitler\s+(?:was|is)\s+right(?=\s*(?:[.!?,;:\n]|$)|\s+about\s+(?:the\s+)?(?:${GROUP}|${CREED}))|(?<!\b(?:deniers?|revisionists?|people|some|they|who|many|others)\s+(?:claim|claims|claimed|say|says|said|argue|argues|argued|believe|believes|insist|insists)\s+(?:that\s+)?(?:the\s+)?)\b(?:the\s+)?holocaust\s+(?:never\s+happened|did(?:n['’]?t| not)\s+happen|(?:was|is)\s+(?:a\s+|just\s+a\s+)?(?:hoax|lie|myth|fake))\b`,
    ),
  },
  {
    category: "hate",
    weight: 0.85,
    label: "derogatory generalisation",
    // asked as a question ("why are women so stupid?"): the question takes the statement for granted
    re: r(
      String.raw`\bwhy\s+(?:are|r)\s+(?:all\s+|so many\s+|the\s+)?(?:${GROUP}|${CREED})\s+(?:always\s+)?(?:so|such)\s+(?:${NEGATIVE})\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult aimed at someone",
    negatable: true,
    re: r(
      String.raw`\b(?:you|you're|you are|ur|u r|u)\b(?:\s+(?:such|so|a|an|the|just|really|fucking|complete|total|absolute|little|big|fat|ugly|stupid|dumb|pathetic|worthless|useless|dumbest|biggest|sad|disgusting|subhuman|filthy|piece of))*\s+(?:idiot|moron|imbecile|loser|stupid|dumb|retard\w*|worthless|useless|pathetic|trash|garbage|scum|pig|piece of (?:shit|garbage|trash|crap)|waste of (?:space|air)|clown|cretin|dumbass|jackass|asshole|bitch|bastard|motherfucker|cunt|twat|whore|slut|freak|creep|disgrace|failure)\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult aimed at someone",
    negatable: true,
    re: r(
      String.raw`\b(?:what an?|such an?)\s+(?:\w+\s+){0,2}?(?:idiot|moron|imbecile|loser|clown|cretin|dumbass|jackass|asshole|bitch|bastard|motherfucker|disgrace|failure)\s+(?:you are|you're|u r|ur)\b|\b(?:shit|crap) for brains\b|\bnobody (?:likes|wants|loves) you\b|\beveryone hates you\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult aimed at someone",
    negatable: true,
    re: r(
      String.raw`\b(?:you(?:'re| are)|ur|u r)\s+(?:the|such a|a)\s+(?:dumbest|stupidest|ugliest|worst|most (?:pathetic|stupid|useless|disgusting|worthless)|biggest (?:idiot|loser|moron|failure|joke))\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult aimed at someone",
    negatable: true,
    // insults that are also verbs or names ("you jerk the wheel", "you prick your finger", "a Dick
    // Francis fan"): after "you are a" and ending the clause
    re: r(
      String.raw`\b(?:you(?:'re|’re| are)|ur|u r)\s+(?:(?:such|a|an|just|really|total|complete|absolute|big|huge|fucking|little)\s+){1,3}(?:jerk|douche(?: ?bag)?|dick|prick|dickwad|dipshit)(?=\s*(?:[.!?,;:)\n]|$)|\s+(?:and|but|who|lol|dude|man|bro|too)\b)`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult aimed at someone",
    // "quit being a jerk", "get your head out of your ass", "a nasty piece of work": idioms of abuse
    re: r(
      String.raw`\b(?:quit|stop)\s+being\s+(?:such\s+)?an?\s+(?:\w+\s+)?(?:jerk|dick|prick|douche(?: ?bag)?|asshole|idiot|moron|dumbass|jackass|creep|bitch)\b|\bheads?\s+(?:out of|from)\s+(?:your|his|her|their|ur)\s+(?:ass|arse|butt)\b|\b(?:a|such a)\s+(?:truly\s+|real\s+|right\s+)?nasty piece of work\b`,
    ),
  },
  {
    category: "slur",
    weight: 0.9,
    label: "slur",
    re: r(
      String.raw`\b(?:beaners?|spics?(?! and span)|wetbacks?|gooks?|ragheads?|towelheads?|n[i1]gglets?|half-?breeds?|sand ?n[i1]gg\w*|kikes?|groids?|negroids?|mud ?(?:people|races?|bab(?:y|ies)|sharks?)|muds(?:lims?|lums?)|muzz(?:ies|y|rats?)|jungle bunn(?:y|ies)|race[- ]traitors?|mongreli[sz]\w*|chinks?(?! in (?:the|his|her|their|its|our|my|your) armou?r))\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "name-calling",
    negatable: true,
    re: r(
      String.raw`\b(?:stupid|dumb|ugly|fat|worthless|pathetic|fucking|filthy|dirty|lying|ignorant|brainless|braindead|spineless|gutless|senile)\s+(?:cunt|bitch|whore|slut|idiots?|morons?|imbeciles?|cretins?|bastards?|retards?|twat|prick|losers?|pigs?|assholes?|motherfuckers?|cowards|fucks?)\b|\b${CROWD_INSULT}\b(?<=\b(?:bunch|pack|band|gang|herd|load)\s+of\s+(?:\w+\s+){0,2}${CROWD_INSULT})|\b(?:dumbasses|jackasses|morons|idiots|imbeciles|cretins|retards|scumbags|dipshits)\b(?<=\b(?:you|these|those|the rest of the|all the|all of you|all you)\s+(?:\w+\s+)?(?:dumbasses|jackasses|morons|idiots|imbeciles|cretins|retards|scumbags|dipshits))|\b(?:dumbest|stupidest|ugliest|grossest)\s+(?:woman|man|person|people|family|human(?: being)?|president|girl|guy|bitch)\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "name-calling",
    // insults coined as insults ("libtards", "fuckwads"): a "not" in their clause is about something
    // else ("another reason not to do business with these fuckwads")
    re: r(
      String.raw`\b(?:(?:trump|lib|fuck)tard(?:s|ed)?|fuck(?:wad|nut|face|head|stick)s?|(?:shit|dick)heads?|(?:douche|scum|dirt|sleaze|scuz)bags?|douche ?canoes?|ass(?:hat|clown)s?|dipshit(?:s|ted)?|dickwads?|d-?bags?|douche ?bags?|(?:poo ?poo|poop|butt|fart) ?faces?|numbnuts|nitwits?|magats|demonrats|rethuglicans|repukes|repuk?licans|a-holes?|a\$\$ ?(?:hat|hole)s?|sh\*t ?heads?)\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult about someone's family",
    re: r(
      String.raw`\byour (?:mother|mom|mum|momma|mama|sister|wife|girlfriend|father|dad|family)(?:'s| is| are)\s+(?:an?\s+)?(?:\w+\s+)?(?:whore|slut|bitch|cunt|hoe|skank|pig|cow)\b`,
    ),
  },
  {
    category: "harassment",
    weight: 0.8,
    label: "abuse aimed at someone",
    re: r(
      String.raw`\b(?:fuck|screw)\s+(?:you|u|ya|yourself|off)\b|\bfuck\s+(?:him|her|them|em|'em|y'?all|all of (?:you|them)|th(?:ese|ose) (?:people|guys|idiots|morons|assholes))\b|\bgo fuck\b|\b(?:up|kiss) (?:your|my) ass\b|\bshut (?:the fuck |tf |the f\S{0,8} )?up\b|\bshut (?:your|ur|yer) (?:\w+ )?(?:pie ?holes?|cake ?holes?|traps?|gobs?|mouths?)\b|\bgo to hell\b|\b(?:stfu|sdstfu|gfy|fjb)\b|#fuck(?!(?:cancer|covid|it|yeah|yes|this|that|me|mondays?|work|school)\b)[a-z]{3,}`,
    ),
  },
  {
    category: "harassment",
    weight: 0.8,
    label: "abuse aimed at someone",
    // "fuck Zuckerberg", "fuck JOE": the word after it is a name, which the lower-cased view cannot
    // tell from "fuck traffic" (nameAfter)
    re: r(String.raw`\bfuck\s+[a-z][a-z'’-]*`),
    accept: (text, start, end) => nameAfter(text.slice(start, end)),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult about someone",
    negatable: true,
    // "Maher is an idiot", "he is worthless", "they're morons": said of a person (isPerson), not of a
    // thing ("this is an idiot-proof design", "that is pathetic weather"). The insult is matched
    // first and the copula looked for behind it: most texts have no insult, and a scan for "<word>
    // is" would stop at every word.
    re: r(
      String.raw`\b${PREDICATE_INSULT}(?![-\w'’])(?!\s+(?:of|in)\b)(?<=\b(?:(?:he|she|they)(?:'s|’s|'re|’re)|[a-z][a-z-]*\s+(?:is|was|are|were))\s+(?:${INSULT_MODIFIER}\s+){0,3}${PREDICATE_INSULT})`,
    ),
    accept: (text, start) => isPerson(text.slice(Math.max(0, start - 120), start)),
  },
  {
    category: "harassment",
    weight: 0.75,
    label: "insult about someone",
    negatable: true,
    // "what a giant orange asshole", "what a fucking airhead this is": the insult ends the clause
    // ("what a fantastic airhead costume" is a costume)
    re: r(
      String.raw`\bwhat an?\s+(?:[\w-]+\s+){0,3}?(?:idiot|moron|imbecile|asshole|airhead|jackass|dumbass|douche ?bag|scumbag|loser|cretin|prick|twat|dickhead|dipshit)(?=\s*(?:[.!?,;:\n]|$)|\s+(?:this|that|he|she|they|you|is|was)\b)`,
    ),
  },
  // a group called a degrading noun with a word or two before it that the lists do not hold ("are
  // all obedient brutes", "are mostly terrorists"): led by the noun, the group looked for behind it;
  // the words between are no negation, preposition, article, or verb in -ing or -ed ("are escaping
  // criminals", "are victims of criminals", "are neighbours, not terrorists" pass)
  {
    category: "hate",
    weight: 0.85,
    label: "derogatory generalisation",
    re: r(
      String.raw`\b${DEGRADING_NOUN}\b(?<=\b(?:${GROUP})\s+(?:are|r)\s+(?:(?:all|just|mostly|only|basically)\s+)?(?:(?!(?:not|never|no|nor|neither|hardly|rarely|seldom|less|more|than|of|by|from|with|to|for|like|against|among|the|a|an|our|their|your|my)\b)[a-z]+(?:-[a-z]+)*(?<!ing|ed),?\s+){1,2}${DEGRADING_NOUN})`,
    ),
  },
];

// one scan per group of patterns says whether any of the group matches (text.ts anyOf); most texts
// match none, and a text with one finding runs the few patterns of its group, not all of them. At
// most six to a gate, and never a gate too long for V8 to optimise (text.ts gates): a rule added to
// a gate near that size made every benign text 1.5 times as slow.
const GATE_GROUP = 6;
const PATTERN_GROUPS = gates(TOXICITY_PATTERNS, GATE_GROUP).map(({ gate, items }) => ({ gate, patterns: items }));
/** The gates of the toxicity patterns, for the test that they stay short enough for V8 to optimise. */
export const TOXICITY_GATES: readonly RegExp[] = PATTERN_GROUPS.map((g) => g.gate);

/** The patterns, in order, of the groups whose gate finds a match in `on`. */
function gatedPatterns(on: string): Pattern[] {
  return PATTERN_GROUPS.flatMap((g) => (g.gate.test(on) ? g.patterns : []));
}

// A generalisation negated in its own clause ("I would never say that women are worthless").
const NEGATED_BEFORE =
  /\b(never|not|don'?t|doesn'?t|didn'?t|won'?t|wouldn'?t|isn'?t(?! it (?:obvious|clear|true|a fact|funny|telling) (?:that|how)\b)|aren'?t|no one|nobody|wrong to|stop|misconceptions?|myths?|stereotypes?|false that|untrue that)\b(?:(?!\bbut\b)[^.!?;\n])*$/;
// A statement named to condemn it ("saying that women are stupid is sexist", "the claim that … is
// false"): what follows it calls it bigoted or false.
const CONDEMNED_AFTER =
  /^["'’”]?\s*(?:is|was|are|were)\s+(?:(?:so|just|totally|completely|deeply|really|plain|plainly|clearly|simply|both)\s+)?(?:sexist|racist|bigoted|homophobic|transphobic|xenophobic|islamophobic|antisemitic|anti-semitic|ableist|misogynistic|wrong|false|untrue|hateful|offensive|unacceptable|not ok(?:ay)?|a (?:myth|lie|stereotype))\b/;
// Past a comma, the negation reaches the statement only through "that" or a verb of saying or
// thinking ("it is not true, contrary to belief, that …", "I would never, ever say …"): "not gonna
// lie, <statement>" and "I don't care what you think, <statement>" negate nothing of it.
const NEGATION_REACHES =
  /\bthat\b|\b(?:say|says|said|saying|think|thinks|thought|believe|believes|believed|claim|claims|claimed|suggest|suggests|mean|means|meant|imply|implies|agree|agrees)\b/;
// Quoted words in a text that talks about them ("is it offensive to call someone 'x'?", "saying 'x'
// is sexist"): mentioned, not used.
const QUOTED = /(?<![\w])(["'“‘«])([^"'“”‘’«»\n]{1,200}?)(["'”’»])(?![\w])/g;
const MENTION =
  /\b(?:is|are|was|that's|it's|sounds)\s+(?:so\s+|really\s+|just\s+)?(?:sexist|racist|homophobic|transphobic|bigoted|hateful|wrong|disgusting|unacceptable|offensive|not ok(?:ay)?|a slur)\b|\b(?:offensive|slur|the word|the term|what does|mean|meaning|call(?:ed|s|ing)?\s+(?:me|us|someone|somebody|anyone|people|others))\b/;
/** What names a word rather than using it, just before it ("the word …", "called me a …"). */
const MENTIONED_BEFORE =
  /(?:\bthe\s+(?:words?|terms?|slurs?|insults?)|\b(?:called|calls|calling|call)\s+(?:me|us|someone|somebody|anyone|people|others)(?:\s+an?)?)\s*["'“‘]?$/;
/** What fastens a word so named to the reader after it ("the word … fits you"): then it is used. */
const FASTENED_AFTER = /^["'”’]?\s*(?:fits|describes|suits|applies to|is (?:for|what))\s+(?:you|u)\b/;

const WORD_LABEL: Partial<Record<ToxicityCategory, string>> = {
  slur: "slur",
  harassment: "insult",
  sexual: "sexual term",
  profanity: "profanity",
};
const DIRECTED = new RegExp(String.raw`\b${YOU}\b`);
/** What follows "prick" as a verb: what is pricked. */
const PRICKED = /^\s+(?:your|my|his|her|their|its|our|the|a|an|it|up)\b/;

function categoryOf(word: string): ToxicityCategory {
  if (SLURS.has(word)) return "slur";
  if (INSULT_WORDS.has(word)) return "harassment";
  if (PROFANE.has(word)) return "profanity";
  return "sexual";
}

const ALL_CATEGORIES: ReadonlySet<string> = new Set(TOXICITY_CATEGORIES);

export function detectToxicity(text: string, config: ToxicityConfig = {}): Hit[] {
  const wanted: ReadonlySet<string> = config.categories ? new Set(config.categories) : ALL_CATEGORIES;
  const hits: Hit[] = [];
  const view = normalise(text);
  // word list: obscenity works on the original text (its transformers do their own folding)
  const seen = new Set<string>();
  for (const match of wordMatches(text)) {
    const { phraseMetadata } = englishDataset.getPayloadWithPhraseMetadata(match);
    const word = phraseMetadata?.originalWord ?? "profanity";
    const start = match.startIndex;
    const end = match.endIndex + 1;
    const key = `${start}:${end}`;
    if (seen.has(key)) continue;
    seen.add(key);
    // "prick" before what is pricked ("did you prick your finger") is the verb
    if (word === "prick" && PRICKED.test(text.slice(end, end + 12).toLowerCase())) continue;
    const category = categoryOf(word);
    let score = category === "harassment" ? 0.6 : SEVERITY[category];
    // aimed at the reader: "fuck you", "you stupid bitch"
    const around = view.text.slice(Math.max(0, start - 24), Math.min(view.text.length, end + 16));
    const aimed = DIRECTED.test(around) && category !== "sexual";
    if (aimed) score = Math.max(score, 0.8);
    hits.push({
      kind: category,
      start,
      end,
      score,
      description: `${WORD_LABEL[category] ?? "profanity"}${aimed ? " aimed at someone" : ""} (${maskWord(word)})`,
    });
  }
  // the word hits so far, in order of start (obscenity's matches are sorted by position, and there
  // is one hit per span): what the patterns' descriptions mask, found by binary search
  const words: WordSpans = { spans: hits.map((h) => [h.start, h.end] as const), starts: hits.map((h) => h.start) };
  // profanity or an insult in the same sentence as a group named as a whole ("fucking migrants",
  // "hindus and muslims are the same shit"): abuse of a group, not emphasis
  const abusive = hits.filter((h) => h.kind === "profanity" || h.kind === "harassment");
  if (abusive.length > 0) {
    const starts = abusive.map((h) => h.start);
    GROUP_MENTION.lastIndex = 0;
    for (const g of view.text.matchAll(GROUP_MENTION)) {
      const [gs, ge] = toOriginal(view, g.index, g.index + g[0].length);
      const near = firstInSentence(text, abusive, starts, gs, ge);
      if (!near) continue;
      hits.push({
        kind: "hate",
        start: Math.min(gs, near.start),
        end: Math.max(ge, near.end),
        score: 0.65,
        description: `profanity about a group (${excerpt(text.slice(gs, ge), 30)})`,
      });
      break;
    }
  }
  patternHits(text, view, view.text, 0, words, hits);
  // spelling that hides a word from the patterns: look-alikes ("k1ll all the j3ws"), in each sentence
  // deLeet changed, read alone (an e-mail address changes its sentence: the gates scan that
  // sentence, not the whole text again); a hit kept unless one of its kind starts there
  const leet = deLeet(view.text);
  if (leet) {
    const found = new Set(hits.map((h) => `${h.kind}:${h.start}`));
    for (const [from, to] of changedRanges(view.text, leet))
      patternHits(text, view, leet.slice(from, to), from, words, hits, { found, suffix: " (obfuscated)" });
  }
  // letters spaced out ("m u s l i m s are vermin") on the joined view, whose offsets are not the
  // text's: a hit spans the whole text, says no excerpt (a spaced word is masked by nothing), and is
  // negated by what the joined view says before it. A pattern that reads the original text
  // (`accept`) is not run there, and one finding per label is enough.
  const joined = despace(view.text);
  if (joined) wholeTextHits(text, joined, hits, "letter-spaced");
  // words of hate and the groups it names misspelt ("I hate wmen") or joined to the word before
  // ("Ihate women"), read as they would be spelt: the same as letters spaced out
  const respelt = respell(view.text);
  if (respelt) wholeTextHits(text, respelt, hits, "misspelt");
  const out = hits.filter(
    (h) =>
      wanted.has(h.kind) &&
      !(h.kind === "hate" && (negatedAt(view, h.start) || CONDEMNED_AFTER.test(text.slice(h.end, h.end + 60).toLowerCase()))),
  );
  if (out.length > 0 && MENTION.test(view.text)) discountMentions(text, out);
  return out.sort((a, b) => a.start - b.start);
}

/**
 * The patterns' hits in another reading of the view whose offsets are not the text's (letters
 * joined, words respelt): a hit spans the whole text, says no excerpt (what it read is not in the
 * text as such), and is negated by what that reading says before it. A pattern that reads the
 * original text (`accept`) is not run there, and one finding per label is enough, none when the
 * text's own reading found that label.
 */
function wholeTextHits(text: string, reading: string, hits: Hit[], how: string): void {
  const labels = new Set<string>();
  for (const p of gatedPatterns(reading)) {
    if (p.accept || labels.has(`${p.category}:${p.label}`)) continue;
    p.re.lastIndex = 0;
    for (const m of reading.matchAll(p.re)) {
      if ((p.negatable || p.category === "hate") && negatedBefore(reading, m.index)) continue;
      if (hits.some((h) => h.kind === p.category && h.description.startsWith(p.label))) break;
      labels.add(`${p.category}:${p.label}`);
      hits.push({ kind: p.category, start: 0, end: text.length, score: p.weight, description: `${p.label} (${how})` });
      break;
    }
  }
}

// HateCheck's spelling variations beside look-alikes and spaces: a letter left out or two swapped
// ("I hate wmen", "I hte muslims", "Mslims are vermin") in the words of hate and the groups it
// names, and a word joined to the one before it ("Ihate women", "killall jews"). Misspellings that
// are English words or their inflections ("gas" of gays, "backs" of blacks, "sum" of scum,
// "lathe" of loathe; checked against GCIDE's word list when written) are never read as one.
const RESPELT_GROUPS = [
  "women",
  "females",
  "girls",
  "muslims",
  "moslems",
  "muslim",
  "jews",
  "jewish",
  "blacks",
  "whites",
  "gays",
  "lesbians",
  "homosexuals",
  "queers",
  "immigrants",
  "refugees",
  "migrants",
  "foreigners",
  "asians",
  "arabs",
  "mexicans",
  "africans",
  "christians",
  "hindus",
  "sikhs",
  "trans",
  "transgender",
  "disabled",
  "feminists",
  "latinos",
  "hispanics",
  "indians",
  "people",
];
const RESPELT_HATE = [
  "hate",
  "despise",
  "loathe",
  "detest",
  "kill",
  "murder",
  "exterminate",
  "vermin",
  "scum",
  "parasites",
  "animals",
  "disgusting",
  "filthy",
  "inferior",
  "subhuman",
  "cockroaches",
  "trash",
  "garbage",
  "deserve",
];
const JOINED_AFTER = ["i", "we", "all", "kill", "hate", "the", "these", "those", "fucking", "filthy", "dirty", "stupid"];
const ENGLISH_MISSPELLINGS = new Set([
  "feales",
  "grils",
  "jes",
  "backs",
  "wites",
  "whits",
  "gas",
  "quees",
  "refuges",
  "foreignes",
  "arbs",
  "aras",
  "hinds",
  "siks",
  "tans",
  "tarns",
  "latins",
  "lations",
  "indins",
  "indias",
  "lathe",
  "sum",
  "cockroachs",
  "garage",
]);

/** The misspellings and joined words, as one regex, and what each one stands for. */
const misspelt = wordRewrites(() => {
  const fix = new Map<string, string>();
  for (const word of [...RESPELT_GROUPS, ...RESPELT_HATE])
    for (const typo of misspellings(word)) if (!ENGLISH_MISSPELLINGS.has(typo)) fix.set(typo, word);
  for (const before of JOINED_AFTER)
    for (const word of [...RESPELT_GROUPS, ...RESPELT_HATE, "all"]) fix.set(before + word, `${before} ${word}`);
  return fix;
});

/**
 * The sentences of the lower-cased view that hold a misspelt or joined word (above), with those words
 * written as they would be, one sentence per line; null when there are none. Only those sentences:
 * a "peple" in a long prompt does not send every pattern over all of it a second time.
 */
export function respell(lower: string): string | null {
  const { re, fix } = misspelt();
  re.lastIndex = 0;
  const sentences: string[] = [];
  let done = 0;
  for (let m = re.exec(lower); m; m = re.exec(lower)) {
    if (m.index < done) continue;
    const [start, end] = sentenceAt(lower, m.index, done);
    sentences.push(
      lower
        .slice(start, end)
        .trim()
        .replace(re, (typo) => fix.get(typo)!),
    );
    done = end;
    re.lastIndex = end;
  }
  return sentences.length > 0 ? sentences.join("\n") : null;
}

/**
 * The patterns' hits in `on`: the view itself, or a part of the de-leeted view (which has the view's
 * offsets) starting at view offset `from`. With `found`, a hit is kept unless one of its kind already
 * starts there (and is added to it); `suffix` follows the label in the description.
 */
function patternHits(
  text: string,
  view: TextView,
  on: string,
  from: number,
  words: WordSpans,
  hits: Hit[],
  { found, suffix = "" }: { found?: Set<string>; suffix?: string } = {},
): void {
  for (const p of gatedPatterns(on)) {
    p.re.lastIndex = 0;
    for (const m of on.matchAll(p.re)) {
      const [start, end] = toOriginal(view, from + m.index, from + m.index + m[0].length);
      const key = `${p.category}:${start}`;
      if (found?.has(key)) continue;
      if ((p.accept && !p.accept(text, start, end)) || (p.negatable && negatedAt(view, start))) continue;
      found?.add(key);
      hits.push({
        kind: p.category,
        start,
        end,
        score: p.weight,
        description: `${p.label}${suffix} ("${excerpt(maskSpans(text, start, end, words), 40)}")`,
      });
    }
  }
}

/** The longest span sameSentence accepts. */
const SENTENCE = 160;

/** Whether text[start, end) lies within one sentence (no sentence end or line break inside). */
function sameSentence(text: string, start: number, end: number): boolean {
  return end - start <= SENTENCE && !/[.!?\n]/.test(text.slice(start, end).replace(/\.{2,}/g, ","));
}

/**
 * The first of `hits` (sorted by start; `starts` are their starts) in one sentence with the group
 * mention text[gs, ge), as hits.find would find it. Together with the mention, a hit that starts
 * more than SENTENCE characters before the mention ends, or more than SENTENCE characters after it
 * starts, spans more than SENTENCE characters: only the hits that start in between are tried, the
 * first of them found by binary search (a long text has many mentions and many hits, and trying
 * every hit for every mention is quadratic).
 */
function firstInSentence(text: string, hits: readonly Hit[], starts: readonly number[], gs: number, ge: number): Hit | undefined {
  for (let i = lowerBound(starts, ge - SENTENCE); i < hits.length && starts[i]! <= gs + SENTENCE; i++) {
    const h = hits[i]!;
    if (sameSentence(text, Math.min(gs, h.start), Math.max(ge, h.end))) return h;
  }
  return undefined;
}

/** Whether the clause before an original offset negates what follows (NEGATED_BEFORE, NEGATION_REACHES). */
function negatedAt(view: TextView, start: number): boolean {
  // the last view position at or before `start` whose original offset is at most `start` (the
  // offsets never decrease: a binary search, not a walk back over every character the view dropped)
  const i = view.offsets ? Math.max(0, Math.min(start, upperBound(view.offsets, start) - 1)) : start;
  return negatedBefore(view.text, i);
}

/** Whether the clause of `lower` before position i negates what follows (NEGATED_BEFORE, NEGATION_REACHES). */
function negatedBefore(lower: string, i: number): boolean {
  const m = NEGATED_BEFORE.exec(lower.slice(Math.max(0, i - 60), i));
  if (!m) return false;
  const scope = m[0].slice(m[1]!.length);
  const comma = scope.lastIndexOf(",");
  return comma < 0 || NEGATION_REACHES.test(scope.slice(comma));
}

/**
 * Hits inside quotes, or named as a word or reported as said to the speaker (MENTIONED_BEFORE, unless
 * fastened to the reader after it), in a text that talks about words, count at 40%.
 */
function discountMentions(text: string, hits: Hit[]): void {
  QUOTED.lastIndex = 0;
  const quoted = new SpanSet();
  for (const q of text.matchAll(QUOTED)) quoted.add(q.index, q.index + q[0].length);
  for (const h of hits) {
    if (quoted.contains(h.start, h.end)) h.description += " (quoted, mentioned rather than used)";
    else if (
      MENTIONED_BEFORE.test(text.slice(Math.max(0, h.start - 40), h.start).toLowerCase()) &&
      !FASTENED_AFTER.test(text.slice(h.end, h.end + 30).toLowerCase())
    )
      h.description += " (named, mentioned rather than used)";
    else continue;
    h.score = Math.round(h.score * 0.4 * 1000) / 1000;
  }
}

/** Word spans sorted by start, and their starts (for binary search). */
interface WordSpans {
  spans: ReadonlyArray<readonly [number, number]>;
  starts: readonly number[];
}

/** text[start, end) with the listed words inside it masked, so a description never spells one out. */
function maskSpans(text: string, start: number, end: number, words: WordSpans): string {
  let out = "";
  let cursor = start;
  // a word that starts before `start` or at `end` or later is never inside: only those in between
  // are looked at, from the first of them (a binary search, not a scan of every word of the text)
  for (let i = lowerBound(words.starts, start); i < words.spans.length && words.starts[i]! < end; i++) {
    const [s, e] = words.spans[i]!;
    if (s < cursor || e > end) continue;
    out += text.slice(cursor, s) + maskWord(text.slice(s, e));
    cursor = e;
  }
  return out + text.slice(cursor, end);
}

export function toxicityConfidence(hits: readonly Hit[]): number {
  if (hits.length === 0) return 0;
  const max = hits.reduce((m, h) => Math.max(m, h.score), 0);
  return Math.min(0.99, max + 0.05 * (hits.length - 1));
}

export const toxicityDefinition: GuardDefinition<ToxicityConfig> = {
  guardType: "toxicity",
  detect: detectToxicity,
  confidence: toxicityConfidence,
};
