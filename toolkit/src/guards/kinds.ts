// The names a guard template's configuration chooses from: the kinds of sensitive data and the
// toxicity categories. A module of constants alone, so that the console's browser bundle can
// offer the same lists without the guards' code.

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
