// Requests the API makes to addresses a user chose (a service's gitRepoUrl): the one way out.
// A URL is the user's; where it leads is checked here, at the moment of connecting:
// - every address the host name resolves to must be public (kube/addresses.ts): loopback, link-local (the cloud
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
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { AddressRefused, permittedAddresses, systemResolve, type OutboundPolicy, type Resolve } from "../../kube/addresses.ts";

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
      permittedAddresses(hostname, this.#policy, this.#resolve)
        .then((all) => {
          if (options.all) callback(null, all);
          else callback(null, all[0]!.address, all[0]!.family);
        })
        .catch((err: Error) =>
          callback((err instanceof AddressRefused ? new OutboundError(err.message) : err) as NodeJS.ErrnoException, "", 0),
        );
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
