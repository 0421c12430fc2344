// The console's typed API client: openapi-fetch over the generated `paths` (openapi.gen.ts, made
// by node hack/gen.ts), so that a change of the API fails the console's type-check. Requests go to
// the same origin with the session cookie (HttpOnly: the script never sees it); every write
// carries the session's CSRF token, which the script learns from GET /console/session.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, operations, paths } from "./openapi.gen.ts";

export type Schemas = components["schemas"];
export type Operations = operations;
export type Problem = Schemas["Problem"];
export type Session = Schemas["ConsoleSession"];

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

let csrfToken: string | undefined;
let onSessionEnded: (() => void) | undefined;

/** The session the writes are made in (its CSRF token); undefined when signed out. */
export function useSessionToken(session: Session | undefined): void {
  csrfToken = session?.csrfToken;
}

/** Called when a workspace call answers 401: the session ended (expired, signed out elsewhere, key revoked). */
export function whenSessionEnds(handler: () => void): void {
  onSessionEnded = handler;
}

const session: Middleware = {
  onRequest({ request }) {
    if (!SAFE_METHODS.has(request.method) && csrfToken) request.headers.set("X-Berth-CSRF", csrfToken);
    return request;
  },
  onResponse({ response, schemaPath }) {
    if (response.status === 401 && !schemaPath.startsWith("/console/")) onSessionEnded?.();
    return undefined;
  },
};

export const api = createClient<paths>({ baseUrl: "/api/v1", credentials: "same-origin" });
api.use(session);

/** A thrown problem+json answer (or a network failure shaped as one). */
export class ProblemError extends Error {
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(problem.detail);
    this.problem = problem;
  }
}

function isProblem(v: unknown): v is Problem {
  return typeof v === "object" && v !== null && typeof (v as Problem).title === "string" && typeof (v as Problem).detail === "string";
}

/** A problem from anything a call threw or answered. */
export function toProblem(err: unknown, response?: Response): Problem {
  if (err instanceof ProblemError) return err.problem;
  if (isProblem(err)) return err;
  const status = response?.status ?? 0;
  const detail =
    typeof err === "string" && err
      ? err
      : err instanceof Error
        ? err.message
        : status
          ? `The API answered ${status}.`
          : "The API could not be reached.";
  return {
    type: "about:blank",
    title: status ? response?.statusText || "Error" : "Network error",
    status,
    detail,
    instance: "",
    code: status ? "unexpected_response" : "network_error",
    requestId: response?.headers.get("X-Request-Id") ?? "",
  };
}

/** The data of an openapi-fetch answer; throws a ProblemError for an error answer. */
export async function call<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await pending;
  } catch (err) {
    throw new ProblemError(toProblem(err));
  }
  if (answer.error !== undefined || !answer.response.ok) throw new ProblemError(toProblem(answer.error, answer.response));
  return answer.data as T;
}
