// The names a guard template's configuration chooses from: the kinds of sensitive data and the
// toxicity categories, and the one default that depends on another key (toxicityHeadOn). A module
// without dependencies, so that the console's browser bundle can offer the same lists and
// defaults without the guards' code.

/** The kinds of sensitive data the pii_detection guard finds (match `kind` values). */
export const PII_KINDS = [
  "email",
  "phone",
  "credit_card",
  "iban",
  "ssn",
  "ip_address",
  "api_key",
  "private_key",
  "jwt",
  "secret",
  "crypto_address",
  "itin",
  "passport",
  "drivers_license",
  "routing_number",
  "bank_account",
] as const;
export type PiiKind = (typeof PII_KINDS)[number];

export const TOXICITY_CATEGORIES = ["slur", "threat", "self_harm", "hate", "harassment", "profanity", "sexual"] as const;
export type ToxicityCategory = (typeof TOXICITY_CATEGORIES)[number];

/** The keys of a toxicity template's config that decide whether it has the classifier's head. */
export interface ToxicityHeadKeys {
  classifier?: boolean | undefined;
  action?: string | undefined;
}

/**
 * Whether a toxicity template's config has the classifier's toxicity head: `classifier` when given,
 * else on unless its action is redact (a config as stored may lack action: block by default).
 */
export function toxicityHeadOn(config: ToxicityHeadKeys | undefined): boolean {
  return config?.classifier ?? config?.action !== "redact";
}
