// The tests' DNS server (Pebble's challenge test server, started with the real node by
// hack/lib/realnode.sh): records are set and cleared over its management API. It answers only
// what was set (no default addresses). BERTH_DNS_RESOLVER points Berth's resolver at it.
const fqdn = (h: string) => (h.endsWith(".") ? h : `${h}.`);

export class TestDns {
  readonly url: string;
  constructor(url: string) {
    this.url = url.replace(/\/$/, "");
  }

  private async post(path: string, body: Record<string, unknown>): Promise<void> {
    const res = await fetch(`${this.url}${path}`, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`DNS server ${path}: ${res.status} ${await res.text()}`);
  }

  setCname(host: string, target: string): Promise<void> {
    return this.post("/set-cname", { host: fqdn(host), target: fqdn(target) });
  }
  clearCname(host: string): Promise<void> {
    return this.post("/clear-cname", { host: fqdn(host) });
  }
  addA(host: string, addresses: string[]): Promise<void> {
    return this.post("/add-a", { host: fqdn(host), addresses });
  }
  clearA(host: string): Promise<void> {
    return this.post("/clear-a", { host: fqdn(host) });
  }
  setTxt(host: string, value: string): Promise<void> {
    return this.post("/set-txt", { host: fqdn(host), value });
  }
  clearTxt(host: string): Promise<void> {
    return this.post("/clear-txt", { host: fqdn(host) });
  }
}
