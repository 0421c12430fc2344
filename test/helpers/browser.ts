// A browser's cookie and redirect handling, for flows across hosts (a service's host, the API,
// an identity provider): host-only cookies kept per host and path, sent back where they belong,
// redirects followed one by one so a test sees each hop. Requests to a service's host go through
// `edge`, which stands for the ingress (a real one in test/e2e, the forward-auth call in
// integration tests).
export interface Hop {
  url: string;
  status: number;
  headers: Headers;
  text: string;
}

interface Cookie {
  name: string;
  value: string;
  path: string;
  expires: number;
}

export type Edge = (url: URL, init: { method: string; headers: Record<string, string> }) => Promise<Response>;

export class Browser {
  readonly #jar = new Map<string, Cookie[]>();
  readonly #edge: { hosts: (host: string) => boolean; send: Edge } | undefined;
  readonly #now: () => number;

  constructor(edge?: { hosts: (host: string) => boolean; send: Edge }, now: () => number = Date.now) {
    this.#edge = edge;
    this.#now = now;
  }

  /** Cookies this browser would send to `url`. */
  cookieHeader(url: URL): string {
    const now = this.#now();
    return (this.#jar.get(url.hostname) ?? [])
      .filter((c) => c.expires > now && url.pathname.startsWith(c.path))
      .map((c) => `${c.name}=${c.value}`)
      .join("; ");
  }

  cookie(host: string, name: string): string | undefined {
    return this.#jar.get(host)?.find((c) => c.name === name && c.expires > this.#now())?.value;
  }

  /** Replaces the value of a cookie (a test tampering with its own cookie). */
  setCookie(host: string, name: string, value: string): void {
    const list = this.#jar.get(host) ?? [];
    this.#jar.set(host, [...list.filter((c) => c.name !== name), { name, value, path: "/", expires: Number.POSITIVE_INFINITY }]);
  }

  #store(url: URL, headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";").map((s) => s.trim());
      const eq = pair!.indexOf("=");
      const c: Cookie = { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), path: "/", expires: Number.POSITIVE_INFINITY };
      for (const a of attrs) {
        const [k, v] = a.split("=");
        if (k?.toLowerCase() === "path" && v) c.path = v;
        if (k?.toLowerCase() === "max-age") c.expires = this.#now() + Number(v) * 1000;
        if (k?.toLowerCase() === "domain") throw new Error(`a cookie with a Domain attribute: ${line}`);
      }
      const list = (this.#jar.get(url.hostname) ?? []).filter((x) => x.name !== c.name || x.path !== c.path);
      if (c.expires > this.#now()) list.push(c);
      this.#jar.set(url.hostname, list);
    }
  }

  /** One request, no redirect followed. */
  async request(url: string | URL, init: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Hop> {
    const u = new URL(url);
    const headers: Record<string, string> = { ...init.headers };
    const cookie = this.cookieHeader(u);
    if (cookie) headers.Cookie = cookie;
    const method = init.method ?? "GET";
    const res = this.#edge?.hosts(u.hostname)
      ? await this.#edge.send(u, { method, headers })
      : await fetch(u, { method, headers, redirect: "manual", ...(init.body !== undefined ? { body: init.body } : {}) });
    this.#store(u, res.headers);
    return { url: u.href, status: res.status, headers: res.headers, text: await res.text() };
  }

  /** Follows redirects (as a browser: 303 and 302 become GET) until an answer that is not one; returns every hop. */
  async navigate(
    url: string | URL,
    init: { method?: string; body?: string; headers?: Record<string, string> } = {},
    maxHops = 15,
  ): Promise<Hop[]> {
    const hops: Hop[] = [];
    let next: { url: string; init: typeof init } | undefined = { url: new URL(url).href, init };
    while (next) {
      if (hops.length >= maxHops)
        throw new Error(`more than ${maxHops} redirects: ${hops.map((h) => `${h.status} ${h.url}`).join(" -> ")}`);
      const hop = await this.request(next.url, next.init);
      hops.push(hop);
      const location = hop.headers.get("location");
      next = hop.status >= 300 && hop.status < 400 && location ? { url: new URL(location, hop.url).href, init: {} } : undefined;
    }
    return hops;
  }
}
