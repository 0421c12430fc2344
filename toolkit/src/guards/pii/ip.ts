// IP addresses. Public addresses identify a network endpoint (personal data under GDPR); private,
// loopback, link-local and unspecified ones do not leave the network and score low, unless someone
// gives one as their own ("my ip: 192.168.1.23", "our IP address is 10.0.0.5": where a person's
// device sits on their network). Version numbers ("version 1.2.3.4", "v1.2.3.4") are not addresses.
import { isIP } from "./validators.ts";
import type { Hit } from "../types.ts";
import type { PiiDetector } from "./common.ts";
import { contextBefore, scan } from "./common.ts";
import { SpanSet } from "../spans.ts";

const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const IPV4 = new RegExp(`(?<![\\w.])${OCTET}(?:\\.${OCTET}){3}(?![\\w]|\\.\\d)`, "g");
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])/g;
const TWO_GROUPS = /:[0-9A-Fa-f]{0,4}:/;
const VERSION_WORDS = /(?:\b(?:version|ver|release|build|firmware|v|chapter|section|rule|step|table|figure|fig|item)\.?\s*|\bv)$/i;

// an address named as one's own ("my ip", "our public IP", "my laptop's IP"), or named as an address
const OWN_IP =
  /\b(?:my|our)(?:\s+(?:public|home|own|current|local|private|external|internal|wan|lan|(?:computer|laptop|phone|device|machine|pc)'?s?))?\s+ip(?:v[46])?\b/i;
const IP_WORDS = /\bip(?:v[46])?\b|\baddress\b/i;

/** The score given the words before the address: `base` alone, `own` when named as one's own. */
function inContext(text: string, start: number, base: number, own: number): number {
  if (base === 0.7) return contextBefore(text, start, IP_WORDS, 32) ? 0.85 : base;
  return own !== base && contextBefore(text, start, OWN_IP, 32) ? own : base;
}

/**
 * The well-known public DNS resolvers (Cloudflare, Google, Quad9, OpenDNS): public addresses that
 * name a service everyone uses, not anyone's device ("does it use 1.1.1.1 as default?").
 */
const PUBLIC_RESOLVERS = new Set([
  "1.1.1.1",
  "1.0.0.1",
  "8.8.8.8",
  "8.8.4.4",
  "9.9.9.9",
  "149.112.112.112",
  "208.67.222.222",
  "208.67.220.220",
  "2606:4700:4700::1111",
  "2606:4700:4700::1001",
  "2001:4860:4860::8888",
  "2001:4860:4860::8844",
  "2620:fe::fe",
  "2620:fe::9",
]);

/**
 * Public scores 0.7; private, loopback, link-local, CGNAT, unspecified, broadcast, masks and the
 * public DNS resolvers score 0.2.
 * Next to "ip" or "address" a public address scores 0.85; named as one's own ("my ip") a private
 * (RFC 1918) or CGNAT address scores 0.6, while loopback, unspecified, multicast, broadcast and
 * link-local ones stay at 0.2 (they name no one's device).
 */
export function ipv4Score(ip: string, own = false): number {
  const [a, b] = ip.split(".").map(Number) as [number, number, number, number];
  if (own && (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127))) return 0.6;
  const internal =
    PUBLIC_RESOLVERS.has(ip) ||
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

export function ipv6Score(ip: string, own = false): number {
  const lower = ip.toLowerCase();
  if (own && /^f[cd]/.test(lower)) return 0.6; // a unique local address given as one's own
  if (
    PUBLIC_RESOLVERS.has(lower) ||
    lower === "::1" ||
    lower === "::" ||
    /^fe[89ab]/.test(lower) ||
    /^f[cd]/.test(lower) ||
    /^ff/.test(lower)
  )
    return 0.2;
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
      const score = inContext(text, start, ipv4Score(m[0]), ipv4Score(m[0], true));
      hits.push({ kind: "ip_address", start, end, score, description: `IPv4 address ${masked}` });
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
      const score = inContext(text, start, ipv6Score(value), ipv6Score(value, true));
      hits.push({ kind: "ip_address", start, end, score, description: `IPv6 address ${prefix}:…` });
      mine.add(start, end);
    }
  }
  return hits;
};
