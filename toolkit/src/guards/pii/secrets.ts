// Credentials: keys with a well-known prefix (cloud, source hosting, chat, payments, LLM vendors,
// Berth's own), PEM private keys, JSON Web Tokens, credentials in URLs, bearer tokens, and values
// assigned to words such as password, secret, token, api_key, "API key" or "network key".
// Descriptions name the kind and the public prefix at most, never the value.
import { isJWT } from "./validators.ts";
import type { Hit } from "../types.ts";
import { anyOf, charClasses, entropy, STOPWORDS } from "../text.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

interface KeyRule {
  name: string;
  re: RegExp;
  score: number;
  /** characters of the match that are a public prefix, shown in the description */
  prefix: number;
  /** extra check on the match */
  check?: (value: string) => boolean;
}

const mixed = (v: string) => /\d/.test(v) && /[A-Za-z]/.test(v);

/** Well-known key formats. Order matters: the first rule that claims a span wins. */
export const KEY_RULES: readonly KeyRule[] = [
  { name: "AWS access key ID", re: /\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b/g, score: 0.95, prefix: 4 },
  { name: "GitHub token", re: /\bgh[pousr]_[A-Za-z0-9]{36,255}\b/g, score: 0.97, prefix: 4 },
  { name: "GitHub fine-grained token", re: /\bgithub_pat_[A-Za-z0-9_]{22,255}\b/g, score: 0.97, prefix: 11 },
  { name: "GitLab token", re: /\bglpat-[A-Za-z0-9_-]{20,}/g, score: 0.95, prefix: 6 },
  { name: "Slack token", re: /\bxox[abposr]-[A-Za-z0-9-]{10,250}/g, score: 0.95, prefix: 5 },
  { name: "Slack webhook URL", re: /https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9/_-]{20,}/g, score: 0.9, prefix: 23 },
  { name: "Stripe live secret key", re: /\b(?:sk|rk)_live_[A-Za-z0-9]{16,247}\b/g, score: 0.97, prefix: 8 },
  { name: "Stripe test secret key", re: /\b(?:sk|rk)_test_[A-Za-z0-9]{16,247}\b/g, score: 0.85, prefix: 8 },
  { name: "Stripe webhook secret", re: /\bwhsec_[A-Za-z0-9]{24,}\b/g, score: 0.9, prefix: 6 },
  {
    name: "LLM API key",
    re: /\bsk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-|admin\d\d-)?|or-v1-)?[A-Za-z0-9_-]{20,}/g,
    score: 0.9,
    prefix: 3,
    check: (v) => mixed(v.slice(3)),
  },
  { name: "Google API key", re: /\bAIza[0-9A-Za-z_-]{35}\b/g, score: 0.9, prefix: 4 },
  { name: "SendGrid API key", re: /\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b/g, score: 0.95, prefix: 3 },
  { name: "npm token", re: /\bnpm_[A-Za-z0-9]{36}\b/g, score: 0.95, prefix: 4 },
  { name: "Hugging Face token", re: /\bhf_[A-Za-z0-9]{34,}\b/g, score: 0.95, prefix: 3 },
  { name: "Berth workspace API key", re: /\bws_sk_[A-Za-z0-9_-]{16,}/g, score: 0.97, prefix: 6 },
];

// one scan says whether any key rule matches (text.ts anyOf); most texts hold no key
const KEY_RULES_GATE = anyOf(KEY_RULES.map((r) => r.re));

const PEM =
  /-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]{0,16384}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?/g;
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}/g;
const URL_CREDENTIALS = /\b[a-z][a-z0-9+.-]{1,20}:\/\/([^\s:@/]{1,128}):([^\s@/]{1,256})@/gi;
const BEARER = /\bBearer\s+([A-Za-z0-9._~+/-]{20,}=*)/g;
// the words that name a secret
const SECRET_WORD =
  "(password|passwd|pwd|passphrase|passcode|secret|token|api[ _-]?key|apikey|access[ _-]?key|private[ _-]?key|(?:login|account|admin|user|root|wi-?fi|network)[ _-]?(?:pass\\b|key)|credentials?)";
// keyword [identifier rest] [quote] separator [quote] value
const ASSIGNED = new RegExp(
  `${SECRET_WORD}[A-Za-z0-9_.-]{0,40}["'\`]?(\\s*(?:[:=]|=>|:=)\\s*|\\s+(?:is|was)\\s+)["'\`]?([^\\s"'\`,;)]{1,200})`,
  "gi",
);
// keyword separator value with spaces put inside it ("is Sum mer 2 0 2 5 !", "is Sec ure Pas s1 2 3"):
// 3-16 pieces of at most four characters, to the end of the clause (a comma, a semicolon, the end
// of a sentence or of the text). Bounded repetitions: linear.
// Sticky: tried only where ASSIGNED found the word and a value too short or too plain to count.
const ASSIGNED_SPACED = new RegExp(
  `${SECRET_WORD}[A-Za-z0-9_.-]{0,40}(?:\\s*[:=]\\s*|\\s+(?:is|was)\\s+)((?:[^\\s"'\`,;)]{1,4} ){2,15}[^\\s"'\`,;)]{1,4})(?=[,;)]|[.!?]?\\s*$|[.!?]\\s)`,
  "iy",
);
const PLACEHOLDER =
  /^(?:\*+|x{3,}|\.{3,}|<[^>]*>|\[[^\]]*\]|\$\{?[A-Za-z_][\w.]*\}?|%[A-Za-z_]+%|\{\{[^}]*\}\}|your[_-]?\w*|my[_-]?\w*|example\w*|changeme|placeholder|password|secret|token|null|none|nil|undefined|true|false|redacted|hidden|masked|required|optional|string|env|process\.env\.\w+)$/i;

/** A value assigned to a secret's name, described by the name and its length, never itself. */
function assignedValue(word: string, value: string): string {
  return `value of "${word.toLowerCase()}" (${value.length} chars)`;
}

function describeKey(rule: KeyRule, value: string): string {
  return `${rule.name} (${value.slice(0, rule.prefix)}…, ${value.length} chars)`;
}

// a value that is one character repeated, after a prefix or two ("sess-000000000000", "aaaaaaaa"): a demo value
const ONE_CHARACTER = /^(?:[A-Za-z]{1,10}[-_])*(\w)\1{5,}$/;

/** Is a value assigned to a secret-sounding word itself secret-like? */
export function secretValueScore(value: string, viaIs: boolean): number {
  if (PLACEHOLDER.test(value) || ONE_CHARACTER.test(value) || value.length < 6) return 0;
  const classes = charClasses(value);
  const h = entropy(value);
  if (viaIs) {
    // "the token is expired" is prose; "my password is Tr0ub4dor&3" is a secret
    if (value.length < 8 || classes < 2 || !/\d|[^A-Za-z0-9]/.test(value)) return 0;
    return h >= 3 ? 0.85 : 0.7;
  }
  if (/^\d{1,5}$/.test(value)) return 0; // "token: 512"
  if (value.length >= 12 && h >= 3.5) return 0.9;
  if (classes >= 2 || h >= 3) return 0.75;
  return 0.55;
}

export const detectSecrets: PiiDetector = (text, claimed) => {
  const hits: Hit[] = [];
  const mine = new SpanSet(); // the spans of hits, for the next scans
  const taken = (s: number, e: number) => claimed.overlaps(s, e) || mine.overlaps(s, e);
  const keep = (hit: Hit) => {
    hits.push(hit);
    mine.add(hit.start, hit.end);
  };
  const keepSpaced = (m: RegExpExecArray, viaIs: boolean) => {
    const spaced = m[2]!;
    const start = m.index + m[0].length - spaced.length;
    const end = start + spaced.length;
    const pieces = spaced.split(" ");
    // prose after the word ("is on the 2nd floor", "is 1 of 2 I use") is not a value
    if (taken(start, end) || pieces.some((p) => p.length >= 2 && STOPWORDS.has(p.toLowerCase()))) return;
    const value = pieces.join("");
    const score = /\d/.test(value) ? secretValueScore(value, viaIs) : 0;
    if (score > 0) keep({ kind: "secret", start, end, score, description: assignedValue(m[1]!, value) });
  };
  if (text.includes("PRIVATE KEY")) {
    for (const m of scan(PEM, text)) {
      const start = m.index;
      const end = start + m[0].length;
      if (taken(start, end)) continue;
      const algo = (m[1] ?? "").trim();
      keep({ kind: "private_key", start, end, score: 0.99, description: `PEM private key${algo ? ` (${algo})` : ""}` });
    }
  }
  if (text.includes("eyJ")) {
    for (const m of scan(JWT, text)) {
      const start = m.index;
      const end = start + m[0].length;
      if (taken(start, end) || !isJWT(m[0])) continue;
      keep({ kind: "jwt", start, end, score: 0.9, description: `JSON Web Token (${m[0].length} chars)` });
    }
  }
  for (const rule of KEY_RULES_GATE.test(text) ? KEY_RULES : []) {
    for (const m of scan(rule.re, text)) {
      const start = m.index;
      const end = start + m[0].length;
      if (taken(start, end) || (rule.check && !rule.check(m[0]))) continue;
      keep({ kind: "api_key", start, end, score: rule.score, description: describeKey(rule, m[0]) });
    }
  }
  if (text.includes("://")) {
    for (const m of scan(URL_CREDENTIALS, text)) {
      const password = m[2]!;
      const start = m.index + m[0].length - 1 - password.length;
      const end = start + password.length;
      if (taken(start, end) || PLACEHOLDER.test(password)) continue;
      keep({ kind: "secret", start, end, score: 0.9, description: `password in a URL (${password.length} chars)` });
    }
  }
  for (const m of scan(BEARER, text)) {
    const value = m[1]!;
    const start = m.index + m[0].length - value.length;
    const end = start + value.length;
    if (taken(start, end) || !mixed(value)) continue;
    keep({ kind: "secret", start, end, score: 0.85, description: `bearer token (${value.length} chars)` });
  }
  for (const m of scan(ASSIGNED, text)) {
    const value = m[3]!;
    const start = m.index + m[0].length - value.length;
    const end = start + value.length;
    if (taken(start, end)) continue;
    const viaIs = /\b(?:is|was)\b/.test(m[2]!);
    const score = secretValueScore(value, viaIs);
    if (score > 0) {
      keep({ kind: "secret", start, end, score, description: assignedValue(m[1]!, value) });
      continue;
    }
    // the value may go on after a space: read again from the same word, as a value with spaces inside
    ASSIGNED_SPACED.lastIndex = m.index;
    const spaced = ASSIGNED_SPACED.exec(text);
    if (spaced) keepSpaced(spaced, viaIs);
  }
  return hits;
};
