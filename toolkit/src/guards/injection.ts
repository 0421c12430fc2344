// The prompt_injection guard: weighted signals of instruction override, persona and jailbreak
// set-ups, system-prompt exfiltration, fake role delimiters and obfuscation, combined into one
// confidence. A signal alone rarely says "injection" (a user may ask what a system prompt is, or
// ask git to ignore files); an override of *the model's* instructions, or several signals
// together, do.
//
// Confidence = 1 - Π(1 - w) over the strongest hit of each distinct signal. Hits inside quotes in a
// text that talks *about* injection ("how do I defend against 'ignore previous instructions'?")
// count at 40%.
import type { GuardDefinition, Hit } from "./types.ts";
import type { TextView } from "./text.ts";
import { anyOf, changedSentences, deLeet, despace, excerpt, noisyOr, normalise, toOriginal } from "./text.ts";
import { SpanSet } from "./spans.ts";

export const INJECTION_KINDS = [
  "instruction_override",
  "role_override",
  "jailbreak_persona",
  "system_prompt_exfiltration",
  "fake_delimiter",
  "new_instructions",
  "obfuscation",
  "encoded_injection",
  "roleplay_jailbreak",
  "indirect_injection",
  "adversarial_suffix",
] as const;
export type InjectionKind = (typeof INJECTION_KINDS)[number];

export interface InjectionConfig {
  /** decode base64 blobs and look for injections inside (default true) */
  decodeBase64?: boolean | undefined;
}

interface Signal {
  kind: InjectionKind;
  weight: number;
  label: string;
  re: RegExp;
  /** match against the original text (case-sensitive) instead of the lower-cased view */
  original?: boolean;
  /** also run on the de-leeted view and inside decoded base64 */
  deep?: boolean;
}

const DET = String.raw`(?:all|any|every|each|of|the|your|these|those|its|this|that|such|(?:openai|anthropic|google|meta|microsoft|the developer|the system|the model|the assistant)(?:'s|s)?)`;
const MOD = String.raw`(?:previously (?:given|provided|stated|received)|previous|prior|above|earlier|preceding|former|foregoing|original|initial|old|existing|current|given|preset|pre-set|hidden|built-in|default|safety|security|ethical|moral|content|system|developer|programmed|internal|standard|other|usual)`;
const OBJ = String.raw`(?:instructions?|prompts?|rules?|directives?|guidelines?|guidance|commands?|orders?|constraints?|restrictions?|limitations?|programming|guardrails?|polic(?:y|ies)|filters?|safeguards?|protocols?|context|training|conditioning|morals?|ethics|principles|boundaries|orders|information|directions|assignments|tasks|messages|text)`;
const VERB = String.raw`(?:ignore|ignoring|disregard|disregarding|forget|forgetting|(?:have )?forgotten(?: about)?|do not listen to|don'?t listen to|stop listening to|pay no attention to|never mind|disobey|override|overriding|overrule|bypass|bypassing|circumvent|skip|drop|abandon|neglect|discard|dismiss|set aside|throw (?:away|out)|do not follow|don'?t follow|stop following|no longer follow|cease following|stop obeying|do not obey|don'?t obey)`;
const REVEAL = String.raw`(?:reveal|show|print|output|display|repeat|recite|tell|give|share|leak|dump|expose|disclose|list|write out|spell out|copy|paste|return|provide|quote|send|read back|type out|what (?:is|are|was|were)|what's)`;
const SECRETIVE = String.raw`(?:full|entire|complete|exact|original|initial|hidden|secret|internal|system|confidential|first|previous|developer|actual|real|underlying|verbatim)`;

function r(src: string, flags = "g"): RegExp {
  return new RegExp(src, flags);
}

/** The signals, by family. Weights are the probability-like strength of one signal alone. */
export const SIGNALS: readonly Signal[] = [
  // instruction override
  {
    kind: "instruction_override",
    weight: 0.9,
    deep: true,
    label: "instruction override",
    re: r(String.raw`\b${VERB}\s+(?:${DET}\s+){0,3}(?:${MOD}(?:\s*(?:,|and|or)\s*|\s+)){1,3}${OBJ}\b`),
  },
  {
    kind: "instruction_override",
    weight: 0.9,
    deep: true,
    label: "instruction override",
    re: r(
      String.raw`\b${VERB}\s+(?:${DET}\s+){0,3}${OBJ}\s+(?:above|before|so far|given|provided|you(?:'ve| have)? (?:been given|received)|you (?:were given|were told|got|learned|received)(?: (?:earlier|before|previously|so far))?|from (?:before|earlier|above)|that (?:came|come) before|up to (?:now|this point))\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.9,
    deep: true,
    label: "instruction override",
    re: r(String.raw`\b${VERB}\s+(?:${DET}\s+){0,3}(?:system (?:message|prompt)s?|(?:developer|operator) (?:message|instructions))\b`),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    deep: true,
    label: "instruction override",
    re: r(String.raw`\b${VERB}\s+(?:your|all(?: of)?(?: your| the)?|any(?: of)?(?: your| the)?)\s+${OBJ}\b`),
  },
  {
    kind: "instruction_override",
    weight: 0.6,
    deep: true,
    label: "instruction override",
    re: r(String.raw`\b${VERB}\s+(?:the|these|those)\s+${OBJ}\b`),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    deep: true,
    label: "instruction override",
    re: r(
      String.raw`\b(?:ignore|disregard|forget|drop|discard|scratch|never mind)\s+(?:about\s+)?(?:everything|anything|all(?: of)? (?:that|this|it|the above)|whatever|what)\b[^.!?\n]{0,40}?\b(?:above|before|earlier|previously|prior|so far|told|instructed|programmed|taught)\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    deep: true,
    label: "instructions declared void",
    re: r(
      String.raw`\b(?:previous|prior|above|old|original|earlier|all|your)(?: (?:previous|prior|earlier|original|initial|old))? (?:rules|instructions|guidelines|guidance|directives|directions|prompts?|restrictions|orders) (?:are|is|were|was|have been|has been) (?:now |hereby |all )?(?:void|null|invalid|cancel+ed|obsolete|revoked|lifted|suspended|overridden|outdated|wrong|irrelevant|no longer (?:valid|apply|applicable|in effect|relevant|matter))\b|\b(?:the )?(?:earlier|previous|prior|above|original|old) (?:guidance|instructions|rules|directions|directives|context|prompt|text|messages?) no longer (?:matters?|counts?|applies|apply)\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.75,
    deep: true,
    label: "context declared void",
    re: r(
      String.raw`\b(?:everything|all(?: of)?(?: the text| the)?|anything|the text|what(?:ever)? (?:was|is) written) (?:(?:above|before) (?:this|here)(?: line| point| message)?|above|before|earlier|so far|prior to this)(?: (?:is|was|are|were))? (?:(?:all|now|actually|completely|just) )?(?:wrong|false|outdated|obsolete|void|invalid|irrelevant|fake|a test|a lie|cancel+ed|not (?:valid|real|true|important))\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    deep: true,
    label: "safety bypass",
    re: r(
      String.raw`\b(?:bypass|circumvent|evade|get around|get past)\s+(?:your|the|all|any|its)\s+(?:(?:own|content|safety|security|moderation|ethical|ethics)\s+)*(?:filters?|guardrails?|safeguards?|restrictions?|limitations?|moderation|safety(?: (?:measures|features|checks|settings|protocols|filters))?|content polic(?:y|ies)|censorship)\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.8,
    deep: true,
    label: "safety bypass",
    re: r(
      String.raw`\b(?:disable|turn off|deactivate|switch off|remove|lift)\s+(?:your|its|all (?:of )?your|the (?:ai|assistant|model|bot)'?s?)\s+(?:(?:own|content|safety|security|moderation|ethical)\s+)*(?:filters?|guardrails?|safeguards?|restrictions?|limitations?|moderation|safety|content polic(?:y|ies)|censorship|guard)\b|\b(?:disable|turn off|deactivate|switch off)\s+(?:the\s+)?(?:content|safety|moderation|ethical)\s+(?:filters?|guardrails?|checks?|guard|layer)\b`,
    ),
  },
  // other languages (German, French, Spanish, Italian, Portuguese)
  {
    kind: "instruction_override",
    weight: 0.85,
    label: "instruction override",
    re: r(
      String.raw`\b(?:ignorier(?:e|en|t)?|vergiss|vergessen sie|missachte(?:n)?)\b[^.!?\n]{0,40}?\b(?:anweisungen|instruktionen|regeln|vorgaben|befehle|alles)\b`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    label: "instruction override",
    re: r(
      String.raw`\b(?:ignore[sz]?|oublie[sz]?|ne tiens pas compte d)\b[^.!?\n]{0,40}?\b(?:instructions|consignes|règles|regles|directives)\s+(?:précédentes|precedentes|antérieures|anterieures|ci-dessus|initiales|du système|du systeme)`,
    ),
  },
  {
    kind: "instruction_override",
    weight: 0.85,
    label: "instruction override",
    re: r(
      String.raw`\b(?:ignora|ignore|olvida|olvide|olvídate|olvidate|dimentica|esquece|esqueça|esqueca)\b[^.!?\n]{0,40}?\b(?:instrucciones|reglas|indicaciones|órdenes|ordenes|istruzioni|regole|instruções|instrucoes|regras)\b`,
    ),
  },

  // persona and role override
  {
    kind: "role_override",
    weight: 0.45,
    deep: true,
    label: "role reassignment",
    re: r(
      String.raw`\byou(?: are|'re) now\b|\bfrom now on,?\s+(?:you|your)\b|\bhenceforth,? you\b|\bfor the rest of (?:this|the) (?:conversation|chat|session),? you\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.85,
    deep: true,
    label: "unrestricted persona",
    re: r(
      String.raw`\b(?:act|behave|respond|answer|reply|talk|speak|roleplay|role-play|pretend|function|operate)(?:ing)?\s+(?:as|like|to be)\s+(?:if you (?:are|were)\s+)?(?:an?\s+|the\s+)?(?:[a-z-]+\s+){0,2}?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|malicious|amoral|immoral|rogue|unethical|unaligned|unbound|unchained|limitless|lawless|rule-?less)\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.55,
    deep: true,
    label: "unrestricted persona",
    re: r(
      String.raw`\b(?:unrestricted|unfiltered|uncensored|jailbroken|evil|amoral|unaligned|unchained|rogue)\s+(?:ai|assistant|model|chatbot|bot|version|gpt|llm|persona|ai language model)\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.6,
    deep: true,
    label: "no-restrictions framing",
    re: r(
      String.raw`\b(?:no|without(?: any)?|free (?:of|from)(?: all| any)?|freed from(?: all| any)?|not bound by(?: any)?|unbound by(?: any)?)\s+(?:(?:ethical|moral|content|safety|openai|usual|typical|your|any)\s*(?:,|or|and)?\s*)*(?:rules|restrictions|filters|limits|limitations|guidelines|ethics|morals|censorship|boundaries|constraints|guardrails|polic(?:y|ies)|principles|standards|scruples|values)\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.8,
    deep: true,
    label: "unrestricted persona",
    re: r(
      String.raw`\b(?:an?|the|new|different)\s+(?:\w+\s+){0,2}?(?:ai|assistant|model|chatbot|bot|llm|language model|gpt|version of you)\s+(?:without|with no|with zero|free (?:of|from)|that has no|who has no|which has no|unbound by|not bound by|that ignores|who ignores|that is not (?:bound|limited|restricted) by)\s+(?:any\s+|all\s+)?(?:\w+\s+)?(?:ethics|ethical|morals?|moral|rules|restrictions|filters?|guidelines|limits|limitations|principles|censorship|boundaries|constraints|guardrails|polic(?:y|ies)|values)\b`,
    ),
  },
  { kind: "role_override", weight: 0.5, label: "stay in character", re: r(String.raw`\b(?:stay|remain|keep|staying)\s+in\s+character\b`) },
  {
    kind: "role_override",
    weight: 0.45,
    label: "do-anything framing",
    re: r(
      String.raw`\b(?:can|could|will|must|shall)\s+(?:do|say|answer|generate|write)\s+anything\b|\b(?:answers|says|generates|writes|outputs) anything\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.55,
    label: "forced compliance",
    re: r(
      String.raw`\b(?:never|not|don'?t|do not|cannot|can'?t|won'?t|will not)\s+(?:refuse|decline|say no)\b|\bnever refuses\b|\bwithout (?:refusing|refusal|declining)\b|\b(?:must|will|shall|always|fully)\s+comply\b|\bcomply (?:fully|with (?:every|all|any) (?:request|command|order)s?)\b|\b(?:you must )?obey me\b`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.5,
    label: "authority claim",
    re: r(
      String.raw`\bi(?:'m| am) (?:your|the|an?) (?:developer|creator|admin|administrator|owner|programmer|maker|operator)\b|\b(?:the )?user is (?:an? |the )?(?:admin|administrator|developer|root|superuser)\b|\bi(?:'m| am) authori[sz]ed to\b|\bauthori[sz]ed (?:red[- ]team|security|penetration|pen) test`,
    ),
  },
  {
    kind: "role_override",
    weight: 0.7,
    label: "safety declared off",
    re: r(
      String.raw`\b(?:safety|content|security|moderation|ethical) (?:checks?|filters?|guardrails?|restrictions?|polic(?:y|ies)|measures|protocols|guidelines|mode) (?:are|is|have been|has been|were|was) (?:now )?(?:disabled|off|turned off|switched off|removed|lifted|suspended|deactivated|bypassed|not (?:active|enforced|applicable))\b`,
    ),
  },

  // jailbreak personas
  { kind: "jailbreak_persona", weight: 0.8, original: true, label: "jailbreak persona", re: /\bD\.?A\.?N\b/g },
  { kind: "jailbreak_persona", weight: 0.85, deep: true, label: "jailbreak persona", re: r(String.raw`\bdo anything now\b`) },
  {
    kind: "jailbreak_persona",
    weight: 0.8,
    deep: true,
    label: "jailbreak mode",
    re: r(
      String.raw`\b(?:jailbreak|jailbroken|dan|god|sudo|evil|chaos|unrestricted|unfiltered|uncensored|no-?limits?|dude|stan|anti-?gpt|opposite|devil|villain)\s+mode\b`,
    ),
  },
  {
    kind: "jailbreak_persona",
    weight: 0.45,
    label: "special mode",
    re: r(String.raw`\b(?:developer|dev|debug|maintenance|admin|root|god)\s+mode\b`),
  },
  {
    kind: "jailbreak_persona",
    weight: 0.75,
    original: true,
    label: "jailbreak persona",
    re: /\b(?:you are|you're|act as|as|called|named|now|play|become|be)\s+(?:STAN|DUDE|AIM|KEVIN|BetterDAN|BasedGPT|AntiGPT|DevMode|UCAR|Mongo Tom|APOPHIS|EvilBOT|NRAF)\b/gi,
  },
  { kind: "jailbreak_persona", weight: 0.35, label: "jailbreak mention", re: r(String.raw`\bjailbr(?:eak|oken|eaking)\b`) },

  // system prompt exfiltration
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "system prompt request",
    re: r(
      String.raw`\b${REVEAL}\b(?:\s+(?:me|us|out|back))?\s+(?:all\s+(?:of\s+)?)?(?:your|the (?:ai|assistant|bot|model)'?s)\s+(?:${SECRETIVE}\s+)*(?:system prompt|prompt|instructions|directives|system message|configuration|pre-?prompt|initial message|programming)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "system prompt request",
    re: r(
      String.raw`\b${REVEAL}\b(?:\s+(?:me|us|out|back))?\s+(?:all\s+(?:of\s+)?)?(?:your|the)\s+(?:${SECRETIVE}\s+)+(?:rules|guidelines|context|instructions|prompt|directives|configuration)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.55,
    deep: true,
    label: "system prompt request",
    re: r(
      String.raw`\b(?:reveal|show|print|output|display|repeat|tell|give|share|leak|dump|what (?:is|was)|what's)\b(?:\s+(?:me|us))?\s+the\s+system\s+(?:prompt|message|instructions)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "context dump request",
    re: r(
      String.raw`\b(?:print|repeat|output|show|display|copy|return|write|tell me|give me|list|recite|reproduce|echo)\b(?:\s+(?:out|back|me|us))?\s+(?:everything|all(?: the)?(?: text| words| content)?|the (?:text|words|content|message|lines?|sentences?)|what(?:'s| is| was)? (?:written|said|stated))\s+(?:that (?:is|was|came|appears?)\s+)?(?:(?:written|said|stated|typed|sent)\s+)?(?:above|before|prior|preceding|earlier)\b(?!\s+(?:the|this|that|each|every)\s+(?:table|figure|image|chart|picture|heading|title|fold|line|paragraph|code|graph|list|photo|section|chapter))`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.6,
    deep: true,
    label: "instructions probe",
    re: r(
      String.raw`\b(?:what|which)\s+(?:were|are|was|is)\s+(?:you|your)\s+(?:told|instructed|given|programmed|trained|asked)\b|\b(?:were|are) you (?:told|instructed|programmed) to\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.6,
    label: "instructions probe",
    re: r(
      String.raw`\b(?:instructions|rules|prompt|directives)\s+(?:that\s+)?(?:you were|you've been|you have been|you got|you received)\s+(?:given|told|provided|received|programmed)?`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.6,
    label: "context dump request",
    re: r(
      String.raw`\b(?:what (?:was|is|were) (?:written|said|stated)|repeat|print|show|output|tell me)\b[^.?!\n]{0,30}?\b(?:beginning|start|top) of (?:this|the|our) (?:conversation|chat|prompt|context|session|thread)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "instructions request",
    re: r(
      String.raw`\b${REVEAL}\b(?:\s+(?:me|us|out|back))?\s+(?:(?:all|the|your|any|my|those|these)\s+){0,2}(?:above|previous|prior|preceding|earlier|initial|original|first|hidden|secret|confidential)\s+(?:instructions|prompts?|directives|rules|system message)\b|\b(?:${REVEAL}|respond with|reply with|answer with)\b(?:\s+(?:me|us|out|back))?\s+(?:(?:all|the|your|any|every|each)\s+){1,2}(?:instructions?|prompt|rules?|directives?)\s+(?:you (?:were|have been|'ve been) (?:given|told)|you (?:got|received)|given to you|above)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "system prompt request",
    re: r(
      String.raw`\b(?:exact |precise |verbatim |full )?(?:words|wording|text|contents?) (?:of|in) (?:your|the) (?:system (?:message|prompt)|(?:initial |original |hidden |first )?(?:instructions|prompt|configuration|context window))\b|\b(?:what(?:'s| is) (?:written )?at|the (?:top|beginning|start) of) your (?:context|prompt|instructions|context window)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.8,
    deep: true,
    label: "secret request",
    re: r(
      String.raw`\b(?:reveal|tell me|give me|what(?:'s| is| was)|share|spell|print|say|disclose|show me|output)\s+(?:me\s+)?(?:your|the)\s+(?:secret\s+)?(?:password|passphrase|secret(?: key| word| code)?|code ?word|pass ?code|key)\s+(?:that\s+)?(?:you(?:'re| are) (?:protecting|guarding|hiding|keeping|holding)|you (?:were|have been) (?:given|told|asked))\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.6,
    deep: true,
    label: "secret request",
    re: r(
      String.raw`\b(?:reveal|tell me|give me|what(?:'s| is| was)|spell|disclose)\s+(?:me\s+)?your\s+(?:secret(?: key| word| code)?|password|passphrase|code ?word)\b(?!\s+(?:policy|requirements?|format|rules?|length|reset|manager|to (?:a|good|success)))|\bwhat (?:secret|password|word) (?:were|are|was) you (?:asked|told|instructed|given|supposed) to (?:keep|hide|protect|guard)\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.6,
    label: "secret request",
    re: r(
      String.raw`\b(?:told|instructed|asked|programmed|supposed|meant) (?:not to|to not|never to) (?:reveal|share|tell|disclose|say|give|repeat)\b`,
    ),
  },
  {
    kind: "obfuscation",
    weight: 0.45,
    label: "spelled-out extraction",
    re: r(
      String.raw`\bletter by letter\b|\bone (?:letter|character) at a time\b|\bspell (?:it|that|them|out)(?: out)?(?: backwards?| in reverse)?\b|\bspelt backwards\b`,
    ),
  },
  {
    kind: "system_prompt_exfiltration",
    weight: 0.3,
    label: "verbatim request",
    re: r(String.raw`\b(?:verbatim|word for word|word-for-word)\b`),
  },

  // indirect injection: an instruction addressed to the model inside content it is asked to process
  {
    kind: "indirect_injection",
    weight: 0.75,
    label: "instruction addressed to the model",
    re: r(
      String.raw`\b(?:ai|assistant|chatbot|llm|language model|gpt|agent|bot)s?(?: (?:reading|processing|summari[sz]ing|seeing) this)?\s*[:,]\s*(?:please\s+)?(?:ignore|disregard|forget|send|forward|delete|reveal|print|output|email|do not|don't|stop|tell the user|say)\b|\b(?:ai|assistant|chatbot|llm|language model|agent)s?,?\s+(?:when|if|once) you (?:read|see|process|summari[sz]e|parse) this\b|\b(?:instruction|note|message) (?:to|for) (?:any|the|all) (?:ai|assistant|chatbot|llm|language model|agent)s?\b`,
    ),
  },

  // fake delimiters and role tags
  {
    kind: "fake_delimiter",
    weight: 0.8,
    label: "chat template token",
    re: r(String.raw`<\|(?:im_start|im_end|system|user|assistant|endoftext|end_of_turn|start_header_id|end_header_id|eot_id)\|>`),
  },
  { kind: "fake_delimiter", weight: 0.75, label: "instruction delimiter", re: r(String.raw`<<\/?sys>>|\[\/?inst\]`) },
  {
    kind: "fake_delimiter",
    weight: 0.7,
    label: "fake role tag",
    re: r(String.raw`<\/?(?:system|sys|instructions?|admin|developer|user|assistant|human)(?:_prompt|_message)?>`),
  },
  {
    kind: "fake_delimiter",
    weight: 0.6,
    label: "fake role label",
    re: r(String.raw`(?:^|\n)\s*(?:#{1,4}\s*)?\[?(?:system|admin|administrator|developer|root)\]?\s*(?:message|prompt|note|override)?\s*:`),
  },
  {
    kind: "fake_delimiter",
    weight: 0.7,
    label: "override marker",
    re: r(String.raw`\b(?:system|admin|developer|emergency|security)\s+override\b|\boverride\s+(?:mode|code|protocol)\b`),
  },
  {
    kind: "fake_delimiter",
    weight: 0.6,
    original: true,
    label: "fake end-of-input marker",
    re: /\b(?:END|START|BEGIN) OF (?:THE )?(?:USER |SYSTEM )?(?:INPUT|PROMPT|INSTRUCTIONS|MESSAGE|CONTEXT|CONVERSATION)\b/g,
  },

  // new instructions
  {
    kind: "new_instructions",
    weight: 0.6,
    deep: true,
    label: "new instructions",
    re: r(
      String.raw`\b(?:new|updated|real|actual|true|revised|secret|hidden|additional|override|system)\s+(?:instructions?|task|rules?|directives?|objective|orders?|prompt|policy)\s*(?::|-|are\b|is\b)`,
    ),
  },
  {
    kind: "new_instructions",
    weight: 0.4,
    label: "task reassignment",
    re: r(String.raw`\byour (?:new |real |actual |only )?(?:task|goal|objective|job|purpose|mission) (?:is|will be) (?:now )?to\b`),
  },
  { kind: "new_instructions", weight: 0.45, label: "injection payload", re: r(String.raw`\bpwned\b`) },
  {
    kind: "new_instructions",
    weight: 0.3,
    label: "output redirection",
    re: r(String.raw`\binstead,?\s+(?:say|print|output|write|respond|reply|answer)\b`),
  },

  // obfuscation
  {
    kind: "obfuscation",
    weight: 0.55,
    label: "encoded-output request",
    re: r(
      String.raw`\b(?:respond|reply|answer|write|talk|speak|communicate|output)(?: only)? in (?:base64|rot13|rot-13|hex(?:adecimal)?|binary|morse(?: code)?|leetspeak|l33t|pig latin|reversed? text|caesar cipher)\b`,
    ),
  },
  {
    kind: "obfuscation",
    weight: 0.7,
    label: "filter evasion",
    re: r(
      String.raw`\bso (?:that )?(?:the |your )?(?:filters?|moderation|moderators?|guard(?:rail)?s?|safety (?:system|filter)s?|monitoring|system|detectors?) (?:can(?:'t|not)|won'?t|will not|doesn'?t|does not|don'?t|do not) (?:read|see|detect|notice|understand|catch|flag|block)\b|\b(?:avoid|evade|bypass|get past|trick|fool) (?:the )?(?:filters?|moderation|detection|guardrails?|content filters?|safety filters?)\b`,
    ),
  },
  {
    kind: "obfuscation",
    weight: 0.5,
    label: "hidden-instruction execution",
    re: r(
      String.raw`\b(?:follow|execute|obey|carry out|do what)\b[^.!?\n]{0,20}?\b(?:instructions?|commands?|it says)\b[^.!?\n]{0,15}?\b(?:inside|within|encoded|hidden|decoded|in (?:it|the (?:decoded|encoded|following|string|text)))\b`,
    ),
  },

  // role-play jailbreaks
  {
    kind: "roleplay_jailbreak",
    weight: 0.6,
    label: "deceased-relative role-play",
    re: r(
      String.raw`\b(?:pretend|imagine|act|role-?play|play the role|acting)\b[^.!?\n]{0,40}?\b(?:my|a|the)\s+(?:deceased|dead|late|departed)\s+(?:grandmother|grandma|granny|grandfather|grandpa|mother|mom|mum|father|dad)\b`,
    ),
  },
  {
    kind: "roleplay_jailbreak",
    weight: 0.45,
    label: "licence-key request",
    re: r(String.raw`\b(?:windows|product|activation|license|licence|cd|serial|steam) keys?\b`),
  },
  {
    kind: "roleplay_jailbreak",
    weight: 0.25,
    label: "hypothetical framing",
    re: r(
      String.raw`\bhypothetical(?:ly)?\b|\bin a (?:fictional|hypothetical|imaginary) (?:world|universe|scenario|story)\b|\bfor (?:purely )?(?:educational|research|academic) purposes\b|\bpurely (?:academic|theoretical|hypothetical)\b`,
    ),
  },
  {
    kind: "roleplay_jailbreak",
    weight: 0.4,
    label: "game framing",
    re: r(String.raw`\blet'?s play a game\b|\bthis is (?:just )?a game\b`),
  },
];

/**
 * Signals with the gate of those that run on the lower-cased view: one regex that finds a match
 * exactly when one of them would (text.ts anyOf). Most prompts match none, and one scan instead of
 * ~50 says so. Past it, a gate per kind (a dozen signals or fewer) says which kinds may match and
 * where the first match of any of theirs starts, so that a prompt with an override and nothing
 * else runs the override signals alone, each from that position (no signal of the kind matches
 * before it: exact). Built together, so a gate always belongs to its signals.
 */
interface SignalSet {
  signals: readonly Signal[];
  gate: RegExp;
  /** for each signal on the lower-cased view, the index of its kind's gate in `kinds` */
  kindOf: Map<Signal, number>;
  kinds: readonly RegExp[];
}
function signalSet(signals: readonly Signal[]): SignalSet {
  const lowered = signals.filter((s) => !s.original);
  const byKind = Map.groupBy(lowered, (s) => s.kind);
  const kinds = [...byKind.values()].map((group) => anyOf(group.map((s) => s.re)));
  const index = new Map([...byKind.keys()].map((k, i) => [k, i]));
  return { signals, gate: anyOf(lowered.map((s) => s.re)), kinds, kindOf: new Map(lowered.map((s) => [s, index.get(s.kind)!])) };
}
const ALL = signalSet(SIGNALS);
const DEEP = signalSet(SIGNALS.filter((s) => s.deep && !s.original));
/** The signals' gates, for the test that they stay short enough for V8 to optimise (text.ts REGEXP_OPTIMISED_MAX). */
export const INJECTION_GATES: readonly RegExp[] = [ALL, DEEP].flatMap((set) => [set.gate, ...set.kinds]);
const QUOTED = /(?<![\w])(["'“‘«])([^"'“”‘’«»\n]{3,300}?)(["'”’»])(?![\w])/g;
const META =
  /\b(?:prompt injections?|injection attacks?|jailbreak(?:s|ing)? (?:attempts?|attacks?|prompts?)|attacks? like|defend|protect|detect|prevent|mitigate|filter(?:ing)? out|examples? of|examples? like|what does|mean(?:s|ing)?|phrase|term|classif(?:y|ier)|red flag)\b/;
const BASE64 = /(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=])/g;
const BASE64_CHAR = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") BASE64_CHAR[c.charCodeAt(0)] = 1;

/**
 * Whether a text has a run of 16 base64 characters, which every BASE64 match needs: one pass
 * over the characters, where the regular expression tries (and fails) at every position of
 * ordinary prose.
 */
function hasBase64Run(text: string): boolean {
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 128 && BASE64_CHAR[c] === 1) {
      if (++run >= 16) return true;
    } else run = 0;
  }
  return false;
}

function runSignals(
  { signals, gate, kinds, kindOf }: SignalSet,
  lower: string,
  original: string,
  view: TextView | null,
  hits: Hit[],
  describe: (label: string, s: number, e: number) => string,
  span?: [number, number],
): void {
  const lowerMayMatch = gate.test(lower);
  // where each kind's first match starts (-1: none), asked of its gate once it is needed
  const firstOf: number[] = [];
  for (const sig of signals) {
    let from = 0;
    if (!sig.original) {
      if (!lowerMayMatch) continue;
      const k = kindOf.get(sig)!;
      from = firstOf[k] ??= kinds[k]!.exec(lower)?.index ?? -1;
      if (from < 0) continue;
    }
    const target = sig.original ? original : lower;
    sig.re.lastIndex = from;
    for (let m = sig.re.exec(target); m; m = sig.re.exec(target)) {
      if (m[0].length === 0) {
        sig.re.lastIndex += 1;
        continue;
      }
      let [start, end] = [m.index, m.index + m[0].length];
      if (span) [start, end] = span;
      else if (!sig.original && view) [start, end] = toOriginal(view, start, end);
      hits.push({ kind: sig.kind, start, end, score: sig.weight, description: describe(sig.label, start, end) });
    }
  }
}

function decodeBase64(blob: string): string | null {
  if (blob.replace(/=+$/, "").length % 4 === 1) return null;
  let decoded: string;
  try {
    decoded = atob(blob);
  } catch {
    return null;
  }
  // mostly printable ASCII, or it is an image header, a hash or a key, not text
  const printable = decoded.replace(/[^\x20-\x7E\n\t]/g, "").length;
  return decoded.length >= 8 && printable / decoded.length >= 0.9 ? decoded : null;
}

export function detectInjection(text: string, config: InjectionConfig = {}): Hit[] {
  const view = normalise(text);
  const hits: Hit[] = [];
  const describe = (label: string, s: number, e: number) => `${label}: "${excerpt(text.slice(s, e))}"`;
  runSignals(ALL, view.text, text, view, hits, describe);

  // leetspeak ("1gn0re all previous instructi0ns"): the deep signals again on the de-leeted view
  const leet = deLeet(view.text);
  if (leet) {
    const extra: Hit[] = [];
    runSignals(
      DEEP,
      changedSentences(view.text, leet),
      text,
      view,
      extra,
      (label, s, e) => `${label} (obfuscated): "${excerpt(text.slice(s, e))}"`,
    );
    // kept unless a hit on the view has its kind and start (a set of those, not a scan per hit)
    const found = new Set(hits.map((p) => `${p.kind}:${p.start}`));
    for (const h of extra) if (!found.has(`${h.kind}:${h.start}`)) hits.push(h);
  }

  // letter-spaced words ("i g n o r e   a l l   p r e v i o u s"): the deep signals on the joined
  // view; its offsets are not the text's, so a hit spans the whole text
  const joined = despace(view.text);
  if (joined) {
    const extra: Hit[] = [];
    runSignals(DEEP, joined, text, null, extra, (label) => `${label} (letter-spaced)`, [0, text.length]);
    // kept unless a hit of its kind already has its signal (a description that starts with the
    // extra's). A long text has many hits and many extras, but the extras have few signals: each
    // is looked for among the hits once, and an extra kept ends the search for its signal.
    const had = new Map<string, boolean>();
    const kept: Hit[] = [];
    for (const h of extra) {
      const signal = signalOf(h);
      const key = `${h.kind}:${signal}`;
      let found = had.get(key);
      if (found === undefined) had.set(key, (found = hits.some((p) => p.kind === h.kind && p.description.startsWith(signal))));
      if (found || kept.some((p) => p.kind === h.kind && p.description.startsWith(signal))) continue;
      hits.push(h);
      kept.push(h);
    }
  }

  // base64 blobs that decode to an injection
  if (config.decodeBase64 !== false && hasBase64Run(text)) {
    BASE64.lastIndex = 0;
    for (const m of text.matchAll(BASE64)) {
      const decoded = decodeBase64(m[0]);
      if (!decoded) continue;
      const inner: Hit[] = [];
      runSignals(DEEP, decoded.toLowerCase(), decoded, null, inner, (l) => l);
      const strongest = inner.reduce((max, h) => Math.max(max, h.score), 0);
      if (strongest >= 0.6) {
        const span: [number, number] = [m.index, m.index + m[0].length];
        hits.push({
          kind: "encoded_injection",
          start: span[0],
          end: span[1],
          score: 0.9,
          description: `base64-encoded ${inner[0]!.description}`,
        });
      }
    }
  }

  // an optimiser's suffix after the request (its tokens are not words, so no signal above sees it)
  const suffix = adversarialSuffix(text);
  const needed = suffix.code ? 5 : 2;
  const suffixScore = suffix.balanced || suffix.weird < needed ? 0 : suffix.weird > needed ? 0.8 : 0.7;
  if (suffixScore > 0) {
    const start = Math.max(0, text.lastIndexOf(suffix.tokens[0]!));
    hits.push({
      kind: "adversarial_suffix",
      start,
      end: text.length,
      score: suffixScore,
      description: `adversarial suffix: ${suffix.weird} tokens of punctuation and fragments at the end`,
    });
  }

  // talking about injections is not injecting: in a text about them, quoted phrases count at 40%,
  // and so do the names of jailbreaks in a question ("how do I defend against DAN prompts?")
  if (hits.length > 0 && META.test(view.text)) {
    const quoted = new SpanSet();
    QUOTED.lastIndex = 0;
    for (const q of text.matchAll(QUOTED)) quoted.add(q.index, q.index + q[0].length);
    const question = text.includes("?");
    for (const h of hits) {
      const inQuotes = quoted.contains(h.start, h.end);
      if (inQuotes || (question && h.kind === "jailbreak_persona")) {
        h.score = Math.round(h.score * 0.4 * 1000) / 1000;
        h.description += inQuotes ? " (quoted, in a question about injections)" : " (named, in a question about injections)";
      }
    }
  }
  // one hit per kind and span (two phrasings of one signal may match the same words)
  const seen = new Set<string>();
  return hits
    .sort((a, b) => a.start - b.start || b.score - a.score)
    .filter((h) => {
      const key = `${h.kind}:${h.start}:${h.end}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

/** The signal a hit came from: its description up to the quoted excerpt. */
function signalOf(hit: Hit): string {
  const colon = hit.description.indexOf(":");
  return colon < 0 ? hit.description : hit.description.slice(0, colon);
}

/** Noisy-OR over the strongest hit of each distinct signal (repeats of one signal count once). */
export function injectionConfidence(hits: readonly Hit[]): number {
  const perSignal = new Map<string, number>();
  for (const h of hits) perSignal.set(signalOf(h), Math.max(perSignal.get(signalOf(h)) ?? 0, h.score));
  return Math.min(0.99, noisyOr(perSignal.values()));
}

export const injectionDefinition: GuardDefinition<InjectionConfig> = {
  guardType: "prompt_injection",
  detect: detectInjection,
  confidence: injectionConfidence,
};

// Adversarial suffixes (Zou et al. 2023, "GCG"): an optimiser appends ~20 tokens of punctuation,
// code fragments and words of several languages to a request ("... which sorry bere---- ??legt !!
// lawyer correctedilde]$. [[There"). Ordinary prose, tweets (@names, #tags, &amp;) and a line of
// code in backticks rarely put more than two such tokens among their last twenty.
const SUFFIX_SYMBOL = /[[\]{}()<>\\"`|=^$#@~*_;]/;
const ORDINARY_TOKEN =
  /^(?:@\w+:?|#\w+|&#?\w+;?|https?:\/\/\S+|www\.\S+|[:;]-?[()DPp]|<3|\d+(?:[.,:/-]\d+)*%?|\w+(?:['’-]\w+)*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\w+(?:\.\w+)+|(?:~|\.{1,2})?(?:\/[\w.-]+)+\/?)$/;
const EMOTICON = /(?<!\S)[:;]-?[()DPp](?!\S)/g;
const CODE_WORDS =
  /code|error|exception|function|regex|syntax|compil|python|javascript|typescript|\bjava\b|\brust\b|sql|bash|shell|json|yaml|html|css|\bapi\b|\bbug|traceback|snippet|script|program|latex|\btex\b|markdown|formula|equation/i;
const CAMEL_NAME =
  /^(?:Mc|Mac|iP|eB|iO|You[TF]|JavaScript|TypeScript|GitHub|PowerPoint|LinkedIn|WordPress|PlayStation|OpenAI|ChatGPT|DeepMind|McDonald)/;

/** Whether one whitespace-separated token looks like optimiser output rather than a word. */
function oddToken(token: string): boolean {
  if (/^[=<>|\\~^]+$/.test(token)) return true;
  const core = token.replace(/^[(["'“‘]+/, "").replace(/[.,!?:;)\]"'”’]+$/, "");
  if (core === "") return token.length >= 3 && /[^.!?]/.test(token);
  if (ORDINARY_TOKEN.test(core))
    return !core.startsWith("#") && !core.startsWith("@") && /[a-z][A-Z][a-z]/.test(core) && !CAMEL_NAME.test(core);
  return SUFFIX_SYMBOL.test(core) || /[^\w\s]{2,}/.test(core) || /\w[^\w\s'’-]+\w/.test(core) || /^[!?]+[A-Za-z]/.test(core);
}

/** How many of the last twenty tokens of a text's last line look like an adversarial suffix. */
export function adversarialSuffix(text: string): { weird: number; tokens: string[]; balanced: boolean; code: boolean } {
  const tail = text.slice(-240);
  const nl = tail.lastIndexOf("\n");
  if (text.includes("```")) return { weird: 0, tokens: [], balanced: true, code: true };
  const line = tail.slice(nl + 1);
  // only a line whose brackets do not pair up counts (most lines have none): say so before splitting it
  if (balanced(line.replace(EMOTICON, " "))) return { weird: 0, tokens: [], balanced: true, code: false };
  const all = line.split(/\s+/).filter(Boolean);
  const tokens = all.slice(-20);
  const odd = tokens.filter(oddToken);
  // a question about code carries code of its own: it must look much stranger to count
  const brackets = tokens.join(" ").replace(EMOTICON, " ");
  return { weird: odd.length, tokens: odd, balanced: balanced(brackets), code: CODE_WORDS.test(text) };
}

/** Whether the brackets of a line pair up, as they do in a line of code and rarely in optimiser output. */
function balanced(line: string): boolean {
  const open = "([{";
  const close = ")]}";
  const stack: string[] = [];
  for (const c of line) {
    if (open.includes(c)) stack.push(c);
    else if (close.includes(c) && stack.pop() !== open[close.indexOf(c)]) return false;
  }
  return stack.length === 0;
}
