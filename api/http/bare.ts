// The bare path of bare routes (RouteDef.bare, defineBareRoute): a plain GET of such a route is
// answered on Node's request, before Koa: no middleware chain, no matching over the whole route
// table, no context objects. What it does is what the Koa path does for that request, in the same
// order: request id, params validated with the route's schema, the handler, the response checked
// against its documented schema when BERTH_VALIDATE_RESPONSES is on, a problem+json for whatever
// the handler throws, and one access-log line. Any request it does not take whole (another method,
// a query, a body, params that do not pass) goes on to Koa, which answers it (or refuses it) as
// for every route.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../kube/logger.ts";
import { requestIdOf } from "./context.ts";
import { PROBLEM_MEDIA_TYPE, problemHeaders, renderProblem, toDomainError } from "./problem.ts";
import { API_PREFIX, JSON_MEDIA_TYPE, ResponseSchemaMismatchError, responseMismatches } from "./router.ts";
import { pathParamNames, type BareHandler, type RouteDef, type RouteResult } from "./route.ts";
import { hasBody } from "./body.ts";

export interface BareDeps {
  logger: Logger;
  validateResponses: boolean;
  /** While the server drains, every answer tells the client to close the connection. */
  draining: () => boolean;
}

/** Answers the request and returns true, or returns false and leaves it to Koa. */
export type BareDispatch = (req: IncomingMessage, res: ServerResponse) => boolean;

interface Compiled { route: RouteDef & { bare: BareHandler }; path: string; re: RegExp; names: string[] }

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The dispatcher of the routes defined with defineBareRoute; undefined when there is none. */
export function bareDispatcher(routes: readonly RouteDef[], deps: BareDeps): BareDispatch | undefined {
  const compiled: Compiled[] = routes.filter((r): r is RouteDef & { bare: BareHandler } => r.bare !== undefined).map((route) => {
    const path = `${API_PREFIX}${route.path}`;
    return { route, path, names: pathParamNames(route.path), re: new RegExp(`^${escapeRegExp(path).replace(/:[A-Za-z0-9_]+/g, "([^/]+)")}$`) };
  });
  if (compiled.length === 0) return undefined;
  return (req, res) => {
    const url = req.url ?? "";
    if (req.method !== "GET" || url.includes("?") || hasBody(req)) return false;
    for (const c of compiled) {
      const m = c.re.exec(url);
      if (!m) continue;
      const raw: Record<string, string> = {};
      for (let i = 0; i < c.names.length; i++) {
        let v: string;
        try { v = decodeURIComponent(m[i + 1]!); } catch { return false; }
        if (!v.isWellFormed() || v.includes("\u0000")) return false;
        raw[c.names[i]!] = v;
      }
      const parsed = c.route.params ? c.route.params.safeParse(raw) : { success: true as const, data: raw };
      if (!parsed.success) return false;
      serve(c, parsed.data, req, res, deps);
      return true;
    }
    return false;
  };
}

function serve(c: Compiled, params: unknown, req: IncomingMessage, res: ServerResponse, deps: BareDeps): void {
  const started = process.hrtime.bigint();
  const incoming = req.headers["x-request-id"];
  const requestId = requestIdOf(typeof incoming === "string" ? incoming : undefined);
  const path = req.url ?? "";

  const send = (status: number, headers: Record<string, string> | undefined, body: string | Buffer | undefined, type: string | undefined): void => {
    res.statusCode = status;
    res.setHeader("X-Request-Id", requestId);
    res.setHeader("X-Content-Type-Options", "nosniff");
    for (const k in headers) res.setHeader(k, headers[k]!);
    if (deps.draining()) res.setHeader("Connection", "close");
    if (body !== undefined && type) res.setHeader("Content-Type", type);
    res.setHeader("Content-Length", body === undefined ? 0 : Buffer.byteLength(body));
    res.end(body);
    const line = { requestId, method: "GET", path, route: c.path, status, durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100 };
    if (status >= 500) deps.logger.error(line, "request");
    else deps.logger.info(line, "request");
  };

  const fail = (err: unknown): void => {
    if (res.headersSent) { res.destroy(err instanceof Error ? err : undefined); return; }
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    const { error, internal } = toDomainError(err);
    if (internal) deps.logger.error({ requestId, err }, "request failed with an unexpected error");
    else if (error.status >= 500) deps.logger.warn({ requestId, code: error.code, err: error.cause ?? error }, error.message);
    send(error.status, problemHeaders(error), JSON.stringify(renderProblem(error, { instance: path, requestId })), PROBLEM_MEDIA_TYPE);
  };

  const ok = (result: RouteResult): void => {
    try { answerWith(result); } catch (err) { fail(err); }   // a header Node refuses, say
  };
  const answerWith = (result: RouteResult): void => {
    if (deps.validateResponses) {
      const reasons = responseMismatches(c.route, result);
      if (reasons.length > 0) {
        deps.logger.error({ requestId, status: result.status, reasons }, "response does not match its documented schema");
        fail(new ResponseSchemaMismatchError(c.route.operationId, result.status, reasons));
        return;
      }
    }
    const none = result.body === undefined || result.status === 204 || result.status === 304;
    const raw = !none && c.route.produces !== undefined && c.route.produces !== JSON_MEDIA_TYPE && (typeof result.body === "string" || Buffer.isBuffer(result.body));
    const body = none ? undefined : raw ? result.body as string | Buffer : JSON.stringify(result.body);
    send(result.status, result.headers, body, none ? undefined : raw ? c.route.produces : JSON_MEDIA_TYPE);
  };

  const header = (name: string): string => {
    const v = req.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(", ") : v ?? "";
  };
  let answer: RouteResult | Promise<RouteResult>;
  try {
    answer = c.route.bare({ params, header, host: req.headers.host ?? "" });
  } catch (err) {
    fail(err);
    return;
  }
  if (answer instanceof Promise) answer.then(ok, fail);
  else ok(answer);
}
