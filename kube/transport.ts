// HTTP to the Kubernetes API server on node:http(s): JSON requests and watch streams, over one
// keep-alive connection pool per set of TLS credentials. Credentials come from anything that can
// fill https.RequestOptions the way client-node's KubeConfig.applyToHTTPSOptions does (client-node's
// KubeConfig itself, or the small LeanKubeConfig of kubeconfig.ts), so this module does not load
// @kubernetes/client-node: a process that needs only objects, watches and Leases (the operator)
// saves the ~60 MiB the client's generated code takes once imported.
import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { setTimeout as delay } from "node:timers/promises";

/** Where the API server is and how to authenticate to it. client-node's KubeConfig fits. */
export interface KubeAuth {
  getCurrentCluster(): { server: string } | null;
  /** Fills CA, client certificate and key, TLS server name, and headers (Authorization, ...). */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** An error answer of the API server: `code` is the HTTP status, `body` its Status object (or text). */
export class KubeApiError extends Error {
  readonly code: number;
  readonly body: unknown;
  constructor(code: number, body: unknown, what: string) {
    const message =
      body && typeof body === "object" && "message" in body
        ? String(body.message)
        : typeof body === "string" && body
          ? body
          : `HTTP ${code}`;
    super(`${what}: ${code} ${message}`);
    this.name = "KubeApiError";
    this.code = code;
    this.body = body;
  }
}

export function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e?.code === "number") return e.code;
  if (typeof e?.statusCode === "number") return e.statusCode;
  return undefined;
}
export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
export const isConflict = (err: unknown): boolean => statusCode(err) === 409;
export const isInvalid = (err: unknown): boolean => statusCode(err) === 422;
export const isGone = (err: unknown): boolean => statusCode(err) === 410;

/** The API server's Status message from a client error, for logs and user-facing errors. */
export function errorMessage(err: unknown): string {
  const body = (err as { body?: unknown })?.body;
  if (typeof body === "string") {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      return body;
    }
  }
  if (body && typeof body === "object" && "message" in body) return String(body.message);
  return err instanceof Error ? err.message : String(err);
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  /** Sent as JSON unless it is a string. */
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Default 60 s: a request that hangs longer fails (and its reconcile is retried). */
  timeoutMs?: number;
}

export interface WatchEvent {
  type: string;
  object: unknown;
}

/** One request as sent and answered (HTTP status, or "error" when no answer came), for metrics. */
export interface KubeRequestInfo {
  method: string;
  path: string;
  contentType?: string | undefined;
  status: number | "error";
}

/** How often a request is sent when the API server keeps answering "retry after" (client-go: 10). */
export const RETRY_AFTER_ATTEMPTS = 6;
/** The longest Retry-After waited for; a longer one is waited for this long. */
const RETRY_AFTER_MAX_MS = 10_000;

/** The wait an answer asks for before the request is sent again: 429 or 5xx with Retry-After in seconds; else undefined. */
export function retryAfterMs(status: number, header: string | undefined): number | undefined {
  if (status !== 429 && (status < 500 || status > 599)) return undefined;
  if (header === undefined || !/^\d{1,6}$/.test(header.trim())) return undefined;
  return Math.min(Number(header.trim()) * 1000, RETRY_AFTER_MAX_MS);
}

/**
 * The wait before sending again a write that lost a race on a namespace's ResourceQuota: the
 * quota admission plugin could not record the new usage because the quota's status changed under
 * it (the quota controller or another write), so nothing was stored, and the same request may be
 * sent again. The answer is a 409 whose Status names the resourcequotas, not the object written.
 * A write to a ResourceQuota itself is not retried (its 409 is the caller's stale version).
 * Backs off 25, 50, 100... ms with jitter; undefined for every other answer.
 */
export function quotaConflictMs(path: string, status: number, body: unknown, attempt: number): number | undefined {
  if (status !== 409 || /\/resourcequotas(\/|$|\?)/.test(path)) return undefined;
  const details = body as { reason?: unknown; details?: { kind?: unknown } } | undefined;
  if (details?.reason !== "Conflict" || details.details?.kind !== "resourcequotas") return undefined;
  const base = 25 * 2 ** Math.min(attempt - 1, 5);
  return base + Math.floor(Math.random() * base);
}

const TLS_KEYS = ["ca", "cert", "key", "pfx", "passphrase", "servername", "rejectUnauthorized", "ciphers", "crl"] as const;

function queryString(q: Query | undefined): string {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

function fingerprint(opts: https.RequestOptions): string {
  const h = createHash("sha256");
  for (const k of TLS_KEYS) {
    const v = (opts as Record<string, unknown>)[k];
    h.update(`${k}=`);
    if (v !== undefined) h.update(Buffer.isBuffer(v) ? v : JSON.stringify(v));
    h.update("\n");
  }
  return h.digest("hex");
}

/**
 * The transport. Every request asks `auth` for its credentials (tokens rotate; exec plugins
 * refresh), and reuses one keep-alive agent while the TLS material stays the same; a new CA,
 * certificate or key gets a new agent (the old one closes its idle sockets).
 */
export class KubeRest {
  readonly auth: KubeAuth;
  readonly server: URL;
  /** Called for every request once answered (or failed); e.g. to count them. */
  onRequest: ((r: KubeRequestInfo) => void) | undefined;
  private agent: { key: string; agent: http.Agent } | undefined;

  /** `kc` itself when it is a KubeRest already (one connection pool shared), else a new one over it. */
  static from(kc: KubeAuth | KubeRest): KubeRest {
    return kc instanceof KubeRest ? kc : new KubeRest(kc);
  }

  constructor(auth: KubeAuth) {
    this.auth = auth;
    const server = auth.getCurrentCluster()?.server;
    if (!server) throw new Error("kubeconfig: no current cluster");
    this.server = new URL(server);
  }

  /**
   * One request; the parsed JSON answer (undefined when empty). Non-2xx answers throw KubeApiError.
   * An answer that asks to be retried (429, or a 5xx, with Retry-After: the API server did not
   * act on the request, e.g. "storage is (re)initializing" just after a CRD is installed, or its
   * priority and fairness queues are full) is retried after the time it names, as client-go does,
   * up to RETRY_AFTER_ATTEMPTS times. So is a write refused only because it raced another on the
   * namespace's ResourceQuota (quotaConflictMs).
   */
  async request<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.send(method, path, o, o.timeoutMs ?? 60_000);
      const text = await readAll(res, o.signal);
      const status = res.statusCode ?? 0;
      if (status >= 200 && status <= 299) return (text ? JSON.parse(text) : undefined) as T;
      const body = parseOr(text);
      const wait = retryAfterMs(status, res.headers["retry-after"]) ?? quotaConflictMs(path, status, body, attempt);
      if (wait === undefined || attempt >= RETRY_AFTER_ATTEMPTS || o.signal?.aborted)
        throw new KubeApiError(status, body, `${method} ${path}`);
      await sleep(wait, o.signal);
    }
  }

  /**
   * A watch: calls `onEvent` for every event of the stream and resolves when the API server ends
   * it (its timeout), rejects when the connection fails or the answer is not 200 (KubeApiError),
   * and resolves quietly once `signal` aborts.
   */
  async watch(path: string, query: Query, onEvent: (e: WatchEvent) => void, signal: AbortSignal): Promise<void> {
    // No data for longer than the server's own timeout means a connection that died silently.
    const idleMs = typeof query.timeoutSeconds === "number" ? (query.timeoutSeconds + 30) * 1000 : 0;
    await this.lines(
      path,
      { ...query, watch: true },
      (line) => {
        if (line.trim()) onEvent(JSON.parse(line) as WatchEvent);
      },
      signal,
      { idleMs, what: "watch" },
    );
  }

  /**
   * A streamed GET read line by line (a watch, a followed log): calls `onLine` for every line
   * (without its newline; a last unterminated line when the stream ends) and resolves when the
   * server ends the stream, rejects when the connection fails, the answer is not 200 (KubeApiError)
   * or `onLine` throws, and resolves quietly once `signal` aborts. A line longer than `maxLine`
   * characters is skipped whole (`onLine` never sees part of one).
   */
  async lines(
    path: string,
    query: Query,
    onLine: (line: string) => void,
    signal: AbortSignal,
    o: { idleMs?: number; maxLine?: number; what?: string } = {},
  ): Promise<void> {
    const what = o.what ?? "GET";
    let res: http.IncomingMessage;
    try {
      res = await this.send("GET", path, { query, signal }, o.idleMs ?? 0);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      const text = await readAll(res, signal).catch(() => "");
      throw new KubeApiError(status, parseOr(text), `${what} ${path}`);
    }
    const maxLine = o.maxLine ?? Infinity;
    await new Promise<void>((resolve, reject) => {
      let buffered = "";
      let skipping = false;
      let failed = false;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        res.destroy();
        if (signal.aborted) resolve();
        else reject(err instanceof Error ? err : new Error(String(err)));
      };
      const onAbort = () => {
        res.destroy();
        resolve();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffered += chunk;
        let nl: number;
        while (!failed && (nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (skipping) {
            skipping = false;
            continue;
          }
          if (line.length > maxLine) continue;
          try {
            onLine(line);
          } catch (err) {
            fail(err);
          }
        }
        if (buffered.length > maxLine) {
          buffered = "";
          skipping = true;
        }
      });
      res.on("end", () => {
        signal.removeEventListener("abort", onAbort);
        if (!failed && buffered && !skipping) {
          try {
            onLine(buffered);
          } catch (err) {
            fail(err);
            return;
          }
        }
        if (!failed) resolve();
      });
      res.on("aborted", () => fail(new Error(`${what} ${path}: connection closed`)));
      res.on("error", fail);
      res.on("close", () => {
        signal.removeEventListener("abort", onAbort);
        if (!res.complete) fail(new Error(`${what} ${path}: connection closed`));
      });
    });
  }

  private async send(method: string, path: string, o: RequestOptions, timeoutMs: number): Promise<http.IncomingMessage> {
    const opts: https.RequestOptions = { headers: {} };
    await this.auth.applyToHTTPSOptions(opts);
    const body = o.body === undefined ? undefined : typeof o.body === "string" ? o.body : JSON.stringify(o.body);
    const headers: http.OutgoingHttpHeaders = {
      ...(opts.headers as http.OutgoingHttpHeaders | undefined),
      Accept: "application/json",
      "User-Agent": "berth",
      ...(body !== undefined ? { "Content-Type": o.contentType ?? "application/json", "Content-Length": Buffer.byteLength(body) } : {}),
    };
    const secure = this.server.protocol === "https:";
    const fullPath = `${path}${queryString(o.query)}`;
    const observe = (status: number | "error") =>
      this.onRequest?.({
        method,
        path: fullPath,
        contentType: body === undefined ? undefined : (o.contentType ?? "application/json"),
        status,
      });
    const req = (secure ? https : http).request({
      protocol: this.server.protocol,
      hostname: this.server.hostname.replace(/^\[|\]$/g, ""),
      port: this.server.port || (secure ? 443 : 80),
      path: `${this.server.pathname.replace(/\/$/, "")}${fullPath}`,
      method,
      headers,
      agent: proxyAgent(opts) ?? this.agentFor(opts, secure),
      ...(opts.auth ? { auth: opts.auth } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(timeoutMs > 0 ? { timeout: timeoutMs } : {}),
    });
    return await new Promise<http.IncomingMessage>((resolve, reject) => {
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        observe(res.statusCode ?? 0);
        resolve(res);
      });
      req.on("error", (err) => {
        if (!answered) observe("error");
        reject(err);
      });
      req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
      req.end(body);
    });
  }

  private agentFor(opts: https.RequestOptions, secure: boolean): http.Agent {
    const key = `${secure}:${fingerprint(opts)}`;
    if (this.agent?.key === key) return this.agent.agent;
    const tls = Object.fromEntries(
      TLS_KEYS.filter((k) => (opts as Record<string, unknown>)[k] !== undefined).map((k) => [k, (opts as Record<string, unknown>)[k]]),
    );
    const agent = secure ? new https.Agent({ keepAlive: true, ...tls }) : new http.Agent({ keepAlive: true });
    const old = this.agent?.agent;
    this.agent = { key, agent };
    if (old) {
      // New credentials (a rotated certificate): idle sockets of the old pool go now; those in use
      // (watches) finish first, and the old pool is closed after the longest watch has ended.
      for (const sockets of Object.values(old.freeSockets)) for (const s of sockets ?? []) s.destroy();
      setTimeout(() => old.destroy(), 15 * 60_000).unref();
    }
    return agent;
  }
}

/**
 * The agent a KubeAuth set that must be used: client-node's KubeConfig sets one on every request, a
 * plain one (ours, with keep-alive, serves instead) or, for a cluster with a proxy-url, a proxy
 * agent, the only way to reach that server.
 */
function proxyAgent(opts: https.RequestOptions): http.Agent | undefined {
  const a = opts.agent;
  return a instanceof http.Agent && a.constructor !== http.Agent && a.constructor !== https.Agent ? a : undefined;
}

/** Waits `ms`, or less when `signal` aborts (never rejects). */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(ms, undefined, { signal }).catch(() => undefined);
}

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function readAll(res: http.IncomingMessage, signal?: AbortSignal): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) {
    if (signal?.aborted) throw signal.reason;
    text += chunk as string;
  }
  return text;
}
