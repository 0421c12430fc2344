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
import { logAccess, requestIdOf } from "./context.ts";
import { PROBLEM_MEDIA_TYPE, problemHeaders, renderProblem, reportError } from "./problem.ts";
import { API_PREFIX, checkResponse, encodeBody, unstorableText } from "./router.ts";
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

interface Compiled {
  route: RouteDef & { bare: BareHandler };
  path: string;
  re: RegExp;
  names: string[];
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The dispatcher of the routes defined with defineBareRoute; undefined when there is none. */
export function bareDispatcher(routes: readonly RouteDef[], deps: BareDeps): BareDispatch | undefined {
  const compiled: Compiled[] = routes
    .filter((r): r is RouteDef & { bare: BareHandler } => r.bare !== undefined)
    .map((route) => {
      const path = `${API_PREFIX}${route.path}`;
      return {
        route,
        path,
        names: pathParamNames(route.path),
        re: new RegExp(`^${escapeRegExp(path).replace(/:[A-Za-z0-9_]+/g, "([^/]+)")}$`),
      };
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
        try {
          raw[c.names[i]!] = decodeURIComponent(m[i + 1]!);
        } catch {
          return false;
        }
      }
      // Text PostgreSQL cannot store, or params the schema refuses: Koa's router answers with its problem.
      if (unstorableText(raw, "params").length > 0) return false;
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

  const send = (
    status: number,
    headers: Record<string, string | string[]> | undefined,
    encoded: { body: string | Buffer; type: string } | undefined,
  ): void => {
    res.statusCode = status;
    res.setHeader("X-Request-Id", requestId);
    res.setHeader("X-Content-Type-Options", "nosniff");
    for (const k in headers) res.setHeader(k, headers[k]!);
    if (deps.draining()) res.setHeader("Connection", "close");
    if (encoded) res.setHeader("Content-Type", encoded.type);
    res.setHeader("Content-Length", encoded ? Buffer.byteLength(encoded.body) : 0);
    res.end(encoded?.body);
    logAccess(deps.logger, { requestId, method: "GET", path, route: c.path, status }, started);
  };

  // Failures are rare: only they pay for a child logger carrying the request id.
  const fail = (err: unknown): void => {
    if (res.headersSent) {
      res.destroy(err instanceof Error ? err : undefined);
      return;
    }
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    const error = reportError(err, deps.logger.child({ requestId }));
    send(error.status, problemHeaders(error), {
      body: JSON.stringify(renderProblem(error, { instance: path, requestId })),
      type: PROBLEM_MEDIA_TYPE,
    });
  };

  const ok = (result: RouteResult): void => {
    try {
      if (deps.validateResponses) checkResponse(c.route, result, deps.logger.child({ requestId }));
      send(result.status, result.headers, encodeBody(c.route, result));
    } catch (err) {
      fail(err); // an undocumented response, a header Node refuses
    }
  };

  const header = (name: string): string => {
    const v = req.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(", ") : (v ?? "");
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
