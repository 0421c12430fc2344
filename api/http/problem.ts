// The single error middleware: every failure of a request becomes an RFC 9457
// application/problem+json response with a stable `code`. Domain errors carry their own status
// and code; anything else is a 500 "internal" whose details stay in the log (with the request id).
import { STATUS_CODES } from "node:http";
import type Koa from "koa";
import { z } from "zod";
import { DomainError, UnavailableError, type FieldError } from "../errors.ts";
import { requestState } from "./context.ts";
import type { Logger } from "../../kube/logger.ts";
import { hasBody } from "./body.ts";
import { TooManyRequestsError } from "./limits.ts";

export const PROBLEM_TYPE_BASE = "https://berth.dev/problems/";
export const PROBLEM_MEDIA_TYPE = "application/problem+json";

export const FieldErrorSchema = z
  .object({
    field: z.string().describe("Where the offending value is: body.<path>, query.<name> or params.<name>"),
    message: z.string(),
  })
  .strict()
  .meta({ id: "FieldError" });

export const ProblemSchema = z
  .object({
    type: z.string().describe("https://berth.dev/problems/<code>"),
    title: z.string().describe("Short summary of the problem type"),
    status: z.int().min(400).max(599),
    detail: z.string().describe("Human-readable explanation of this occurrence"),
    instance: z.string().describe("Path of the request"),
    code: z.string().describe("Stable machine-readable error code"),
    requestId: z.string().describe("Also sent as the X-Request-Id header; quote it when reporting a problem"),
    errors: z.array(FieldErrorSchema).optional().describe("Every offending field (validation_failed)"),
    details: z.record(z.string(), z.unknown()).optional().describe("Extra machine-readable facts about this occurrence"),
  })
  .strict()
  .meta({ id: "Problem", description: "RFC 9457 problem details" });
export type Problem = z.output<typeof ProblemSchema>;

/** 405: the path exists but not with this method. The renderer adds the Allow header. */
export class MethodNotAllowedError extends DomainError {
  readonly allow: string[];
  constructor(method: string, allow: string[]) {
    super(405, "method_not_allowed", `${method} is not allowed here; allowed: ${allow.join(", ")}.`, { details: { allow } });
    this.allow = allow;
  }
}

export const INTERNAL_DETAIL = "An internal error occurred. Quote the request id when reporting it.";

/** Any thrown value as the domain error to render; `internal` when it is not one of ours. */
export function toDomainError(err: unknown): { error: DomainError; internal: boolean } {
  if (err instanceof DomainError) return { error: err, internal: false };
  return { error: new DomainError(500, "internal", INTERNAL_DETAIL, { cause: err }), internal: true };
}

export function problemTitle(status: number): string {
  return STATUS_CODES[status] ?? "Error";
}

/** The problem document for an error (pure). */
export function renderProblem(error: DomainError, at: { instance: string; requestId: string }): Problem {
  const problem: Problem = {
    type: `${PROBLEM_TYPE_BASE}${error.code}`,
    title: problemTitle(error.status),
    status: error.status,
    detail: error.message,
    instance: at.instance,
    code: error.code,
    requestId: at.requestId,
  };
  if (error.fieldErrors && error.fieldErrors.length > 0)
    problem.errors = error.fieldErrors.map((e: FieldError) => ({ field: e.field, message: e.message }));
  if (error.details) problem.details = error.details;
  return problem;
}

/** Headers that belong to an error's status: Allow on 405, WWW-Authenticate on 401, Retry-After on 429 (and on a 503 that sets it). */
export function problemHeaders(error: DomainError): Record<string, string> {
  const h: Record<string, string> = {};
  if (error instanceof MethodNotAllowedError) h.Allow = error.allow.join(", ");
  if (error instanceof TooManyRequestsError) h["Retry-After"] = String(error.retryAfterSeconds);
  if (error instanceof UnavailableError && error.retryAfterSeconds !== undefined) h["Retry-After"] = String(error.retryAfterSeconds);
  if (error.status === 401) h["WWW-Authenticate"] = `Bearer realm="berth"`;
  return h;
}

export function sendProblem(ctx: Koa.Context, error: DomainError): void {
  const { requestId } = requestState(ctx);
  ctx.status = error.status;
  for (const [k, v] of Object.entries(problemHeaders(error))) ctx.set(k, v);
  // The rest of an upload refused before it was read (413, or 401/429 and the like before the
  // body) is not read either: the connection closes instead of taking it in.
  if (error.status === 413 || (hasBody(ctx.req) && !ctx.req.complete)) ctx.set("Connection", "close");
  ctx.type = PROBLEM_MEDIA_TYPE;
  ctx.body = JSON.stringify(renderProblem(error, { instance: ctx.path, requestId }));
}

/** The error to render for whatever a request threw, logged: an unexpected one as an error with its cause, a 5xx of ours as a warning. */
export function reportError(err: unknown, log: Logger): DomainError {
  const { error, internal } = toDomainError(err);
  if (internal) log.error({ err }, "request failed with an unexpected error");
  else if (error.status >= 500) log.warn({ code: error.code, err: error.cause ?? error }, error.message);
  return error;
}

/** Outermost-but-one middleware (inside the request context): renders whatever is thrown. */
export function problemMiddleware(): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const error = reportError(err, requestState(ctx).log);
      ctx.remove("Content-Type");
      sendProblem(ctx, error);
    }
  };
}
