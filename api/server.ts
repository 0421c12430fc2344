// The Koa application: request context, the single problem+json error middleware, liveness and
// readiness at the root, every RouteDef under /api/v1 (plus the OpenAPI document and docs page),
// 404/405 for the rest. `listen` serves it with a graceful shutdown, over plain HTTP or, for the
// internal listener (BERTH_INTERNAL_TLS_*), over TLS with a certificate read from files.
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import Koa from "koa";
import Router from "@koa/router";
import type { MikroORM } from "@mikro-orm/postgresql";
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, type Config } from "./config.ts";
import { DomainError } from "./errors.ts";
import type { Logger } from "../kube/logger.ts";
import { Authenticator } from "./auth/authenticate.ts";
import { ApiKeyService, PlatformAdminKeyService } from "./auth/keys.ts";
import { requestContext } from "./http/context.ts";
import { buildOpenApiDocument, openApiRoutes, DEFAULT_INFO, type OpenApiInfo } from "./http/openapi.ts";
import { PROBLEM_MEDIA_TYPE, problemMiddleware, renderProblem, sendProblem } from "./http/problem.ts";
import { RateLimits } from "./http/limits.ts";
import { cidrMatcher } from "../kube/addresses.ts";
import { apiRouter, fallback } from "./http/router.ts";
import { bareDispatcher, type BareDispatch } from "./http/bare.ts";
import { describeCertificate, readCertificate, reloadCertificate, type CertificateFiles } from "./http/tls.ts";
import { consoleMiddleware, type ConsoleFiles } from "./console/static.ts";
import type { ConsoleSessions } from "./console/sessions.ts";
import type { AppKeyVerifier, OperatorVerifier, RouteDef } from "./http/route.ts";

export interface ReadinessCheck {
  name: string;
  /** true when ready; false or a throw (or taking longer than READINESS_TIMEOUT_MS) when not. */
  check: () => Promise<boolean>;
}

export const READINESS_TIMEOUT_MS = 3_000;

export interface ServerDeps {
  config: Config;
  orm: MikroORM;
  logger: Logger;
  routes: RouteDef[];
  readiness: ReadinessCheck[];
  /** Needed when any route has auth "app-key" (the governance module provides it). */
  appKeyVerifier?: AppKeyVerifier;
  /** Needed when any route has auth "operator" (a TokenReview-backed verifier). */
  operatorVerifier?: OperatorVerifier;
  /** Default: fresh stateless services. */
  keys?: ApiKeyService;
  adminKeys?: PlatformAdminKeyService;
  /** Console sessions: a session cookie then stands for its workspace key on workspace routes. */
  sessions?: ConsoleSessions;
  /** The console's files, served under /console; undefined: /console answers console_not_built. */
  console?: ConsoleFiles | undefined;
  info?: OpenApiInfo;
  /** The clock of the rate limits, in ms; default Date.now (tests pass their own). */
  now?: () => number;
}

interface Lifecycle {
  draining: boolean;
}
const lifecycles = new WeakMap<Koa, Lifecycle>();
/** The bare routes' dispatcher of each app (api/http/bare.ts), which `listen` puts before Koa. */
const bares = new WeakMap<Koa, BareDispatch>();

async function withTimeout(p: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.catch(() => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Every route the server mounts: the given ones plus GET /openapi.json and GET /docs. */
export function allRoutes(routes: readonly RouteDef[], info: OpenApiInfo = DEFAULT_INFO): RouteDef[] {
  const all: RouteDef[] = [...routes];
  all.push(...openApiRoutes(() => buildOpenApiDocument(all, info)));
  return all;
}

export function buildServer(deps: ServerDeps): Koa {
  const { config, orm, logger } = deps;
  const routes = allRoutes(deps.routes, deps.info);
  const appKeyRoutes = routes.filter((r) => r.auth === "app-key").map((r) => r.operationId);
  if (appKeyRoutes.length > 0 && !deps.appKeyVerifier) {
    throw new Error(`routes ${appKeyRoutes.join(", ")} use auth "app-key" but no appKeyVerifier was given`);
  }
  const operatorRoutes = routes.filter((r) => r.auth === "operator").map((r) => r.operationId);
  if (operatorRoutes.length > 0 && !deps.operatorVerifier) {
    throw new Error(`routes ${operatorRoutes.join(", ")} use auth "operator" but no operatorVerifier was given`);
  }
  const authenticator = new Authenticator({
    keys: deps.keys ?? new ApiKeyService({ log: logger }),
    adminKeys: deps.adminKeys ?? new PlatformAdminKeyService({ log: logger }),
    appKeyVerifier: deps.appKeyVerifier,
    operatorVerifier: deps.operatorVerifier,
    sessions: deps.sessions,
    operatorOverTlsOnly: config.BERTH_INTERNAL_TLS_PORT !== undefined,
  });

  const lifecycle: Lifecycle = { draining: false };
  const app = new Koa();
  lifecycles.set(app, lifecycle);
  app.on("error", (err: unknown) => logger.warn({ err }, "error while writing a response"));

  const root = new Router();
  root.get("/healthz", (ctx) => {
    ctx.status = 200;
    ctx.type = "application/json";
    ctx.body = JSON.stringify({ status: "ok" });
  });
  root.get("/readyz", async (ctx) => {
    const entries = await Promise.all(
      [["database", () => orm.checkConnection().then((r) => r.ok)] as const, ...deps.readiness.map((r) => [r.name, r.check] as const)].map(
        async ([name, check]) => [name, await withTimeout(Promise.resolve().then(check), READINESS_TIMEOUT_MS)] as const,
      ),
    );
    const checks = Object.fromEntries(entries);
    if (lifecycle.draining) checks.shutdown = false;
    if (Object.values(checks).every(Boolean)) {
      ctx.status = 200;
      ctx.type = "application/json";
      ctx.body = JSON.stringify({ status: "ready", checks });
      return;
    }
    sendProblem(
      ctx,
      new DomainError(503, "not_ready", lifecycle.draining ? "The server is shutting down." : "A readiness check failed.", {
        details: { checks },
      }),
    );
  });

  const api = apiRouter(routes, {
    orm,
    authenticator,
    bodyLimitBytes: config.BERTH_BODY_LIMIT_BYTES,
    limits: new RateLimits({
      api: { perSecond: config.BERTH_RATE_LIMIT_API_PER_SECOND, burst: config.BERTH_RATE_LIMIT_API_BURST },
      ingest: { perSecond: config.BERTH_RATE_LIMIT_INGEST_PER_SECOND, burst: config.BERTH_RATE_LIMIT_INGEST_BURST },
      guard: { perSecond: config.BERTH_RATE_LIMIT_GUARD_PER_SECOND, burst: config.BERTH_RATE_LIMIT_GUARD_BURST },
    }),
    now: deps.now ?? Date.now,
    validateResponses: config.BERTH_VALIDATE_RESPONSES,
    trustedProxy: config.BERTH_TRUSTED_PROXIES.length ? cidrMatcher(config.BERTH_TRUSTED_PROXIES) : undefined,
  });

  const bare = bareDispatcher(routes, { logger, validateResponses: config.BERTH_VALIDATE_RESPONSES, draining: () => lifecycle.draining });
  if (bare) bares.set(app, bare);

  app.use(requestContext(logger));
  app.use(async (ctx, next) => {
    try {
      await next();
    } finally {
      // While draining, tell keep-alive clients not to reuse the connection (checked as the response goes out).
      if (lifecycle.draining) ctx.set("Connection", "close");
    }
  });
  app.use(problemMiddleware());
  app.use(consoleMiddleware(deps.console));
  app.use(root.routes());
  app.use(api.routes());
  app.use(fallback([root, api]));
  return app;
}

export interface RunningServer {
  /** http://host:port (https:// with `tls`), with the port actually bound. */
  url: string;
  server: Server;
  /** Stops accepting, lets in-flight requests finish (up to the timeout), then cuts what is left. */
  close(): Promise<void>;
}

export interface ListenOptions {
  host: string;
  port: number;
  shutdownTimeoutMs: number;
  logger: Logger;
  /** BERTH_HEADERS_TIMEOUT_MS: a request whose headers take longer is cut off with a 408. */
  headersTimeoutMs?: number;
  /** BERTH_REQUEST_TIMEOUT_MS: a request (headers and body) that takes longer is cut off with a 408. */
  requestTimeoutMs?: number;
  /**
   * Serve over TLS with the certificate and key of these files (the internal listener,
   * BERTH_INTERNAL_TLS_*), read again every `reloadIntervalMs` (default CERTIFICATE_RELOAD_MS) and
   * served to new connections once renewed (api/http/tls.ts).
   */
  tls?: CertificateFiles & { reloadIntervalMs?: number };
}

/** Node's answers to a client that broke the protocol or was too slow, as problems. */
const CLIENT_ERRORS: Record<string, [status: number, code: string, detail: string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, "request_timeout", "The request was not received in time; the connection was closed."],
  HPE_HEADER_OVERFLOW: [431, "headers_too_large", "The request's headers are too large."],
};

/**
 * How long a connection answered before its request reached a handler stays open after the
 * answer, reading and discarding what the client still sends (a lingering close, as Apache's).
 * Closed at once with unread bytes in its buffer, the connection is reset, and a reset drops what
 * the client had not read yet: a client busy for a moment while it still sent (a slow header a
 * line at a time) lost its 408.
 */
const LINGER_MS = 1000;

/** Connections answered by onClientError and lingering: a request that completes on one is never served. */
const answered = new WeakSet<Socket>();

/**
 * What the server does when a client breaks the protocol, is too slow or goes away (Node's
 * 'clientError'): the answer is a problem+json when nothing was written to the connection yet
 * (as Node's own 400/408/431 would be), and the connection is closed: after LINGER_MS when no
 * request of it reached a handler (the request that completes meanwhile is dropped, listen()),
 * at once when one is in a handler (a slow body: its handler must not go on with the rest of it).
 */
function onClientError(logger: Logger): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    const code = err.code ?? "";
    if (answered.has(socket)) return; // more of the same client while it lingers: the timer closes it
    if (code === "ECONNRESET" || code === "EPIPE") {
      socket.destroy();
      return;
    }
    const [status, problemCode, detail] = CLIENT_ERRORS[code] ?? [400, "bad_request", "The request is not valid HTTP."];
    const requestId = randomUUID();
    logger.info({ code: problemCode, status, requestId }, status === 408 ? "client cut off: request not received in time" : "client error");
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) {
      const body = JSON.stringify(renderProblem(new DomainError(status, problemCode, detail), { instance: "/", requestId }));
      const answer =
        `HTTP/1.1 ${status} ${status === 408 ? "Request Timeout" : status === 431 ? "Request Header Fields Too Large" : "Bad Request"}\r\n` +
        `Content-Type: ${PROBLEM_MEDIA_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`;
      if (!inFlight) {
        answered.add(socket);
        socket.end(answer);
        setTimeout(() => socket.destroy(), LINGER_MS).unref();
        return;
      }
      socket.write(answer);
    }
    socket.destroy(err);
  };
}

export async function listen(app: Koa, opts: ListenOptions): Promise<RunningServer> {
  const headersTimeout = opts.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const requestTimeout = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const handler = app.callback();
  const bare = bares.get(app);
  const options = {
    headersTimeout,
    requestTimeout,
    // Node checks both timeouts every this often (30 s by default): a tenth of the shorter, 0.1-1 s.
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(Math.min(headersTimeout, requestTimeout) / 10))),
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    // a connection already answered (onClientError) is never served, whatever completes on it
    if (answered.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    if (!bare?.(req, res)) void handler(req, res);
  };
  let server: Server;
  let stopReloading = () => {};
  if (opts.tls) {
    const pair = readCertificate(opts.tls);
    const tlsServer = createTlsServer({ ...options, ...pair }, onRequest);
    stopReloading = reloadCertificate(tlsServer, opts.tls, { current: pair, intervalMs: opts.tls.reloadIntervalMs, logger: opts.logger });
    // A client that refuses the certificate (or speaks no TLS) ends in a failed handshake, before any request.
    tlsServer.on("tlsClientError", (err: NodeJS.ErrnoException) =>
      opts.logger.info({ code: err.code, reason: err.message }, "internal TLS: a client's handshake failed"),
    );
    opts.logger.info({ certificate: describeCertificate(pair.cert) }, "internal TLS: serving the certificate");
    server = tlsServer;
  } else {
    server = createServer(options, onRequest);
  }
  server.on("clientError", onClientError(opts.logger));
  server.listen({ host: opts.host, port: opts.port });
  try {
    await once(server, "listening");
  } catch (err) {
    stopReloading();
    throw err;
  }
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `${opts.tls ? "https" : "http"}://${host}:${addr.port}`;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      stopReloading();
      const lifecycle = lifecycles.get(app);
      if (lifecycle) lifecycle.draining = true;
      opts.logger.info({ url, timeoutMs: opts.shutdownTimeoutMs }, "shutting down: draining in-flight requests");
      const timer = setTimeout(() => {
        opts.logger.warn({ url }, "shutdown timeout: closing the connections still open");
        server.closeAllConnections();
      }, opts.shutdownTimeoutMs);
      timer.unref();
      server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      server.closeIdleConnections();
    }));
  return { url, server, close };
}

/** The API's listeners: the plain one (BERTH_API_PORT) and, when configured, the internal TLS one. */
export interface Listeners {
  plain: RunningServer;
  /** BERTH_INTERNAL_TLS_PORT's listener: the same app over TLS; undefined when not configured. */
  internal: RunningServer | undefined;
  /** Drains and closes both (the same graceful shutdown, at once). */
  close(): Promise<void>;
}

/** Opens the listeners the configuration asks for, on BERTH_API_HOST, with the same timeouts and shutdown. */
export async function listenAll(app: Koa, config: Config, logger: Logger, opts: { reloadIntervalMs?: number } = {}): Promise<Listeners> {
  const common = {
    host: config.BERTH_API_HOST,
    shutdownTimeoutMs: config.BERTH_SHUTDOWN_TIMEOUT_MS,
    headersTimeoutMs: config.BERTH_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.BERTH_REQUEST_TIMEOUT_MS,
    logger,
  };
  const plain = await listen(app, { ...common, port: config.BERTH_API_PORT });
  let internal: RunningServer | undefined;
  if (config.BERTH_INTERNAL_TLS_PORT !== undefined && config.BERTH_INTERNAL_TLS_CERT_FILE && config.BERTH_INTERNAL_TLS_KEY_FILE) {
    try {
      internal = await listen(app, {
        ...common,
        port: config.BERTH_INTERNAL_TLS_PORT,
        tls: {
          certFile: config.BERTH_INTERNAL_TLS_CERT_FILE,
          keyFile: config.BERTH_INTERNAL_TLS_KEY_FILE,
          ...(opts.reloadIntervalMs ? { reloadIntervalMs: opts.reloadIntervalMs } : {}),
        },
      });
    } catch (err) {
      await plain.close();
      throw err;
    }
  }
  return { plain, internal, close: () => Promise.all([plain.close(), internal?.close()]).then(() => undefined) };
}
