// The OpenAPI 3.1 document, generated from the RouteDefs (never hand-written) with zod 4's
// z.toJSONSchema. Schemas that carry `.meta({ id })` become components (request-side variants
// that differ from the response side, e.g. because of defaults, are named `<id>Input`); every
// 4xx/5xx response is application/problem+json.
import { STATUS_CODES } from "node:http";
import { z } from "zod";
import { ProblemSchema, PROBLEM_MEDIA_TYPE } from "./problem.ts";
import { API_PREFIX, JSON_MEDIA_TYPE, bodyOptional, checkRoutes } from "./router.ts";
import { defineRoute, openApiPath, pathParamNames, type AuthMode, type RouteDef } from "./route.ts";
import { docsPage } from "./docs.ts";

type Json = Record<string, unknown>;

export interface OpenApiInfo {
  title: string;
  version: string;
  description?: string;
}

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: OpenApiInfo;
  servers: { url: string; description?: string }[];
  tags: { name: string }[];
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json>; securitySchemes: Record<string, Json> };
}

export const DEFAULT_INFO: OpenApiInfo = {
  title: "Berth API",
  version: "1.0.0",
  description:
    "Kubernetes-native app platform with AI governance. Errors are RFC 9457 application/problem+json with a stable `code`; see docs/api.md.",
};

type KeyKind = Exclude<AuthMode, "none" | "workspace-or-platform-admin">;

export const SECURITY_SCHEMES: Record<KeyKind, { name: string; scheme: Json }> = {
  workspace: {
    name: "workspaceKey",
    scheme: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "ws_sk_<43 base64url chars>",
      description: "A workspace API key: `Authorization: Bearer ws_sk_...`. Scoped to one workspace.",
    },
  },
  "platform-admin": {
    name: "platformAdminKey",
    scheme: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "pa_sk_<43 base64url chars>",
      description: "A platform admin key: `Authorization: Bearer pa_sk_...`, minted with `node api/cli.ts admin-key create`.",
    },
  },
  "app-key": {
    name: "appKey",
    scheme: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "gov_sk_<43 base64url chars>",
      description: "An app's scoped governance key (the credential inside GOVDB_CONNECTION: govdb://<key>@<host>/<database>).",
    },
  },
  operator: {
    name: "operatorToken",
    scheme: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description:
        "The Berth operator's Kubernetes ServiceAccount token, verified with a TokenReview; its user must be BERTH_OPERATOR_USERNAME.",
    },
  },
};

const INPUT_SUFFIX = "Input";
const REF_PREFIX = "#/components/schemas/";

const ERROR_CODES: Record<number, string> = {
  400: "invalid_json, invalid_content_length",
  401: "unauthorized",
  403: "insufficient_scope",
  404: "route_not_found, workspace_not_found, <resource>_not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "validation_failed",
  429: "rate_limited",
  431: "headers_too_large: the request line and headers exceed 16 KiB",
  500: "internal",
};

function mapRefs(node: unknown, fn: (ref: string) => string): unknown {
  if (Array.isArray(node)) return node.map((n) => mapRefs(n, fn));
  if (!node || typeof node !== "object") return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) out[k] = k === "$ref" && typeof v === "string" ? fn(v) : mapRefs(v, fn);
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Collects named schemas as components while converting each route's schemas. */
class Components {
  readonly schemas: Record<string, Json> = {};

  convert(schema: z.ZodType, io: "input" | "output", context: string): Json {
    const json = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any", cycles: "ref", reused: "inline" }) as Json;
    const defs = (json.$defs ?? {}) as Record<string, Json>;
    delete json.$defs;
    delete json.$schema;
    const names = new Map<string, string>();
    for (const name of Object.keys(defs)) {
      const base = name.startsWith("__") ? `${context}${name}` : name; // zod's generated names are per conversion
      names.set(name, io === "input" ? base + INPUT_SUFFIX : base);
    }
    const rewrite = (ref: string) => (ref.startsWith("#/$defs/") ? REF_PREFIX + (names.get(ref.slice(8)) ?? ref.slice(8)) : ref);
    for (const [name, def] of Object.entries(defs)) this.#add(names.get(name)!, mapRefs(def, rewrite) as Json);
    return mapRefs(json, rewrite) as Json;
  }

  #add(name: string, json: Json): void {
    const existing = this.schemas[name];
    if (existing && !same(existing, json)) throw new Error(`OpenAPI: two different schemas carry the id ${name.replace(/Input$/, "")}`);
    this.schemas[name] = json;
  }

  /** Dereferences a root `$ref` (parameters need the object itself). */
  resolve(json: Json): Json {
    const ref = json.$ref;
    if (typeof ref === "string" && ref.startsWith(REF_PREFIX)) return this.schemas[ref.slice(REF_PREFIX.length)] ?? json;
    return json;
  }

  /**
   * Folds `<id>Input` into `<id>` where both sides are the same, and names request-only schemas
   * plainly. Returns the ref renaming to apply to the whole document.
   */
  finish(): (ref: string) => string {
    const alias = new Map<string, string>();
    const apply = (ref: string) => {
      const name = ref.startsWith(REF_PREFIX) ? ref.slice(REF_PREFIX.length) : undefined;
      return name !== undefined && alias.has(name) ? REF_PREFIX + alias.get(name)! : ref;
    };
    for (let changed = true; changed;) {
      changed = false;
      for (const name of Object.keys(this.schemas)) {
        if (!name.endsWith(INPUT_SUFFIX) || alias.has(name)) continue;
        const base = name.slice(0, -INPUT_SUFFIX.length);
        const other = this.schemas[base];
        if (other === undefined || same(mapRefs(this.schemas[name], apply), mapRefs(other, apply))) {
          alias.set(name, base);
          changed = true;
        }
      }
    }
    for (const [from, to] of alias) {
      if (this.schemas[to] === undefined) this.schemas[to] = this.schemas[from]!;
      delete this.schemas[from];
    }
    for (const name of Object.keys(this.schemas)) this.schemas[name] = mapRefs(this.schemas[name], apply) as Json;
    return apply;
  }
}

function parameters(route: RouteDef, c: Components): Json[] {
  const out: Json[] = [];
  const fromSchema = (schema: z.ZodType | undefined, where: "path" | "query") => {
    if (!schema) return new Set<string>();
    const json = c.resolve(c.convert(schema, "input", route.operationId));
    const required = new Set((json.required as string[] | undefined) ?? []);
    const seen = new Set<string>();
    for (const [name, prop] of Object.entries((json.properties ?? {}) as Record<string, Json>)) {
      const { description, ...propSchema } = prop;
      out.push({
        name,
        in: where,
        required: where === "path" || required.has(name),
        ...(description ? { description } : {}),
        schema: propSchema,
      });
      seen.add(name);
    }
    return seen;
  };
  const declared = fromSchema(route.params, "path");
  for (const name of pathParamNames(route.path)) {
    if (!declared.has(name)) out.push({ name, in: "path", required: true, schema: { type: "string" } });
  }
  fromSchema(route.query, "query");
  return out;
}

const RATE_LIMIT_HEADERS: Json = {
  "Retry-After": {
    required: true,
    description: "Seconds to wait before the next request of this caller can pass",
    schema: { type: "integer", minimum: 1 },
  },
  "RateLimit-Policy": {
    description: 'The budget (draft-ietf-httpapi-ratelimit-headers): "api", "ingest" or "guard"; q requests at once, w seconds to refill',
    schema: { type: "string" },
  },
  RateLimit: { description: "What is left of the budget: r requests now, t seconds until it is full", schema: { type: "string" } },
};

function problemResponse(status: number, extra?: string): Json {
  const codes = ERROR_CODES[status] ?? extra;
  return {
    description: `${STATUS_CODES[status] ?? "Error"}${codes ? ` (${codes})` : ""}`,
    ...(status === 401 ? { headers: { "WWW-Authenticate": { schema: { type: "string" } } } } : {}),
    ...(status === 429 ? { headers: RATE_LIMIT_HEADERS } : {}),
    content: { [PROBLEM_MEDIA_TYPE]: { schema: { $ref: `${REF_PREFIX}Problem` } } },
  };
}

/** The OpenAPI security requirement of an auth mode: one scheme, or alternatives. */
function securityOf(auth: AuthMode): Json[] {
  const kinds: KeyKind[] = auth === "none" ? [] : auth === "workspace-or-platform-admin" ? ["workspace", "platform-admin"] : [auth];
  return kinds.map((k) => ({ [SECURITY_SCHEMES[k].name]: [] }));
}

function operation(route: RouteDef, c: Components): Json {
  const responses: Record<string, Json> = {};
  for (const [key, schema] of Object.entries(route.responses)) {
    const status = Number(key);
    if (status >= 400) {
      responses[key] = problemResponse(status, "see docs/api.md");
      continue;
    }
    const res: Json = { description: STATUS_CODES[status] ?? "Success" };
    if (schema) res.content = { [route.produces ?? JSON_MEDIA_TYPE]: { schema: c.convert(schema, "output", route.operationId) } };
    responses[key] = res;
  }
  const errors = [422, 431, 500];
  if (route.auth !== "none") errors.push(401, 403);
  if (pathParamNames(route.path).length > 0) errors.push(404);
  if (route.body) errors.push(400, 413, 415);
  if (route.rateLimit !== "none") errors.push(429);
  for (const status of errors.sort()) responses[String(status)] ??= problemResponse(status);

  const op: Json = {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: route.tags,
    security: securityOf(route.auth),
    parameters: parameters(route, c),
  };
  if (route.body)
    op.requestBody = {
      required: !bodyOptional(route.body),
      content: { [JSON_MEDIA_TYPE]: { schema: c.convert(route.body, "input", route.operationId) } },
    };
  op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
  return op;
}

/** The OpenAPI 3.1 document of these routes (pure; a script can write it to disk). */
export function buildOpenApiDocument(routes: readonly RouteDef[], info: OpenApiInfo = DEFAULT_INFO): OpenApiDocument {
  checkRoutes(routes);
  const c = new Components();
  c.convert(ProblemSchema, "output", "Problem");
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of [...routes].sort((a, b) => a.path.localeCompare(b.path))) {
    (paths[openApiPath(route.path)] ??= {})[route.method] = operation(route, c);
  }
  const rename = c.finish();
  const securitySchemes = Object.fromEntries(Object.values(SECURITY_SCHEMES).map((s) => [s.name, s.scheme]));
  const tags = [...new Set(routes.flatMap((r) => r.tags))].sort().map((name) => ({ name }));
  return {
    openapi: "3.1.0",
    info,
    servers: [{ url: API_PREFIX, description: "This server" }],
    tags,
    paths: mapRefs(paths, rename) as OpenApiDocument["paths"],
    components: { schemas: Object.fromEntries(Object.entries(c.schemas).sort(([a], [b]) => a.localeCompare(b))), securitySchemes },
  };
}

export const OpenApiDocumentSchema = z
  .object({
    openapi: z.literal("3.1.0"),
    info: z.object({ title: z.string(), version: z.string() }).loose(),
    servers: z.array(z.object({ url: z.string() }).loose()),
    tags: z.array(z.object({ name: z.string() }).loose()),
    paths: z.record(z.string(), z.record(z.string(), z.record(z.string(), z.unknown()))),
    components: z.object({ schemas: z.record(z.string(), z.unknown()), securitySchemes: z.record(z.string(), z.unknown()) }).loose(),
  })
  .loose()
  .meta({ id: "OpenApiDocument", description: "This document" });

/**
 * GET /openapi.json and GET /docs (a self-contained HTML page rendering the document; no CDN,
 * no external script). `document` is called once, on first use.
 */
export function openApiRoutes(document: () => OpenApiDocument): RouteDef[] {
  let cached: OpenApiDocument | undefined;
  const get = () => (cached ??= document());
  const page = docsPage();
  return [
    defineRoute({
      method: "get",
      path: "/openapi.json",
      operationId: "getOpenApiDocument",
      summary: "The OpenAPI 3.1 document of this API",
      tags: ["meta"],
      auth: "none",
      responses: { 200: OpenApiDocumentSchema },
      handler: () => Promise.resolve({ status: 200, body: get(), headers: { "Cache-Control": "no-cache" } }),
    }),
    defineRoute({
      method: "get",
      path: "/docs",
      operationId: "getApiDocs",
      summary: "Human-readable API reference (HTML, rendered from /api/v1/openapi.json)",
      tags: ["meta"],
      auth: "none",
      produces: "text/html; charset=utf-8",
      responses: { 200: z.string() },
      handler: () =>
        Promise.resolve({
          status: 200,
          body: page.html,
          headers: { "Content-Security-Policy": page.csp, "X-Content-Type-Options": "nosniff" },
        }),
    }),
  ];
}
