// Transport-free domain errors. Services throw these; one Koa middleware (api/http/problem.ts)
// renders them as RFC 9457 application/problem+json. Nothing here knows about HTTP requests: the
// status is only the error's category, as a number, so that the renderer needs no mapping table.
import type { z } from "zod";
import { errorMessage, statusCode } from "../kube/transport.ts";

/** One offending input field. `field` is `body.<path>`, `query.<name>` or `params.<name>`. */
export interface FieldError {
  field: string;
  message: string;
}

export interface DomainErrorOptions {
  /** Extra machine-readable facts, rendered as the `details` member of the problem. Never secrets. */
  details?: Record<string, unknown>;
  fieldErrors?: FieldError[];
  cause?: unknown;
}

export class DomainError extends Error {
  /** Stable machine-readable code (snake_case); the problem type is https://berth.dev/problems/<code>. */
  readonly code: string;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  readonly fieldErrors?: FieldError[];

  constructor(status: number, code: string, detail: string, opts: DomainErrorOptions = {}) {
    super(detail, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    if (opts.details) this.details = opts.details;
    if (opts.fieldErrors) this.fieldErrors = opts.fieldErrors;
  }
}

export class BadRequestError extends DomainError {
  constructor(code: string, detail: string, opts?: DomainErrorOptions) {
    super(400, code, detail, opts);
  }
}

export class UnauthorizedError extends DomainError {
  constructor(detail = "A valid API key is required: send it as 'Authorization: Bearer <key>'.", opts?: DomainErrorOptions) {
    super(401, "unauthorized", detail, opts);
  }
}

export class ForbiddenError extends DomainError {
  constructor(code: string, detail: string, opts?: DomainErrorOptions) {
    super(403, code, detail, opts);
  }
}

export class NotFoundError extends DomainError {
  constructor(code: string, detail: string, opts?: DomainErrorOptions) {
    super(404, code, detail, opts);
  }
}

export class ConflictError extends DomainError {
  constructor(code: string, detail: string, opts?: DomainErrorOptions) {
    super(409, code, detail, opts);
  }
}

export class ValidationError extends DomainError {
  declare readonly fieldErrors: FieldError[];
  constructor(fieldErrors: FieldError[], detail?: string, opts?: Omit<DomainErrorOptions, "fieldErrors">) {
    super(422, "validation_failed", detail ?? describeFieldErrors(fieldErrors), { ...opts, fieldErrors });
  }
}

export class UnavailableError extends DomainError {
  /** When a retry can be timed: the answer's Retry-After, in seconds */
  readonly retryAfterSeconds?: number;
  constructor(code: string, detail: string, opts?: DomainErrorOptions & { retryAfterSeconds?: number }) {
    super(503, code, detail, opts);
    if (opts?.retryAfterSeconds !== undefined) this.retryAfterSeconds = opts.retryAfterSeconds;
  }
}

function describeFieldErrors(errors: FieldError[]): string {
  if (errors.length === 0) return "The request is invalid.";
  if (errors.length === 1) return `The request is invalid: ${errors[0]!.field}: ${errors[0]!.message}.`;
  return `The request is invalid: ${errors.length} fields failed validation (see errors).`;
}

// ---------------------------------------------------------------------------------------------
// zod issues -> field errors

/** `["a", 0, "b"]` -> `a[0].b` */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += (out === "" ? "" : ".") + String(seg);
  }
  return out;
}

function join(prefix: string, path: readonly PropertyKey[]): string {
  const rest = formatPath(path);
  if (rest === "") return prefix;
  return rest.startsWith("[") ? `${prefix}${rest}` : `${prefix}.${rest}`;
}

/**
 * Every issue of a zod error as a field error, with the field prefixed by where the input came
 * from. An unknown key is reported once per key, at the key's own path; an invalid key of a
 * record, with its own messages, at its path.
 */
export function fieldErrorsFromZod(error: z.ZodError, prefix: "body" | "query" | "params"): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) out.push({ field: join(prefix, [...issue.path, key]), message: "unknown field" });
      continue;
    }
    if (issue.code === "invalid_key") {
      // A record's key (e.g. a variable name): its own problems, at the key's path.
      for (const inner of issue.issues) out.push({ field: join(prefix, issue.path), message: inner.message });
      continue;
    }
    const missing = issue.code === "invalid_type" && /received undefined$/.test(issue.message);
    out.push({ field: join(prefix, issue.path), message: missing ? "required" : issue.message });
  }
  return out;
}

/**
 * A write the API server refused for the workspace's ResourceQuota (403 "exceeded quota"), as a
 * 409 quota_exceeded naming the limit; undefined for any other error.
 */
export function quotaExceeded(err: unknown, what: string): DomainError | undefined {
  if (statusCode(err) !== 403) return undefined;
  const message = errorMessage(err);
  // the quota controller has not counted the namespace yet (a resource it has just discovered)
  if (message.includes("status unknown for quota"))
    return new UnavailableError("quota_not_counted", `The workspace's quota of ${what} is being counted; retry in a few seconds.`);
  const m = /exceeded quota: [^,]+, requested: ([^,]+), used: ([^,]+), limited: ([^,"]+)/.exec(message);
  if (!m) return undefined;
  return new ConflictError(
    "quota_exceeded",
    `The workspace is at its limit of ${what} (${m[3]!.trim()}; used: ${m[2]!.trim()}): remove some first, or ask the platform team for a larger quota.`,
    { details: { limited: m[3]!.trim(), used: m[2]!.trim() } },
  );
}
