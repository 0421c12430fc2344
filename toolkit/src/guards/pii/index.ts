// The pii_detection guard (observability-config key `sensitive_data`): an ordered chain of
// detectors, most specific first; a span claimed by one is not reconsidered by the next (a card
// number is not also a phone number). Confidence is the highest score of a hit.
import type { GuardDefinition, Hit } from "../types.ts";
import type { PiiConfig, PiiDetector, PiiKind } from "./common.ts";
import { PII_KINDS } from "./common.ts";
import { SpanSet } from "../spans.ts";
import { detectCards } from "./card.ts";
import { detectCrypto } from "./crypto.ts";
import { detectEmails } from "./email.ts";
import { detectIbans } from "./iban.ts";
import { detectIps } from "./ip.ts";
import { detectPhones } from "./phone.ts";
import { detectBankAccounts, detectRoutingNumbers } from "./routing.ts";
import { detectSecrets } from "./secrets.ts";
import { detectSsns } from "./ssn.ts";
import { detectUsIds } from "./us-ids.ts";
import { identifierView } from "./spaced.ts";

export type { PiiConfig, PiiKind } from "./common.ts";
export { PII_KINDS } from "./common.ts";
export { DEFAULT_PHONE_REGIONS } from "./phone.ts";

/** The chain, in priority order, with the kinds each detector can produce. */
export const PII_CHAIN: ReadonlyArray<{ name: string; kinds: readonly PiiKind[]; detect: PiiDetector }> = [
  { name: "secrets", kinds: ["private_key", "jwt", "api_key", "secret"], detect: detectSecrets },
  { name: "email", kinds: ["email"], detect: detectEmails },
  { name: "iban", kinds: ["iban"], detect: detectIbans },
  { name: "card", kinds: ["credit_card"], detect: detectCards },
  { name: "crypto", kinds: ["crypto_address"], detect: detectCrypto },
  { name: "routing", kinds: ["routing_number"], detect: detectRoutingNumbers },
  { name: "bank-account", kinds: ["bank_account"], detect: detectBankAccounts },
  { name: "us-ids", kinds: ["itin", "passport", "drivers_license"], detect: detectUsIds },
  { name: "ssn", kinds: ["ssn"], detect: detectSsns },
  { name: "ip", kinds: ["ip_address"], detect: detectIps },
  { name: "phone", kinds: ["phone"], detect: detectPhones },
];

const ALL_KINDS: ReadonlySet<string> = new Set(PII_KINDS);

/**
 * All PII hits in a text, sorted by position; with them those of the text with its digit-by-digit
 * runs, spelt-out values and spaced addresses joined ("4 1 5 -5 5 5 -0 1 3 2", "r c v r y @ e m a
 * i l . c o m", "j hn.d oe@em ail.c om") and the names of values typed without vowels written whole
 * ("psswrd", spaced.ts) that it did not already hold, at the text's offsets.
 */
export function detectPii(text: string, config: PiiConfig = {}): Hit[] {
  const wanted: ReadonlySet<string> = config.entities ? new Set(config.entities) : ALL_KINDS;
  const hits = chain(text, config, wanted);
  const view = identifierView(text);
  if (view === null) return hits;
  const found = SpanSet.of(hits);
  const before = hits.length;
  for (const h of chain(view.text, config, wanted)) {
    const start = view.offsets[h.start]!;
    const end = view.offsets[h.end - 1]! + 1;
    if (!found.overlaps(start, end)) hits.push({ ...h, start, end });
  }
  return hits.length > before ? hits.sort((a, b) => a.start - b.start) : hits;
}

/** The chain's hits in a text, sorted by position. */
function chain(text: string, config: PiiConfig, wanted: ReadonlySet<string>): Hit[] {
  const hits: Hit[] = [];
  // the spans claimed so far, sorted once per step that added some (SpanSet: a binary search per candidate)
  let claimed = new SpanSet();
  for (const step of PII_CHAIN) {
    if (!step.kinds.some((k) => wanted.has(k))) continue;
    if (claimed.size < hits.length) claimed = SpanSet.of(hits);
    for (const hit of step.detect(text, claimed, config)) if (wanted.has(hit.kind)) hits.push(hit);
  }
  return hits.sort((a, b) => a.start - b.start);
}

export const piiDefinition: GuardDefinition<PiiConfig> = {
  guardType: "pii_detection",
  detect: detectPii,
  confidence: (hits) => hits.reduce((max, h) => Math.max(max, h.score), 0),
};
