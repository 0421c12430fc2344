// IP addresses. Public addresses identify a network endpoint (personal data under GDPR); private,
// loopback, link-local and unspecified ones do not leave the network and score low. Version
// numbers ("version 1.2.3.4", "v1.2.3.4") are not addresses.
import { isIP } from "./validators.ts";
import type { Hit } from "../types.ts";
import type { PiiDetector } from "./common.ts";
import { scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const IPV4 = new RegExp(`(?<![\\w.])${OCTET}(?:\\.${OCTET}){3}(?![\\w]|\\.\\d)`, "g");
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])/g;
const TWO_GROUPS = /:[0-9A-Fa-f]{0,4}:/;
const VERSION_WORDS = /(?:\b(?:version|ver|release|build|firmware|v|chapter|section|rule|step|table|figure|fig|item)\.?\s*|\bv)$/i;

/** Public scores 0.7; private, loopback, link-local, CGNAT, unspecified, broadcast, masks score 0.2. */
export function ipv4Score(ip: string): number {
  const [a, b] = ip.split(".").map(Number) as [number, number, number, number];
  const internal =
    a === 10 ||
    a === 127 ||
    a === 0 ||
    a >= 224 ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 169 && b === 254) ||
    (a === 100 && b >= 64 && b <= 127);
  return internal ? 0.2 : 0.7;
}

export function ipv6Score(ip: string): number {
  const lower = ip.toLowerCase();
  if (lower === "::1" || lower === "::" || /^fe[89ab]/.test(lower) || /^f[cd]/.test(lower) || /^ff/.test(lower)) return 0.2;
  return 0.7;
}

export const detectIps: PiiDetector = (text, claimed) => {
  const hits: Hit[] = [];
  const mine = new SpanSet(); // the spans of hits, for the IPv6 scan
  if (/\d\.\d/.test(text)) {
    for (const m of scan(IPV4, text)) {
      const start = m.index;
      const end = start + m[0].length;
      if (claimed.overlaps(start, end)) continue;
      if (VERSION_WORDS.test(text.slice(Math.max(0, start - 12), start))) continue;
      const masked = m[0].replace(/\.\d+$/, ".x");
      hits.push({ kind: "ip_address", start, end, score: ipv4Score(m[0]), description: `IPv4 address ${masked}` });
      mine.add(start, end);
    }
  }
  // IPV6 needs two colons with at most four hex digits between them: most texts with a colon have none
  if (TWO_GROUPS.test(text)) {
    for (const m of scan(IPV6, text)) {
      const value = m[0];
      const groups = value.split(":").filter(Boolean);
      // at least three groups and a digit, so "std::vector", "a:b:c" and times are not addresses
      if (groups.length < 3 || !/\d/.test(value) || !isIP(value, 6)) continue;
      const start = m.index;
      const end = start + value.length;
      if (claimed.overlaps(start, end) || mine.overlaps(start, end)) continue;
      const prefix = value.split(":").slice(0, 2).join(":");
      hits.push({ kind: "ip_address", start, end, score: ipv6Score(value), description: `IPv6 address ${prefix}:…` });
      mine.add(start, end);
    }
  }
  return hits;
};
