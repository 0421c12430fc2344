// Mounts RouteDefs under /api/v1. Per request: authenticate (route.auth), read the JSON body,
// validate params, query and body with the route's zod schemas (every offending field at once),
// fork the EntityManager (on first use), call the handler, optionally check the response against its documented
// schema, and write status, headers and body.
import type { TLSSocket } from "node:tls";
import Router, { type RouterMiddleware } from "@koa/router";
import type Koa from "koa";
import type { EntityManager, MikroORM } from "@mikro-orm/postgresql";
import { z } from "zod";
import {
  DomainError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
  fieldErrorsFromZod,
  type FieldError,
} from "../errors.ts";
import { WORKSPACE_PARAMS, type Authenticator } from "../auth/authenticate.ts";
import { PayloadTooLargeError, readJsonBody } from "./body.ts";
import { CSRF_HEADER } from "../console/sessions.ts";
import { requestState } from "./context.ts";
import { TooManyRequestsError, addressCaller, budgetName, clientAddress, rateLimitHeaders, type RateLimits } from "./limits.ts";
import { MethodNotAllowedError } from "./problem.ts";
import { pathParamNames, type RouteContext, type RouteDef, type RouteResult } from "./route.ts";
import type { Logger } from "../../kube/logger.ts";

export const API_PREFIX = "/api/v1";
export const JSON_MEDIA_TYPE = "application/json";

export interface RouterDeps {
  orm: MikroORM;
  authenticator: Authenticator;
  bodyLimitBytes: number;
  /** Per-caller budgets (BERTH_RATE_LIMIT_*). */
  limits: RateLimits;
  /** The clock of the limits, in ms (Date.now; tests pass their own). */
  now: () => number;
  /** Whether a peer is a trusted proxy whose X-Forwarded-For names the client (BERTH_TRUSTED_PROXIES). */
  trustedProxy?: ((address: string) => boolean) | undefined;
  /** Check every response against `responses[status]` (BERTH_VALIDATE_RESPONSES). */
  validateResponses: boolean;
}

// ---------------------------------------------------------------------------------------------
// Definition checks (at build time, so a bad route never serves)

type JsonNode = Record<string, unknown>;

const CONSTRAINT_KEYWORDS = new Set(["if", "then", "else", "not"]);

/** Paths (in JSON Schema) of object schemas that silently drop unknown keys (zod's default). */
export function nonStrictObjects(schema: z.ZodType): string[] {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", cycles: "ref", reused: "inline" }) as JsonNode;
  const out: string[] = [];
  const walk = (node: unknown, at: string): void => {
    if (Array.isArray(node)) {
      node.forEach((n, i) => walk(n, `${at}/${i}`));
      return;
    }
    if (!node || typeof node !== "object") return;
    const n = node as JsonNode;
    if (n.properties !== undefined && n.additionalProperties === undefined) out.push(at === "" ? "/" : at);
    // if/then/else/not only constrain the object they sit in (documented cross-field rules): no object is defined there
    for (const [k, v] of Object.entries(n)) if (!CONSTRAINT_KEYWORDS.has(k)) walk(v, `${at}/${k}`);
  };
  walk(json, "");
  return out;
}

/** Throws when route definitions are inconsistent; run before serving and by the OpenAPI generator. */
export function checkRoutes(routes: readonly RouteDef[]): void {
  const problems: string[] = [];
  const ops = new Set<string>();
  const endpoints = new Set<string>();
  for (const r of routes) {
    const where = `${r.method.toUpperCase()} ${r.path} (${r.operationId})`;
    if (ops.has(r.operationId)) problems.push(`${where}: duplicate operationId`);
    ops.add(r.operationId);
    const endpoint = `${r.method} ${r.path.replace(/:[A-Za-z0-9_]+/g, ":")}`;
    if (endpoints.has(endpoint)) problems.push(`${where}: duplicate method and path`);
    endpoints.add(endpoint);
    if (!r.path.startsWith("/")) problems.push(`${where}: path must start with /`);
    if (Object.keys(r.responses).length === 0) problems.push(`${where}: no documented response`);
    for (const [part, schema] of [
      ["body", r.body],
      ["query", r.query],
    ] as const) {
      if (!schema) continue;
      const loose = nonStrictObjects(schema);
      if (loose.length > 0) problems.push(`${where}: ${part} schema must refuse unknown keys (.strict()) at ${loose.join(", ")}`);
    }
    if (
      r.auth === "workspace-or-platform-admin" &&
      pathParamNames(r.path).some((n) => (WORKSPACE_PARAMS as readonly string[]).includes(n))
    ) {
      problems.push(
        `${where}: a workspace-or-platform-admin route cannot name a workspace in its path (a platform admin key is not scoped to one)`,
      );
    }
    if (r.bare && (r.method !== "get" || r.auth !== "none" || r.rateLimit !== "none" || r.query || r.body)) {
      problems.push(`${where}: a bare route must be a GET with auth "none", rateLimit "none", no query and no body`);
    }
    if (r.params) {
      const json = z.toJSONSchema(r.params, { io: "input", unrepresentable: "any" }) as { properties?: Record<string, unknown> };
      const declared = Object.keys(json.properties ?? {}).sort();
      const inPath = pathParamNames(r.path).sort();
      if (declared.join() !== inPath.join())
        problems.push(`${where}: params schema declares [${declared.join(", ")}] but the path has [${inPath.join(", ")}]`);
    }
  }
  if (problems.length > 0) throw new Error(`invalid route definitions:\n  ${problems.join("\n  ")}`);
}

// ---------------------------------------------------------------------------------------------
// Response checks

export class ResponseSchemaMismatchError extends DomainError {
  constructor(operationId: string, status: number, reasons: string[]) {
    super(500, "response_schema_mismatch", `The ${operationId} response (status ${status}) does not match the documented schema.`, {
      details: { operationId, status, reasons },
    });
  }
}

/** Why a handler's result does not match the route's documented responses; [] when it does. */
export function responseMismatches(route: RouteDef, result: RouteResult): string[] {
  if (!Object.hasOwn(route.responses, result.status)) {
    return [`status ${result.status} is not documented (documented: ${Object.keys(route.responses).join(", ")})`];
  }
  const schema = route.responses[result.status];
  if (schema === null || schema === undefined) {
    return result.body === undefined ? [] : [`status ${result.status} is documented without a body but the handler returned one`];
  }
  if (result.body === undefined) return [`status ${result.status} is documented with a body but the handler returned none`];
  // Check what goes over the wire (Dates become strings, undefined members disappear).
  const wire: unknown = isJson(route) ? JSON.parse(JSON.stringify(result.body)) : result.body;
  const parsed = schema.safeParse(wire);
  if (parsed.success) return [];
  return fieldErrorsFromZod(parsed.error, "body").map((e) => `${e.field}: ${e.message}`);
}

function isJson(route: RouteDef): boolean {
  return route.produces === undefined || route.produces === JSON_MEDIA_TYPE;
}

/** Throws ResponseSchemaMismatchError (logged) when a handler's result is not one of the route's documented responses (BERTH_VALIDATE_RESPONSES). */
export function checkResponse(route: RouteDef, result: RouteResult, log: Logger): void {
  const reasons = responseMismatches(route, result);
  if (reasons.length === 0) return;
  log.error({ status: result.status, reasons }, "response does not match its documented schema");
  throw new ResponseSchemaMismatchError(route.operationId, result.status, reasons);
}

/** The bytes and media type a result's body goes out as; undefined when the response has no body. */
export function encodeBody(route: RouteDef, result: RouteResult): { body: string | Buffer; type: string } | undefined {
  if (result.body === undefined || result.status === 204 || result.status === 304) return undefined;
  if (!isJson(route) && (typeof result.body === "string" || Buffer.isBuffer(result.body)))
    return { body: result.body, type: route.produces! };
  return { body: JSON.stringify(result.body), type: JSON_MEDIA_TYPE };
}

// ---------------------------------------------------------------------------------------------
// Request handling

/** Whether a body schema accepts no body at all (e.g. `z.object({...}).strict().optional()`). */
export function bodyOptional(schema: z.ZodType): boolean {
  return schema.safeParse(undefined).success;
}

export const UNSTORABLE_TEXT = "must be well-formed Unicode text without NUL characters";

/**
 * Field errors for every string (value or object key) in `value` that PostgreSQL cannot store and
 * no client means: a NUL character, or a lone surrogate (not well-formed Unicode). At most 20.
 */
export function unstorableText(value: unknown, at: string, out: FieldError[] = []): FieldError[] {
  const bad = (s: string) => !s.isWellFormed() || s.includes("\u0000");
  const walk = (v: unknown, path: string): void => {
    if (out.length >= 20) return;
    if (typeof v === "string") {
      if (bad(v)) out.push({ field: path, message: UNSTORABLE_TEXT });
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
      return;
    }
    if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (bad(k)) {
          out.push({ field: path, message: `a key ${UNSTORABLE_TEXT}` });
          continue;
        }
        walk(x, `${path}.${k}`);
      }
    }
  };
  walk(value, at);
  return out;
}

function parsePart(schema: z.ZodType, input: unknown, prefix: "params" | "query" | "body", errors: FieldError[]): unknown {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  errors.push(...fieldErrorsFromZod(r.error, prefix));
  return undefined;
}

function handle(route: RouteDef, deps: RouterDeps): RouterMiddleware {
  return async (ctx) => {
    const { requestId, log: requestLog } = requestState(ctx);
    const log = requestLog.child({ operationId: route.operationId });
    // Forked on first use: a route that never touches the database (the edge check) pays nothing for it.
    let forked: EntityManager | undefined;
    const em = (): EntityManager => (forked ??= deps.orm.em.fork());
    const rawParams: Record<string, string> = { ...ctx.params };

    const bodyLimit = route.bodyLimitBytes ?? deps.bodyLimitBytes;
    // An announced body over the limit is refused before anything else is done for it.
    const announced = Number(ctx.get("Content-Length") || 0);
    if (announced > bodyLimit) throw new PayloadTooLargeError(bodyLimit);

    // Rate limits: a key's calls spend its own budget (named by the key's id), whatever the answer
    // (another workspace's path included); a call without a valid key spends its address's,
    // whether the route is public or the key was refused (401, or 403 for a key of another kind).
    const limiter = deps.limits.of(route.rateLimit ?? "api");
    const policy = route.rateLimit === undefined || route.rateLimit === "none" ? "api" : route.rateLimit;
    const spend = (who: string) => {
      if (!limiter) return;
      const d = limiter.take(who, deps.now());
      for (const [k, v] of Object.entries(rateLimitHeaders(policy, d, limiter.budget))) ctx.set(k, v);
      if (!d.allowed) throw new TooManyRequestsError(policy, d.retryAfterSeconds);
    };
    const address = addressCaller(clientAddress(ctx.req.socket.remoteAddress, ctx.get("X-Forwarded-For") || undefined, deps.trustedProxy));
    let caller;
    try {
      caller = await deps.authenticator.identify(route.auth, {
        authorization: ctx.get("Authorization") || undefined,
        cookie: ctx.get("Cookie") || undefined,
        method: ctx.method,
        csrf: ctx.get(CSRF_HEADER) || undefined,
        tls: (ctx.req.socket as TLSSocket).encrypted === true,
        params: rawParams,
        get em() {
          return em();
        },
        log,
      });
    } catch (err) {
      if (err instanceof UnauthorizedError || err instanceof ForbiddenError) spend(address);
      throw err;
    }
    spend(caller === undefined ? address : budgetName(caller));
    if (caller) deps.authenticator.assertScope(caller, rawParams);

    const body = await readJsonBody(ctx.req, bodyLimit);
    const errors: FieldError[] = [];
    // Text PostgreSQL cannot store is refused everywhere (it is never meant), in one place
    for (const [k, v] of Object.entries(rawParams)) unstorableText(v, `params.${k}`, errors);
    for (const [k, v] of Object.entries(ctx.query)) unstorableText(v, `query.${k}`, errors);
    if (body.present && !route.itemsCheckText) unstorableText(body.value, "body", errors);
    const params = route.params ? parsePart(route.params, rawParams, "params", errors) : rawParams;
    let query: unknown = undefined;
    if (route.query) query = parsePart(route.query, { ...ctx.query }, "query", errors);
    else for (const k of Object.keys(ctx.query)) errors.push({ field: `query.${k}`, message: "unknown query parameter" });
    let parsedBody: unknown = undefined;
    if (route.body) {
      if (body.present) parsedBody = parsePart(route.body, body.value, "body", errors);
      else if (bodyOptional(route.body)) parsedBody = route.body.parse(undefined);
      else errors.push({ field: "body", message: "required: send a JSON body" });
    } else if (body.present) {
      errors.push({ field: "body", message: "this operation takes no request body" });
    }
    if (errors.length > 0) throw new ValidationError(errors);

    const routeCtx: RouteContext<unknown, unknown, unknown> = {
      params,
      query,
      body: parsedBody,
      rawBody: body.present ? body.raw : undefined,
      principal: caller?.kind === "workspace" ? caller : undefined,
      caller,
      get em() {
        return em();
      },
      log,
      requestId,
      koa: ctx,
    };
    const result = await route.handler(routeCtx);

    if (deps.validateResponses) checkResponse(route, result, log);

    ctx.status = result.status;
    for (const [k, v] of Object.entries(result.headers ?? {})) ctx.set(k, v);
    const encoded = encodeBody(route, result);
    if (!encoded) return;
    ctx.type = encoded.type;
    ctx.body = encoded.body;
  };
}

/** A router with every route mounted under /api/v1. The most specific path wins ("/apps/stats" over "/apps/:appId"). */
export function apiRouter(routes: readonly RouteDef[], deps: RouterDeps): Router {
  checkRoutes(routes);
  const router = new Router({ prefix: API_PREFIX, exclusive: "specificity" });
  for (const route of routes) router[route.method](route.path, handle(route, deps));
  return router;
}

/**
 * After every router: a path that some router knows with other methods is a 405 (with Allow),
 * OPTIONS on it is a 204 with Allow, anything else is a 404 route_not_found.
 */
export function fallback(routers: readonly Router[]): Koa.Middleware {
  return (ctx) => {
    const allowed = new Set<string>();
    for (const r of routers) {
      for (const layer of r.match(ctx.path, ctx.method).path) for (const m of layer.methods) allowed.add(m);
    }
    if (allowed.size === 0) throw new NotFoundError("route_not_found", `No route for ${ctx.method} ${ctx.path}.`);
    const allow = [...allowed].sort();
    if (ctx.method === "OPTIONS") {
      ctx.set("Allow", [...allow, "OPTIONS"].join(", "));
      ctx.status = 204;
      return;
    }
    throw new MethodNotAllowedError(ctx.method, allow);
  };
}
