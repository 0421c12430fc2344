// Per-request state: the request id (X-Request-Id, taken from the caller when it is a safe token,
// generated otherwise), a child logger carrying it, and one access-log line per request with
// method, path, matched route, status and duration (never bodies, queries or headers; a key that a
// careless client put in the path is scrubbed from the line by the logger, and one sent as the
// request id is replaced by a generated id).
import { randomUUID } from "node:crypto";
import type Koa from "koa";
import { scrubTokens, type Logger } from "../../kube/logger.ts";

export interface RequestState {
  requestId: string;
  log: Logger;
}

const STATE = Symbol("berth.request");
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestState(ctx: Koa.Context): RequestState {
  const s = (ctx.state as Record<symbol, RequestState | undefined>)[STATE];
  if (!s) throw new Error("requestContext middleware is not installed");
  return s;
}

/** The request's id: the caller's X-Request-Id when it is a safe token and no credential (it is logged and echoed), else a new one. */
export function requestIdOf(incoming: string | undefined): string {
  return incoming !== undefined && SAFE_REQUEST_ID.test(incoming) && scrubTokens(incoming) === incoming ? incoming : randomUUID();
}

/** The one access-log line of a request (an error line for a 5xx), with its duration since `started` (process.hrtime.bigint()). */
export function logAccess(
  log: Logger,
  line: { requestId?: string; method: string; path: string; route: string | undefined; status: number },
  started: bigint,
): void {
  const entry = { ...line, durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100 };
  if (line.status >= 500) log.error(entry, "request");
  else log.info(entry, "request");
}

export function requestContext(logger: Logger): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = requestIdOf(ctx.get("X-Request-Id"));
    const log = logger.child({ requestId });
    (ctx.state as Record<symbol, RequestState>)[STATE] = { requestId, log };
    ctx.set("X-Request-Id", requestId);
    ctx.set("X-Content-Type-Options", "nosniff");
    try {
      await next();
    } finally {
      const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      logAccess(
        log,
        { method: ctx.method, path: ctx.path, route: typeof matched === "string" ? matched : undefined, status: ctx.status },
        started,
      );
    }
  };
}
