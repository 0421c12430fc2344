// Requests the API makes to addresses a user chose (a service's gitRepoUrl): the one way out.
// A URL is the user's; where it leads is checked here, at the moment of connecting:
// - every address the host name resolves to must be public: loopback, link-local (the cloud
//   metadata address among them), private, shared (CGNAT), multicast and reserved ranges are
//   refused, and so is any IPv6 address that embeds such an IPv4 one; the connection goes to the
//   address that was checked (no second lookup a rebinding DNS server could answer otherwise);
// - BERTH_OUTBOUND_DENY adds ranges (the cluster's pod and Service ranges where they are public
//   addresses), BERTH_OUTBOUND_ALLOW opens ranges (a Git server on the cluster's network);
// - redirects are followed only a few times, each hop checked like the first, with credentials
//   dropped when the host changes;
// - the body is read up to a cap, the whole request has a deadline;
// - a failure tells the caller only that the request failed: what was found there (a status, a
//   socket error, a refused address) goes to the API's log, never back to the user.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { BlockList, isIP, type LookupFunction } from "node:net";

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

/** A request that failed; `detail` is for the API's log only. */
export class OutboundError extends Error {
  readonly detail: string;

  constructor(detail: string) {
    super("the request to a user-supplied URL failed");
    this.detail = detail;
    this.name = "OutboundError";
  }
}

export interface OutboundRequest {
  headers?: Record<string, string>;
  /** the whole request, redirects included */
  timeoutMs: number;
  /** the body is refused past this many bytes */
  maxBytes: number;
  /** redirects followed (each checked); 0 refuses any */
  maxRedirects?: number;
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  body: Buffer;
}

type Resolve = (host: string) => Promise<LookupAddress[]>;
const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/** GETs user-chosen URLs under an OutboundPolicy. */
export class Outbound {
  readonly #policy: OutboundPolicy;
  readonly #resolve: Resolve;

  constructor(policy: OutboundPolicy, resolve: Resolve = systemResolve) {
    this.#policy = policy;
    this.#resolve = resolve;
  }

  /** GET url: the status and the body of the final answer (a redirect's target), or an OutboundError. */
  async get(url: string, o: OutboundRequest): Promise<OutboundResponse> {
    const signal = o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)]) : AbortSignal.timeout(o.timeoutMs);
    let target = parseUrl(url);
    let headers = { ...o.headers };
    for (let hop = 0; ; hop++) {
      const res = await this.#once(target, headers, signal);
      const location = res.headers.location;
      if (res.statusCode && res.statusCode >= 300 && res.statusCode < 400 && location) {
        res.resume();
        if (hop >= (o.maxRedirects ?? 3)) throw new OutboundError(`more than ${o.maxRedirects ?? 3} redirects (last to ${location})`);
        const next = parseUrl(new URL(location, target).href);
        if (target.protocol === "https:" && next.protocol !== "https:")
          throw new OutboundError(`a redirect from https to ${next.protocol}`);
        if (next.host !== target.host)
          headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== "authorization"));
        target = next;
        continue;
      }
      return { status: res.statusCode ?? 0, body: await readCapped(res, o.maxBytes, signal) };
    }
  }

  #once(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (isIP(host) && !this.#policy.permits(host)) return Promise.reject(new OutboundError(`${host} is a refused address`));
    // Called by the socket for a host name (never for an IP literal, checked above): every address
    // must be permitted, and the socket connects to the one returned.
    const lookup: LookupFunction = (hostname, options, callback) => {
      this.#resolve(hostname)
        .then((all) => {
          const refused = all.filter((a) => !this.#policy.permits(a.address));
          if (all.length === 0) throw new Error(`${hostname} has no address`);
          if (refused.length > 0)
            throw new OutboundError(`${hostname} resolves to a refused address (${refused.map((a) => a.address).join(", ")})`);
          if (options.all) callback(null, all);
          else callback(null, all[0]!.address, all[0]!.family);
        })
        .catch((err: Error) => callback(err as NodeJS.ErrnoException, "", 0));
    };
    const request = url.protocol === "https:" ? https.request : http.request;
    return new Promise((resolve, reject) => {
      const req = request(url, { method: "GET", headers, lookup, agent: false, signal }, resolve);
      req.on("error", (err) => reject(err instanceof OutboundError ? err : new OutboundError(describe(err, signal))));
      req.end();
    });
  }
}

function parseUrl(raw: string): URL {
  const url = URL.parse(raw);
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new OutboundError(`not an http(s) URL: ${raw}`);
  if (url.username || url.password) throw new OutboundError("a URL with credentials");
  return url;
}

function describe(err: Error, signal: AbortSignal): string {
  if (signal.aborted) return "no answer before the deadline";
  const cause = err.cause instanceof Error ? err.cause : err;
  return cause instanceof OutboundError ? cause.detail : `${(cause as NodeJS.ErrnoException).code ?? cause.name}: ${cause.message}`;
}

function readCapped(res: IncomingMessage, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (detail: string) => {
      if (settled) return;
      settled = true;
      reject(new OutboundError(detail));
      res.destroy();
    };
    const declared = Number(res.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes) {
      fail(`a body of ${declared} bytes, over the cap of ${maxBytes}`);
      return;
    }
    res.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) fail(`a body over the cap of ${maxBytes} bytes`);
      else chunks.push(chunk);
    });
    res.on("end", () => {
      if (!settled) {
        settled = true;
        resolve(Buffer.concat(chunks));
      }
    });
    res.on("error", (err) => fail(describe(err, signal)));
    res.on("aborted", () => fail(describe(new Error("the connection was cut"), signal)));
  });
}
