// The DNS side of domain verification: what the configured resolver answers about a domain, its
// claim's TXT record (_berth-challenge.<domain>) and the ingress host (node:dns's Resolver,
// servers from BERTH_DNS_RESOLVER or the system's).
// The decision itself is pure (crds/domain.ts decideVerification).
import { Resolver } from "node:dns/promises";
import { challengeHost, type DnsObservation } from "../../crds/domain.ts";

export interface DnsLookup {
  observe(domain: string, ingressHost: string): Promise<DnsObservation>;
}

/** Answers that mean "no such record" (as opposed to "no answer"). */
const ABSENT = new Set(["ENODATA", "ENOTFOUND", "NOTFOUND", "NODATA"]);

export class ResolverDnsLookup implements DnsLookup {
  private readonly resolver: Resolver;

  /** `servers`: "host:port" or "host" entries; the system's resolvers when empty. */
  constructor(servers: readonly string[], opts: { timeoutMs?: number; tries?: number } = {}) {
    this.resolver = new Resolver({ timeout: opts.timeoutMs ?? 3000, tries: opts.tries ?? 2 });
    if (servers.length) this.resolver.setServers([...servers]);
  }

  private async ask(fn: () => Promise<string[]>): Promise<{ values: string[]; error?: string }> {
    try {
      return { values: await fn() };
    } catch (err) {
      const code = (err as { code?: string }).code ?? String(err);
      return ABSENT.has(code) ? { values: [] } : { values: [], error: code };
    }
  }

  async observe(domain: string, ingressHost: string): Promise<DnsObservation> {
    const r = this.resolver;
    const [cname, a, aaaa, ia, iaaaa, txt] = await Promise.all([
      this.ask(() => r.resolveCname(domain)),
      this.ask(() => r.resolve4(domain)),
      this.ask(() => r.resolve6(domain)),
      this.ask(() => r.resolve4(ingressHost)),
      this.ask(() => r.resolve6(ingressHost)),
      // a TXT record is one or more strings of at most 255 bytes: joined, as RFC 7208 reads them
      this.ask(async () => (await r.resolveTxt(challengeHost(domain))).map((chunks) => chunks.join(""))),
    ]);
    const error = cname.error ?? a.error ?? aaaa.error ?? txt.error;
    return {
      cname: cname.values,
      addresses: [...a.values, ...aaaa.values],
      ingressAddresses: [...ia.values, ...iaaaa.values],
      txt: txt.values,
      ...(error ? { error } : {}),
    };
  }
}
