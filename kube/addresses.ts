// Which addresses a user-chosen destination may reach: the ranges refused by default, CIDR lists
// from configuration, and the policy both the API's outbound requests (api/http/outbound.ts) and
// the builds' egress proxy (operator/builder/egress.ts) judge every resolved address by.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";

/** Ranges no user-chosen URL may reach unless BERTH_OUTBOUND_ALLOW opens them. */
export const REFUSED_RANGES: readonly string[] = [
  "0.0.0.0/8", // "this" network
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16", // private (and, on most clusters, pods and Services)
  "100.64.0.0/10", // shared address space (carrier-grade NAT; some clusters' pod ranges)
  "127.0.0.0/8", // loopback
  "169.254.0.0/16", // link-local: the cloud metadata address 169.254.169.254
  "192.0.0.0/24",
  "192.0.2.0/24",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24", // protocol assignments, benchmarking, documentation
  "224.0.0.0/4",
  "240.0.0.0/4", // multicast; reserved and broadcast
  "::/128",
  "::1/128", // unspecified, loopback
  "fc00::/7", // unique local (fd00:ec2::254 is a metadata address)
  "fe80::/10", // link-local
  "ff00::/8", // multicast
  "2001:db8::/32", // documentation
];

export interface OutboundPolicyConfig {
  /** CIDRs (or single addresses) reachable although REFUSED_RANGES holds them */
  allow?: readonly string[];
  /** CIDRs (or single addresses) refused on top of REFUSED_RANGES */
  deny?: readonly string[];
}

function cidr(entry: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } {
  const [address = "", bits] = entry.trim().split("/", 2);
  const v = isIP(address);
  if (v === 0) throw new Error(`${entry} is not an IP address or CIDR`);
  const max = v === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || !/^\d+$/.test(bits ?? String(max)))
    throw new Error(`${entry}: the prefix length must be 0-${max}`);
  return { address, prefix, family: v === 4 ? "ipv4" : "ipv6" };
}

/** Parses a comma-separated list of CIDRs; throws on the first that is not one. */
export function parseCidrList(raw: string): string[] {
  const list = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of list) cidr(entry);
  return list;
}

function blockList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const e of entries) {
    const c = cidr(e);
    list.addSubnet(c.address, c.prefix, c.family);
  }
  return list;
}

/** Whether an address lies in one of the CIDRs (a parsed list: parseCidrList). */
export function cidrMatcher(entries: readonly string[]): (address: string) => boolean {
  const list = blockList(entries);
  return (address) => {
    const v = isIP(address);
    return v !== 0 && list.check(address, v === 4 ? "ipv4" : "ipv6");
  };
}

/** The IPv4 address an IPv6 one carries (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16), if any. */
export function embeddedIpv4(address: string): string | undefined {
  if (isIP(address) !== 6) return undefined;
  const words = expandIpv6(address);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zero(0, 5) && (words[5] === 0xffff || (words[5] === 0 && (words[6]! !== 0 || words[7]! > 1)))) return v4(words[6]!, words[7]!);
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6)) return v4(words[6]!, words[7]!);
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!);
  return undefined;
}

function expandIpv6(address: string): number[] {
  let a = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) {
    const [p, q, r, s] = dotted[1]!.split(".").map(Number) as [number, number, number, number];
    a = `${a.slice(0, -dotted[1]!.length)}${((p << 8) | q).toString(16)}:${((r << 8) | s).toString(16)}`;
  }
  const [head = "", tail] = a.split("::", 2);
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill("0");
  return [...h, ...fill, ...t].map((w) => Number.parseInt(w, 16));
}

/** Which addresses user-chosen URLs may reach. */
export class OutboundPolicy {
  readonly #refused: BlockList;
  readonly #allowed: BlockList;

  constructor(config: OutboundPolicyConfig = {}) {
    this.#refused = blockList([...REFUSED_RANGES, ...(config.deny ?? [])]);
    this.#allowed = blockList(config.allow ?? []);
  }

  /** Whether a connection to this IP address may be made. */
  permits(address: string): boolean {
    const v = isIP(address);
    if (v === 0) return false;
    const family = v === 4 ? "ipv4" : "ipv6";
    if (this.#allowed.check(address, family)) return true;
    if (this.#refused.check(address, family)) return false;
    const v4 = embeddedIpv4(address);
    return v4 === undefined || this.permits(v4);
  }
}

/** A host name's addresses (dns.lookup, all of them). */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

/** The system's resolver, as sockets use it. */
export const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/** A destination the policy refuses: `message` names the host (and the refused addresses). */
export class AddressRefused extends Error {}

/**
 * The addresses to connect to for `host` (a name or an IP literal, IPv6 in brackets or not): every
 * address it resolves to must be permitted, else AddressRefused; no address at all is an Error.
 * The caller connects to an address returned here, never to the name again (no second lookup a
 * rebinding DNS server could answer otherwise).
 */
export async function permittedAddresses(host: string, policy: OutboundPolicy, resolve: Resolve = systemResolve): Promise<LookupAddress[]> {
  const bare = host.replace(/^\[|\]$/g, "");
  const family = isIP(bare);
  if (family !== 0) {
    if (!policy.permits(bare)) throw new AddressRefused(`${bare} is a refused address`);
    return [{ address: bare, family }];
  }
  const all = await resolve(bare);
  if (all.length === 0) throw new Error(`${bare} has no address`);
  const refused = all.filter((a) => !policy.permits(a.address));
  if (refused.length > 0) throw new AddressRefused(`${bare} resolves to a refused address (${refused.map((a) => a.address).join(", ")})`);
  return all;
}
