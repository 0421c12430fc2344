// One route definition, used twice: the router validates requests (and, in tests, responses)
// with its zod schemas, and the OpenAPI generator documents it from the same schemas.
import type Koa from "koa";
import type { z } from "zod";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { Logger } from "../../kube/logger.ts";
import type { LimitClass } from "./limits.ts";

/**
 * Who may call a route.
 * - "none": public (health, readiness, the OpenAPI document).
 * - "workspace": a workspace API key (`ws_sk_...`); a `:wsId`/`:workspaceId` path parameter must
 *   name the key's own workspace (otherwise 404 workspace_not_found).
 * - "platform-admin": a platform admin key (`pa_sk_...`), minted by `node api/cli.ts admin-key create`.
 * - "workspace-or-platform-admin": either of the two; the handler tells them apart by `caller.kind`
 *   (a workspace acts for itself, a platform admin for the platform: the guard templates). A
 *   `:wsId`/`:workspaceId` path parameter is refused here (checkRoutes).
 * - "app-key": the scoped key of an app's GOVDB_CONNECTION, checked by the AppKeyVerifier given
 *   to buildServer.
 * - "operator": the Berth operator's Kubernetes ServiceAccount token, checked with a TokenReview by
 *   the OperatorVerifier given to buildServer (the user must be BERTH_OPERATOR_USERNAME).
 */
export type AuthMode = "none" | "workspace" | "platform-admin" | "workspace-or-platform-admin" | "app-key" | "operator";

/** The caller of a "workspace" route. */
export interface Principal {
  kind: "workspace";
  workspaceId: string;
  /**
   * The workspace key's id; for a console session a member opened by signing in with the identity
   * provider, which has no key, "member:<member id>" (api/console/sessions.ts memberKeyId).
   */
  keyId: string;
  /** Set when the caller is a workspace member's console session (no key). */
  member?: { id: string; email: string } | undefined;
}

/** The caller of a "platform-admin" route. */
export interface PlatformAdminPrincipal {
  kind: "platform-admin";
  keyId: string;
}

/** The caller of an "app-key" route, as established by the AppKeyVerifier. */
export interface AppPrincipal {
  kind: "app";
  workspaceId: string;
  appId: string;
  keyId: string;
  /** The app's governance store as the key check found it (read in the same query), or null when it has none. */
  store: { schema: string; role: string; active: boolean; configVersion: number } | null;
}

/** The caller of an "operator" route: the Kubernetes user a TokenReview established. */
export interface OperatorPrincipal {
  kind: "operator";
  username: string;
}

/** Every kind of authenticated caller. */
export type Caller = Principal | PlatformAdminPrincipal | AppPrincipal | OperatorPrincipal;

/**
 * Verifies an app's scoped key (the credential inside GOVDB_CONNECTION). Returns the caller, or
 * undefined when the token is not a valid, current app key (the router answers 401). Must compare
 * secrets in constant time and never log the token.
 */
export type AppKeyVerifier = (
  token: string,
  ctx: { em: EntityManager; log: Logger; params: Readonly<Record<string, string>> },
) => Promise<AppPrincipal | undefined>;

/**
 * Verifies a bearer token on "operator" routes. `unauthenticated` (401): not a valid token;
 * `forbidden` (403): a valid token of another user. Throws when the check itself cannot be made.
 * Must never log the token.
 */
export type OperatorVerifier = (
  token: string,
  ctx: { log: Logger },
) => Promise<{ ok: true; principal: OperatorPrincipal } | { ok: false; reason: "unauthenticated" | "forbidden" }>;

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The body's bytes as received, when there is one (HMAC signatures of webhooks are over these). */
  rawBody: Buffer | undefined;
  /** The workspace key's principal on "workspace" routes (and "workspace-or-platform-admin" ones called with one); undefined otherwise. */
  principal: Principal | undefined;
  /** The authenticated caller of any kind; undefined on "none" routes. */
  caller: Caller | undefined;
  /** Forked for this request; the handler flushes what it changes. */
  em: EntityManager;
  /** Child logger carrying requestId, method and route. */
  log: Logger;
  requestId: string;
  /** Escape hatch; handlers should not need it. */
  koa: Koa.Context;
}

export interface RouteResult {
  status: number;
  body?: unknown;
  /** Response headers; a list sends the header once per item (several Set-Cookie). */
  headers?: Record<string, string | string[]>;
}

export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";

/** What a bare route's handler sees of a request (see RouteDef.bare). */
export interface BareRequest<P = unknown> {
  params: P;
  /** A request header's value, "" when absent (as Koa's ctx.get). */
  header: (name: string) => string;
  /** The Host header (Koa's ctx.host). */
  host: string;
}

export type BareHandler<P = unknown> = (req: BareRequest<P>) => RouteResult | Promise<RouteResult>;

export interface RouteDef {
  method: HttpMethod;
  /** koa-router style, relative to /api/v1, e.g. "/workspaces/:wsId/apps/:appId". */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthMode;
  /**
   * Which rate-limit budget a call spends (api/http/limits.ts): "api" when omitted, "ingest" for
   * trace ingestion, "guard" for guard checks, "none" for callers limited elsewhere (the ingress's forward-auth checks, the
   * operator), with the reason next to the route.
   */
  rateLimit?: LimitClass;
  /** Path parameters (strings; use z.coerce for numbers). */
  params?: z.ZodType;
  /** Query parameters (strings; use z.coerce). Must be a .strict() object: unknown parameters are refused. */
  query?: z.ZodType;
  /** JSON request body. Must be .strict() (unknown fields are refused); checked when the server is built. */
  body?: z.ZodType;
  /**
   * The body may hold text PostgreSQL cannot store (NUL, lone surrogates) because the handler
   * judges each item of a batch itself and rejects such items one by one (trace ingestion). Every
   * other route refuses it with a 422 before its schemas run.
   */
  itemsCheckText?: boolean;
  /** Body size limit of this route in bytes; the server's BERTH_BODY_LIMIT_BYTES when omitted. */
  bodyLimitBytes?: number;
  /** Documented responses: status -> schema of the JSON body, or null for no body (e.g. 204). */
  responses: Record<number, z.ZodType | null>;
  /** Media type of the success body; "application/json" when omitted (a string body is sent as is otherwise). */
  produces?: string;
  // The handler is checked against the schemas by defineRoute; stored erased.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  handler: (ctx: RouteContext<any, any, any>) => Promise<RouteResult>;
  /**
   * Set by defineBareRoute: the route's handler also runs before Koa (api/http/bare.ts) for a
   * plain GET of its path (params valid, no query, no body), the hot path of the edge. It is the
   * same function as `handler`, so both answer alike.
   */
  bare?: BareHandler;
}

export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> extends Omit<
  RouteDef,
  "params" | "query" | "body" | "handler"
> {
  params?: P;
  query?: Q;
  body?: B;
  handler: (ctx: RouteContext<z.output<P>, z.output<Q>, z.output<B>>) => Promise<RouteResult>;
}

/** Defines a route; the handler's ctx.params/query/body are the parsed outputs of the given schemas. */
export function defineRoute<P extends z.ZodType = z.ZodNever, Q extends z.ZodType = z.ZodNever, B extends z.ZodType = z.ZodNever>(
  def: RouteSpec<P, Q, B>,
): RouteDef {
  return def;
}

/**
 * Defines a route that answers from memory, from its path parameters and headers alone: a GET with
 * auth "none", no rate limit, no query and no body (checkRoutes holds it to that). The server
 * answers a plain request to it before Koa (api/http/bare.ts: no middleware chain, no router
 * matching over every route); anything else about the request (a query, a body, invalid params,
 * another method) goes through Koa as usual, to the same handler.
 */
export function defineBareRoute<P extends z.ZodType>(
  def: Omit<RouteDef, "handler" | "method" | "auth" | "query" | "body" | "params" | "bare"> & { params: P; bare: BareHandler<z.output<P>> },
): RouteDef {
  const bare = def.bare as BareHandler;
  return {
    ...def,
    method: "get",
    auth: "none",
    bare,
    handler: ({ params, koa }) => Promise.resolve(bare({ params, header: (name) => koa.get(name), host: koa.host })),
  };
}

/** "/workspaces/:wsId" -> "/workspaces/{wsId}" */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

/** Names of the `:params` in a koa-router path. */
export function pathParamNames(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
}
